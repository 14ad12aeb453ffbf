// The invariant checker: recomputes every count and reference from the
// owners (sequences, anchors, pins, the tree) and compares. Debug builds
// run it after every mutation; tests call it directly.
#include <string>
#include <vector>

#include "core/block_hash.h"
#include "core/block_manager.h"
#include "core/error.h"

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
  for (size_t p = 0; p < P; ++p) expected[p].assign(pools_[p].capacity(), 0);
  auto own = [&](uint32_t g, uint32_t id, const std::string& owner) {
    const uint32_t p = group_pool_[g];
    if (id >= pools_[p].capacity()) broken(owner + " holds out-of-range " + blk(p, id));
    ++expected[p][id];
  };
  std::vector<uint64_t> scope_refs(scopes_.id_bound(), 0);
  seqs_.for_each([&](const Sequence& s) {
    const std::string who = "sequence " + std::to_string(s.id);
    if (s.blocks.size() != G) broken(who + " has a block list per group count mismatch");
    const uint64_t nb = (s.length() + T_ - 1) / T_;
    if (s.nodes.size() != nb) broken(who + " has " + std::to_string(s.nodes.size()) +
                                     " blocks for " + std::to_string(s.length()) + " tokens");
    for (uint32_t g = 0; g < G; ++g)
      if (s.blocks[g].size() != nb) broken(who + " has unequal block lists across groups");
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
      for (uint32_t g = 0; g < G; ++g) own(g, s.blocks[g][b], who);
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
      if (tree_.block(n, 0) != s.blocks[0][b])
        for (uint32_t g = 0; g < G; ++g) own(g, tree_.block(n, g), who + " (anchor)");
    }
  });
  for (const auto& kv : pins_) {
    const Pin& pin = kv.second;
    for (size_t e = 0; e < pin.retention.size(); ++e)
      for (uint32_t g = 0; g < G; ++g)
        own(g, pin.blocks[e * G + g], "pin of sequence " + std::to_string(kv.first));
  }

  // 2. Per pool: states, counts, free list, reference counts.
  for (size_t p = 0; p < P; ++p) {
    const BlockPool& pool = pools_[p];
    uint64_t n_free = 0, n_cached = 0, n_in_use = 0;
    for (uint32_t id = 0; id < pool.capacity(); ++id) {
      const BlockInfo& b = pool.info(id);
      if (b.ref != expected[p][id])
        broken(blk(p, id) + " has ref count " + std::to_string(b.ref) + " but " +
               std::to_string(expected[p][id]) + " owners");
      if (b.ref > 0) ++n_in_use;
      else if (b.node != kNoNode) ++n_cached;
      else ++n_free;
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
    std::vector<char> seen(pool.capacity(), 0);
    for (uint32_t id : pool.free_list()) {
      if (id >= pool.capacity()) broken("pool free list holds out-of-range id");
      if (seen[id]++) broken(blk(p, id) + " is on the free list twice");
      const BlockInfo& b = pool.info(id);
      if (b.ref != 0 || b.node != kNoNode) broken(blk(p, id) + " is on the free list but not free");
    }
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
    const uint64_t extra_digest = t.extra.empty() ? 0 : hash_bytes(t.extra.data(), t.extra.size());
    const uint64_t h = hash_block(tree_.node(t.parent).hash, scopes_.digest(t.scope), extra_digest,
                                  tree_.tokens(n), t.num_tokens);
    if (h != t.hash) broken(who + " has a stale hash");
    if (tree_.find(t.parent, t.scope, tree_.tokens(n), t.num_tokens, t.extra, t.hash) != n)
      broken(who + " is not found by its own key");
    if (t.tier != kPrimaryTier) {  // check_host_tier() checks its blocks and queue
      if (policy_.contains(n)) broken(who + " lives in the host tier but is queued for primary eviction");
      continue;
    }
    uint32_t ref0 = 0;
    for (uint32_t g = 0; g < G; ++g) {
      const uint32_t id = tree_.block(n, g);
      const BlockPool& pool = pools_[group_pool_[g]];
      if (id >= pool.capacity() || pool.info(id).node != n) broken(who + " holds a block not marked as its own");
      if (g == 0) ref0 = pool.info(id).ref;
      else if (pool.info(id).ref != ref0) broken(who + " has unequal ref counts across groups");
    }
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
  for (uint32_t n = 1; n < tree_.id_bound(); ++n) {
    if (!expiry_.contains(n)) continue;
    const TreeNode& t = tree_.node(n);
    const std::string who = "tree node " + std::to_string(n);
    if (!t.live || node_ref(n) != 0) broken(who + " awaits a priority expiry but is not cached");
    if (t.duration_ms == kNoDuration || expiry_.moment(n) != revert_moment(t.reusable_at, t.duration_ms))
      broken(who + " awaits a priority expiry at the wrong moment");
    if (time_.manual() && expiry_.moment(n) <= time_.now_ms())
      broken(who + " has an expired priority that was not reverted");
  }
  for (uint32_t p = 0; p <= kMaxPriority; ++p) {
    uint64_t last = 0;
    policy_.for_each(p, [&](uint32_t n) {
      if (policy_.age(n) < last) broken("eviction queue " + std::to_string(p) + " is out of age order");
      last = policy_.age(n);
    });
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
