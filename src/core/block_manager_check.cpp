// The invariant checker: recomputes every count and reference from the
// owners (sequences, anchors, pins, the tree) and compares. Debug builds
// run it after every mutation; tests call it directly.
#include <algorithm>
#include <string>
#include <vector>

#include "core/block_hash.h"
#include "core/block_manager.h"
#include "base/error.h"

namespace kvc {

namespace {

[[noreturn]] void broken(const std::string& what) {
  fail(KVC_ERR_INTERNAL, "cache invariant broken: " + what);
}

std::string blk(size_t pool, uint32_t id) {
  return "block " + std::to_string(id) + " of pool " + std::to_string(pool);
}

}  // namespace

void BlockManager::check_invariants() const {
  const uint32_t G = num_groups();
  const size_t P = pools_.size();

  // 1. Expected reference counts, from every owner.
  std::vector<std::vector<uint32_t>> expected(P);
  std::vector<std::vector<uint32_t>> group_of(P);  // the group each block serves
  for (size_t p = 0; p < P; ++p) {
    expected[p].assign(pools_[p].id_bound(), 0);
    group_of[p].assign(pools_[p].id_bound(), UINT32_MAX);
  }
  auto own = [&](uint32_t g, uint32_t id, const std::string& owner) {
    const uint32_t p = group_pool_[g];
    if (id >= pools_[p].id_bound() || !pools_[p].owns(id))
      broken(owner + " holds out-of-range " + blk(p, id));
    if (group_of[p][id] != UINT32_MAX && group_of[p][id] != g)
      broken(blk(p, id) + " serves layer groups " + std::to_string(group_of[p][id]) + " and " +
             std::to_string(g));
    group_of[p][id] = g;
    ++expected[p][id];
  };
  std::vector<uint32_t> holders(tree_.id_bound(), 0);
  std::vector<uint64_t> scope_refs(scopes_.id_bound(), 0);
  seqs_.for_each([&](const Sequence& s) {
    const std::string who = "sequence " + std::to_string(s.id);
    if (s.blocks.size() != G) broken(who + " has a block list per group count mismatch");
    const uint64_t nb = (s.length() + T_ - 1) / T_;
    if (s.nodes.size() != nb) broken(who + " has " + std::to_string(s.nodes.size()) +
                                     " blocks for " + std::to_string(s.length()) + " tokens");
    for (uint32_t g = 0; g < G; ++g)
      if (s.blocks[g].size() != nb) broken(who + " has unequal block lists across groups");
    if (s.window_begin.size() != G) broken(who + " has a window start per group count mismatch");
    for (uint32_t g = 0; g < G; ++g) {
      const uint64_t begin = s.window_begin[g];
      if (!windowed(g) && begin != 0) broken(who + " released blocks of full group " + std::to_string(g));
      if (begin > nb || begin > std::max(first_needed(g, s.committed), first_needed(g, s.cached)))
        broken(who + " released blocks of group " + std::to_string(g) + " still in its window");
      if (windowed(g) && std::min<uint64_t>(first_needed(g, s.committed), nb) > begin)
        broken(who + " holds blocks of group " + std::to_string(g) + " that left its window");
      for (uint64_t b = 0; b < nb; ++b)
        if ((s.blocks[g][b] == kNoBlock) != (b < begin))
          broken(who + " block " + std::to_string(b) + " of group " + std::to_string(g) +
                 (b < begin ? " is held before its window start" : " is missing"));
    }
    if (s.committed > s.length() || s.cached > s.length())
      broken(who + " has committed/cached tokens beyond its length");
    for (uint64_t c : s.slot_cursor)
      if (c > s.length()) broken(who + " has a slot cursor beyond its length");
    if (!scopes_.live(s.scope)) broken(who + " refers to a dead scope");
    ++scope_refs[s.scope];
    if (s.tail_private && s.length() % T_ != 0 && nb > 0) {
      const BlockInfo& tail = pools_[group_pool_[0]].info(s.blocks[0][nb - 1]);
      if (tail.ref != 1 || tail.node != kNoNode)
        broken(who + " marks a shared or published tail as private");
    }
    if (s.published > nb) broken(who + " has more published blocks than blocks");
    if (s.token_base % T_ != 0 || s.token_base > s.published * T_)
      broken(who + " dropped tokens of blocks the tree does not keep");
    for (uint64_t b = 0; b < nb; ++b) {
      for (uint32_t g = 0; g < G; ++g)
        if (s.blocks[g][b] != kNoBlock) own(g, s.blocks[g][b], who);
      const uint32_t n = s.nodes[b];
      if ((n != kNoNode) != (b < s.published))
        broken(who + " block " + std::to_string(b) + " is " + (n == kNoNode ? "not " : "") +
               "published against its published count " + std::to_string(s.published));
      if (n == kNoNode) continue;
      if (n >= tree_.id_bound() || !tree_.node(n).live)
        broken(who + " refers to dead tree node " + std::to_string(n));
      const TreeNode& t = tree_.node(n);
      if (t.num_tokens != T_) broken(who + " publishes a partial node at block " + std::to_string(b));
      const uint32_t want_parent = b == 0 ? RadixTree::kRoot : s.nodes[b - 1];
      if (t.parent != want_parent) broken(who + " block " + std::to_string(b) + " node has the wrong parent");
      if (holds_anchor(s, b)) {
        if (anchors_.empty()) ++holders[n];
        else
          for (uint32_t g : anchors_) own(g, tree_.block(n, g), who + " (anchor)");
      }
    }
  });
  for (const auto& kv : pins_) {
    const Pin& pin = kv.second;
    for (size_t e = 0; e < pin.retention.size(); ++e)
      for (uint32_t g = 0; g < G; ++g)
        if (pin.blocks[e * G + g] != kNoBlock)
          own(g, pin.blocks[e * G + g], "pin of sequence " + std::to_string(kv.first));
  }

  // Cached blocks serve the group of their tree slot.
  for (uint32_t n = 1; n < tree_.id_bound(); ++n) {
    if (!tree_.node(n).live || tree_.node(n).tier != kPrimaryTier) continue;
    for (uint32_t g = 0; g < G; ++g) {
      const uint32_t id = tree_.block(n, g);
      const uint32_t p = group_pool_[g];
      if (id == kNoBlock || id >= pools_[p].id_bound()) continue;  // checked below
      if (group_of[p][id] != UINT32_MAX && group_of[p][id] != g)
        broken(blk(p, id) + " sits in a tree slot of group " + std::to_string(g) +
               " but serves group " + std::to_string(group_of[p][id]));
      group_of[p][id] = g;
    }
  }

  // 2. Per pool: states, counts, free list, reference counts.
  std::vector<uint64_t> group_in_use(G, 0), group_cached(G, 0);
  for (size_t p = 0; p < P; ++p) {
    const BlockPool& pool = pools_[p];
    uint64_t n_free = 0, n_cached = 0, n_in_use = 0;
    std::vector<uint32_t> page_in_use(pool.paged() ? arena_->num_pages() : 0, 0);
    for (uint32_t id = 0; id < pool.id_bound(); ++id) {
      const BlockInfo& b = pool.info(id);
      if (!pool.owns(id)) {
        if (b.ref != 0 || b.node != kNoNode || expected[p][id] != 0)
          broken(blk(p, id) + " is used but its page belongs to no pool " + std::to_string(p));
        continue;
      }
      if (pool.paged() && b.ref > 0) ++page_in_use[id / pool.blocks_per_page()];
      if (b.ref != expected[p][id])
        broken(blk(p, id) + " has ref count " + std::to_string(b.ref) + " but " +
               std::to_string(expected[p][id]) + " owners");
      if (b.ref > 0) ++n_in_use;
      else if (b.node != kNoNode) ++n_cached;
      else ++n_free;
      if (b.ref > 0 || b.node != kNoNode) {
        const uint32_t g = group_of[p][id];
        if (g == UINT32_MAX) broken(blk(p, id) + " is not free but serves no layer group");
        ++(b.ref > 0 ? group_in_use : group_cached)[g];
      }
      if (b.node != kNoNode) {
        if (b.node >= tree_.id_bound() || !tree_.node(b.node).live)
          broken(blk(p, id) + " points to dead tree node " + std::to_string(b.node));
        if (tree_.node(b.node).tier != kPrimaryTier)
          broken(blk(p, id) + " points to tree node " + std::to_string(b.node) +
                 ", which lives in the host tier");
        bool held = false;
        for (uint32_t g = 0; g < G; ++g)
          held = held || (group_pool_[g] == p && tree_.block(b.node, g) == id);
        if (!held) broken(blk(p, id) + " is not held by its tree node");
      }
    }
    if (n_free + n_cached + n_in_use != pool.capacity())
      broken("pool " + std::to_string(p) + ": free + cached + in use != capacity");
    if (n_free != pool.num_free() || n_cached != pool.num_cached() || n_in_use != pool.num_in_use())
      broken("pool " + std::to_string(p) + " counts (free " + std::to_string(pool.num_free()) +
             ", cached " + std::to_string(pool.num_cached()) + ", in use " +
             std::to_string(pool.num_in_use()) + ") differ from its blocks (" +
             std::to_string(n_free) + ", " + std::to_string(n_cached) + ", " +
             std::to_string(n_in_use) + ")");
    for (size_t page = 0; page < page_in_use.size(); ++page)
      if (pool.owns_page(uint32_t(page)) && pool.page_in_use(uint32_t(page)) != page_in_use[page])
        broken("pool " + std::to_string(p) + " page " + std::to_string(page) +
               " counts a wrong number of blocks in use");
    std::vector<char> seen(pool.id_bound(), 0);
    for (uint32_t id : pool.free_list()) {
      if (id >= pool.id_bound() || !pool.owns(id)) broken("pool free list holds out-of-range id");
      if (seen[id]++) broken(blk(p, id) + " is on the free list twice");
      const BlockInfo& b = pool.info(id);
      if (b.ref != 0 || b.node != kNoNode) broken(blk(p, id) + " is on the free list but not free");
    }
  }

  for (uint32_t g = 0; g < G; ++g)
    if (group_counters_[g].in_use_blocks != group_in_use[g] ||
        group_counters_[g].cached_blocks != group_cached[g])
      broken("layer group " + std::to_string(g) + " counts (in use " +
             std::to_string(group_counters_[g].in_use_blocks) + ", cached " +
             std::to_string(group_counters_[g].cached_blocks) + ") differ from its blocks (" +
             std::to_string(group_in_use[g]) + ", " + std::to_string(group_cached[g]) + ")");

  if (arena_) {
    // Every page is free in the arena or owned by exactly one pool.
    std::vector<uint32_t> owners(arena_->num_pages(), 0);
    for (uint32_t page : arena_->free_pages()) ++owners[page];
    for (size_t p = 0; p < P; ++p)
      for (uint32_t page = 0; page < arena_->num_pages(); ++page)
        owners[page] += pools_[p].owns_page(page) ? 1 : 0;
    for (uint32_t page = 0; page < arena_->num_pages(); ++page)
      if (owners[page] != 1)
        broken("page " + std::to_string(page) + " has " + std::to_string(owners[page]) +
               " owners (arena and pools)");
  }

  // 3. The tree: every node findable by its key, holding its blocks, with
  // consistent links; cached leaves exactly the queued nodes.
  uint32_t live = 0;
  uint64_t queued = 0;
  std::vector<uint32_t> children(tree_.id_bound(), 0);
  for (uint32_t n = 1; n < tree_.id_bound(); ++n) {
    const TreeNode& t = tree_.node(n);
    if (!t.live) {
      if (policy_.contains(n)) broken("dead tree node " + std::to_string(n) + " is queued");
      for (const EvictionPolicy& wp : window_policies_)
        if (wp.contains(n)) broken("dead tree node " + std::to_string(n) + " has a queued slot");
      continue;
    }
    ++live;
    const std::string who = "tree node " + std::to_string(n);
    if (t.parent >= tree_.id_bound() || !tree_.node(t.parent).live) broken(who + " has a dead parent");
    if (t.parent != RadixTree::kRoot && tree_.node(t.parent).num_tokens != T_)
      broken(who + " hangs under a partial block");
    ++children[t.parent];
    if (!scopes_.live(t.scope)) broken(who + " refers to a dead scope");
    ++scope_refs[t.scope];
    if (tree_.holders(n) != holders[n])
      broken(who + " has " + std::to_string(tree_.holders(n)) + " holders but " +
             std::to_string(holders[n]) + " sequences name it");
    const uint64_t extra_digest = t.extra.empty() ? 0 : hash_bytes(t.extra.data(), t.extra.size());
    const uint64_t h = hash_block(tree_.node(t.parent).hash, scopes_.digest(t.scope), extra_digest,
                                  tree_.tokens(n), t.num_tokens);
    if (h != t.hash) broken(who + " has a stale hash");
    if (tree_.find(t.parent, t.scope, tree_.tokens(n), t.num_tokens, t.extra, t.hash) != n)
      broken(who + " is not found by its own key");
    if (t.tier != kPrimaryTier) {  // check_host_tier() checks its blocks and queue
      if (policy_.contains(n)) broken(who + " lives in the host tier but is queued for primary eviction");
      for (const EvictionPolicy& wp : window_policies_)
        if (wp.contains(n)) broken(who + " lives in the host tier but has a queued windowed slot");
      continue;
    }
    uint32_t ref0 = 0;
    bool first_anchor = true, any_block = false;
    for (uint32_t g = 0; g < G; ++g) {
      const uint32_t id = tree_.block(n, g);
      const BlockPool& pool = pools_[group_pool_[g]];
      if (id == kNoBlock) {
        if (!windowed(g)) broken(who + " lacks its block of full group " + std::to_string(g));
        continue;
      }
      any_block = true;
      if (id >= pool.id_bound() || !pool.owns(id) || pool.info(id).node != n)
        broken(who + " holds a block not marked as its own");
      if (windowed(g)) {
        const EvictionPolicy& wp = window_policies_[uint32_t(window_slot_[g])];
        if ((pool.info(id).ref == 0) != wp.contains(n))
          broken(who + " group " + std::to_string(g) +
                 (wp.contains(n) ? " slot is queued but in use" : " slot is cached but not queued"));
        continue;
      }
      if (first_anchor) ref0 = pool.info(id).ref, first_anchor = false;
      else if (pool.info(id).ref != ref0) broken(who + " has unequal ref counts across groups");
    }
    if (anchors_.empty()) {
      if (!any_block && t.num_children == 0 && tree_.holders(n) == 0) broken(who + " is unused but kept");
      if (policy_.contains(n)) broken(who + " is queued without full groups");
      continue;
    }
    // Whoever holds a windowed slot holds the node's anchor blocks too.
    if (ref0 == 0)
      for (uint32_t g : windowed_)
        if (tree_.block(n, g) != kNoBlock && pools_[group_pool_[g]].info(tree_.block(n, g)).ref != 0)
          broken(who + " has a windowed slot in use while its anchor blocks are cached");
    if (ref0 > 0 && t.parent != RadixTree::kRoot && node_ref(t.parent) == 0)
      broken(who + " is in use but its parent is not");
    // A leaf for primary eviction: no primary child (offloaded ones do not count).
    const bool evictable = ref0 == 0 && primary_leaf(n);
    if (evictable != policy_.contains(n))
      broken(who + (evictable ? " is a cached leaf but not queued" : " is queued but not evictable"));
    if (evictable) {
      ++queued;
      if (policy_.priority(n) != t.priority || policy_.age(n) != t.age)
        broken(who + " is queued with a stale priority or age");
    }
  }
  if (live != tree_.size()) broken("tree size differs from its live nodes");
  for (uint32_t n = 0; n < tree_.id_bound(); ++n)
    if (tree_.node(n).live && children[n] != tree_.node(n).num_children)
      broken("tree node " + std::to_string(n) + " has a wrong child count");
  if (queued != policy_.size()) broken("eviction queue size differs from the cached leaves");
  // Retention expiries: only cached nodes wait for one, at the moment their
  // duration ends; on the manual clock none is due (advancing expires them).
  for (uint32_t key = 0; key < tree_.id_bound() * expiry_stride_; ++key) {
    if (!expiry_.contains(key)) continue;
    const uint32_t n = key / expiry_stride_;
    const TreeNode& t = tree_.node(n);
    const std::string who = "tree node " + std::to_string(n);
    if (key % expiry_stride_ != 0) {
      const uint32_t k = key % expiry_stride_ - 1;
      if (!t.live || !window_policies_[k].contains(n))
        broken(who + " group " + std::to_string(windowed_[k]) +
               " slot awaits a priority expiry but is not cached");
      if (time_.manual() && expiry_.moment(key) <= time_.now_ms())
        broken(who + " has an expired slot priority that was not reverted");
      continue;
    }
    if (!t.live || node_ref(n) != 0) broken(who + " awaits a priority expiry but is not cached");
    if (t.duration_ms == kNoDuration || expiry_.moment(key) != revert_moment(t.reusable_at, t.duration_ms))
      broken(who + " awaits a priority expiry at the wrong moment");
    if (time_.manual() && expiry_.moment(key) <= time_.now_ms())
      broken(who + " has an expired priority that was not reverted");
  }
  auto check_order = [&](const EvictionPolicy& q, const std::string& name) {
    for (uint32_t p = 0; p <= kMaxPriority; ++p) {
      uint64_t last = 0;
      q.for_each(p, [&](uint32_t n) {
        if (q.age(n) < last) broken(name + " " + std::to_string(p) + " is out of age order");
        last = q.age(n);
      });
    }
  };
  check_order(policy_, "eviction queue");
  for (size_t k = 0; k < window_policies_.size(); ++k) {
    check_order(window_policies_[k], "window eviction queue of group " + std::to_string(windowed_[k]));
    uint64_t cached_slots = 0;
    for (uint32_t n = 1; n < tree_.id_bound(); ++n) {
      const TreeNode& t = tree_.node(n);
      const uint32_t id = t.live && t.tier == kPrimaryTier ? tree_.block(n, windowed_[k]) : kNoBlock;
      if (id != kNoBlock && pools_[group_pool_[windowed_[k]]].info(id).ref == 0) ++cached_slots;
    }
    if (cached_slots != window_policies_[k].size())
      broken("window eviction queue of group " + std::to_string(windowed_[k]) +
             " size differs from its cached slots");
  }

  check_host_tier();

  // 4. Scopes: references are exactly sequences plus tree nodes.
  for (uint32_t id = 0; id < scopes_.id_bound(); ++id) {
    const uint64_t have = scopes_.live(id) ? scopes_.refs(id) : 0;
    if (have != scope_refs[id])
      broken("scope " + std::to_string(id) + " has " + std::to_string(have) + " references but " +
             std::to_string(scope_refs[id]) + " owners");
  }
}

}  // namespace kvc
