#include "core/block_manager.h"

#include <algorithm>
#include <string>

#include "core/block_hash.h"
#include "base/error.h"

namespace kvc {

namespace {

uint64_t blocks_for(uint64_t tokens, uint32_t T) { return (tokens + T - 1) / T; }

std::string seq_name(uint64_t id) { return "sequence " + std::to_string(id); }

[[noreturn]] void not_found(uint64_t id) {
  fail(KVC_ERR_NOT_FOUND, "no " + seq_name(id) + " in this cache");
}

void check_priority(uint32_t v, const char* what) {
  if (v > kMaxPriority)
    invalid_argument(std::string(what) + " must be in 0..100, got " + std::to_string(v));
}

}  // namespace

namespace {

// Tree capacity. Without windows a node holds one block of each group, so
// a pool's share of one group bounds it (as before). With windows the
// anchor group may take a whole shared pool; without any anchor, nodes
// outlive their blocks while sequences name them, so allow twice the
// blocks (publishing stops, never fails, when the tree is full).
uint32_t tree_capacity(const LayerGrouping& grouping,
                       const std::vector<std::unique_ptr<PoolMemory>>& memory) {
  if (memory.empty()) return 0;
  uint32_t ref = 0;
  bool any_window = false, any_full = false;
  for (uint32_t g = 0; g < grouping.groups.size(); ++g) {
    if (grouping.groups[g].window != 0) any_window = true;
    else if (!any_full) any_full = true, ref = g;
  }
  const uint32_t pool = grouping.groups[ref].pool;
  if (!any_window) return uint32_t(memory[pool]->num_blocks() / grouping.pools[pool].groups.size());
  if (any_full) return uint32_t(memory[pool]->num_blocks());
  uint64_t total = 0;
  for (const auto& m : memory) total += m->num_blocks();
  return uint32_t(std::min<uint64_t>(2 * total, UINT32_MAX - 2));
}

// Block sets of the host tier: every host node holds one.
uint64_t sets_in(const std::vector<std::unique_ptr<PoolMemory>>& memory,
                 const LayerGrouping& grouping) {
  if (memory.empty()) return 0;
  const uint32_t p = grouping.groups[0].pool;
  return memory[p]->num_blocks() / grouping.pools[p].groups.size();
}

std::vector<uint64_t> blocks_of(const std::vector<std::unique_ptr<PoolMemory>>& memory) {
  std::vector<uint64_t> v;
  for (const auto& m : memory) v.push_back(m->num_blocks());
  return v;
}

}  // namespace

BlockManager::BlockManager(const CacheConfig& config, const LayerGrouping& grouping,
                           const std::vector<std::unique_ptr<PoolMemory>>& memory,
                           const std::vector<std::unique_ptr<PoolMemory>>& host_memory,
                           Device& device, uint64_t arena_pages)
    : cfg_(config),
      grouping_(grouping),
      memory_(memory),
      host_memory_(host_memory),
      device_(device),
      T_(config.tokens_per_block),
      tree_(uint32_t(tree_capacity(grouping, memory) + sets_in(host_memory, grouping)),
            config.tokens_per_block, uint32_t(grouping.groups.size()),
            /*track_children=*/!host_memory.empty() || arena_pages != 0),
      policy_(tree_.id_bound()),
      host_(blocks_of(host_memory), tree_.id_bound(), config.secondary_offload_min_priority),
      time_(config.manual_clock),
      expiry_(0) {
  const uint32_t G = uint32_t(grouping.groups.size());
  pool_has_anchor_.assign(grouping.pools.size(), 0);
  pool_windowed_.resize(grouping.pools.size());
  for (uint32_t g = 0; g < G; ++g) {
    const LayerGroup& lg = grouping.groups[g];
    group_pool_.push_back(lg.pool);
    window_.push_back(lg.window);
    if (lg.window == 0) {
      if (anchors_.empty()) ref_group_ = g;
      anchors_.push_back(g);
      window_slot_.push_back(-1);
      pool_has_anchor_[lg.pool] = 1;
    } else {
      window_slot_.push_back(int32_t(windowed_.size()));
      windowed_.push_back(g);
      pool_windowed_[lg.pool].push_back(g);
      window_policies_.emplace_back(tree_.id_bound());
    }
  }
  expiry_stride_ = 1 + uint32_t(windowed_.size());
  expiry_ = ExpiryHeap(uint32_t(uint64_t(tree_.id_bound()) * expiry_stride_));
  if (arena_pages != 0) arena_ = std::make_unique<PageArena>(uint32_t(arena_pages));
  for (size_t p = 0; p < grouping.pools.size(); ++p) {
    pool_groups_.push_back(uint32_t(grouping.pools[p].groups.size()));
    if (arena_) pools_.emplace_back(*arena_, uint32_t(memory[p]->num_blocks() / arena_pages));
    else pools_.emplace_back(memory[p]->num_blocks());
  }
  page_deficit_.assign(pools_.size(), 0);
  page_budget_.assign(pools_.size(), 0);
  group_counters_.resize(G);
  set_scratch_.resize(G);
  set_scratch2_.resize(G);
  set_scratch3_.resize(G);
  evicted_.resize(kEvictChunk * G);
  window_scratch_.resize(G);
  pool_scratch_.resize(pools_.size());
  pool_scratch2_.resize(pools_.size());
}

// ---------------------------------------------------------------------------
// Small helpers
// ---------------------------------------------------------------------------

uint32_t BlockManager::node_ref(uint32_t node) const {
  if (tree_.node(node).tier != kPrimaryTier) return 0;  // host nodes are never in use
  if (!anchors_.empty()) return pools_[group_pool_[ref_group_]].info(tree_.block(node, ref_group_)).ref;
  uint32_t ref = tree_.holders(node);
  for (uint32_t g = 0; g < num_groups(); ++g) {
    const uint32_t b = tree_.block(node, g);
    if (b != kNoBlock) ref += pools_[group_pool_[g]].info(b).ref;
  }
  return ref;
}

bool BlockManager::node_has_block(uint32_t node) const {
  for (uint32_t g = 0; g < num_groups(); ++g)
    if (tree_.block(node, g) != kNoBlock) return true;
  return false;
}

uint64_t BlockManager::free_sets() const {
  uint64_t n = UINT64_MAX;
  for (size_t p = 0; p < pools_.size(); ++p)
    n = std::min<uint64_t>(n, pools_[p].num_free() / pool_groups_[p]);
  return n;
}

bool BlockManager::refuse(std::string message) const {
  refusal_.status = KVC_ERR_OUT_OF_BLOCKS;
  refusal_.message = std::move(message);
  return false;
}

std::string BlockManager::call_name(const char* what, uint64_t id) {
  return id == kNoId ? std::string(what) : std::string(what) + " " + seq_name(id);
}

// Every cached block can be evicted: a cached anchor node's subtree holds
// only cached anchors (holders hold ancestors), so leaves-first reaches it,
// and every cached windowed slot is queued. So free + cached - taken is
// exactly what a pool can still give.
bool BlockManager::have_blocks(const uint64_t* needed, const uint64_t* taken, const char* what,
                               uint64_t id) const {
  if (arena_) return plan_pages(needed, taken, what, id);
  for (size_t p = 0; p < pools_.size(); ++p) {
    const uint64_t free = pools_[p].num_free();
    const uint64_t evictable = pools_[p].num_cached() - taken[p];
    if (needed[p] <= free + evictable) continue;
    if (windowed_.empty()) {
      // Every group needs the same count: say it per group, as a user thinks.
      const uint64_t per = needed[p] / pool_groups_[p];
      const uint64_t f = free_sets();
      uint64_t e = UINT64_MAX;
      for (size_t q = 0; q < pools_.size(); ++q)
        e = std::min<uint64_t>(e, (pools_[q].num_cached() - taken[q]) / pool_groups_[q]);
      return refuse(call_name(what, id) + " needs " + std::to_string(per) +
                    " blocks per layer group but only " +
                    std::to_string(std::min(f + e, (free + evictable) / pool_groups_[p])) +
                    " are free (" + std::to_string(f) + ") or evictable (" + std::to_string(e) +
                    ")");
    }
    return refuse(call_name(what, id) + " needs " + std::to_string(needed[p]) + " blocks of pool " +
                  std::to_string(p) + " (" + std::to_string(pool_groups_[p]) +
                  " layer groups) but only " + std::to_string(free + evictable) + " are free (" +
                  std::to_string(free) + ") or evictable (" + std::to_string(evictable) + ")");
  }
  return true;
}

bool BlockManager::plan_pages(const uint64_t* needed, const uint64_t* taken, const char* what,
                              uint64_t id) const {
  pages_pending_ = false;
  uint64_t short_pages = 0;
  for (size_t p = 0; p < pools_.size(); ++p) {
    const BlockPool& pool = pools_[p];
    const uint64_t have = pool.num_free() + pool.num_cached() - taken[p];
    const uint64_t bpp = pool.blocks_per_page();
    page_deficit_[p] = needed[p] > have ? (needed[p] - have + bpp - 1) / bpp : 0;
    short_pages += page_deficit_[p];
  }
  if (short_pages == 0) return true;
  // Spare pages: the arena's, then idle pages (no block in use) of pools
  // that keep enough for this call. A taken block may sit in an idle page:
  // count one page fewer per taken block.
  uint64_t supply = arena_->num_free();
  for (size_t q = 0; q < pools_.size(); ++q) {
    page_budget_[q] = 0;
    if (page_deficit_[q] != 0) continue;
    const BlockPool& pool = pools_[q];
    uint64_t idle = 0;
    for (uint32_t page = 0; page < arena_->num_pages(); ++page)
      idle += pool.owns_page(page) && pool.page_in_use(page) == 0 ? 1 : 0;
    idle = idle > taken[q] ? idle - taken[q] : 0;
    const uint64_t spare = pool.num_free() + pool.num_cached() - taken[q] - needed[q];
    page_budget_[q] = std::min<uint64_t>(idle, spare / pool.blocks_per_page());
    supply += page_budget_[q];
  }
  if (short_pages > supply) {
    size_t p = 0;
    while (page_deficit_[p] == 0) ++p;
    return refuse(call_name(what, id) + " needs " + std::to_string(needed[p]) + " blocks of pool " +
                  std::to_string(p) + " but only " +
                  std::to_string(pools_[p].num_free() + pools_[p].num_cached() - taken[p]) +
                  " are free or evictable in it, and the pools need " +
                  std::to_string(short_pages) + " more pages than the " +
                  std::to_string(supply) + " free or idle pages others can give");
  }
  pages_pending_ = true;
  return true;
}

void BlockManager::evict_subtree(uint32_t node) {
  // Every descendant of a cached anchor node is cached: leaves first
  // (leaves for primary eviction: host-tier children go with their parent).
  auto primary_child = [&](uint32_t n) {
    for (uint32_t c = tree_.first_child(n); c != kNoNode; c = tree_.next_sibling(c))
      if (!in_host_tier(c)) return c;
    return kNoNode;
  };
  for (;;) {
    uint32_t leaf = node;
    for (uint32_t c = primary_child(leaf); c != kNoNode; c = primary_child(leaf)) leaf = c;
    evict_node(leaf);
    if (leaf == node) return;
  }
}

void BlockManager::empty_page(uint32_t pool, uint32_t page) {
  BlockPool& bp = pools_[pool];
  const uint32_t bpp = bp.blocks_per_page();
  for (uint32_t id = page * bpp; id < (page + 1) * bpp; ++id) {
    const uint32_t node = bp.info(id).node;
    if (node == kNoNode) continue;  // free (an evicted subtree may have freed it)
    uint32_t group = UINT32_MAX;
    for (uint32_t g = 0; g < num_groups() && group == UINT32_MAX; ++g)
      if (group_pool_[g] == pool && tree_.block(node, g) == id) group = g;
    if (windowed(group)) evict_window_slot(node, group);
    else evict_subtree(node);
  }
  bp.give_page(page);
}

void BlockManager::move_pages() {
  if (!pages_pending_) return;
  pages_pending_ = false;
  for (size_t p = 0; p < pools_.size(); ++p) {
    for (; page_deficit_[p] > 0; --page_deficit_[p]) {
      if (arena_->num_free() == 0) {
        // Empty an idle page of a pool with spare pages.
        size_t q = 0;
        while (page_budget_[q] == 0) ++q;
        --page_budget_[q];
        uint32_t page = 0;
        while (!pools_[q].owns_page(page) || pools_[q].page_in_use(page) != 0) ++page;
        empty_page(uint32_t(q), page);
      }
      pools_[p].take_page();
    }
  }
}

bool BlockManager::have_sets(uint64_t needed_sets, const char* what, uint64_t id) const {
  for (size_t p = 0; p < pools_.size(); ++p) {
    pool_scratch_[p] = needed_sets * pool_groups_[p];
    pool_scratch2_[p] = 0;
  }
  return have_blocks(pool_scratch_.data(), pool_scratch2_.data(), what, id);
}

bool BlockManager::needs_copy_on_write(const Sequence& s) const {
  if (s.tail_private || s.length() % T_ == 0 || s.num_blocks() == 0) return false;
  // The tail is inside every window, so every group holds it; a windowed
  // block may sit in a node whose other blocks are not the sequence's.
  for (uint32_t g = 0; g < num_groups(); ++g) {
    const BlockInfo& tail = pools_[group_pool_[g]].info(s.blocks[g].back());
    if (tail.ref > 1 || tail.node != kNoNode) return true;
  }
  return false;
}

uint32_t BlockManager::lead_group(const Sequence& s, uint64_t b) const {
  for (uint32_t g = 0; g < num_groups(); ++g)
    if (s.blocks[g][b] != kNoBlock) return g;
  return UINT32_MAX;
}

// Every group's block, not only one: a rewind gives a sequence back a
// windowed block it had lent a node (rewind()), and that block may be shared
// with a pin or a fork while the sequence's anchor blocks are its own.
bool BlockManager::holds_alone(const Sequence& s, uint64_t b) const {
  for (uint32_t g = 0; g < num_groups(); ++g) {
    const uint32_t blk = s.blocks[g][b];
    if (blk == kNoBlock) continue;
    const BlockInfo& info = pools_[group_pool_[g]].info(blk);
    if (info.ref != 1 || info.node != kNoNode) return false;
  }
  return true;
}

bool BlockManager::holds_anchor(const Sequence& s, uint64_t b) const {
  const uint32_t n = s.nodes[b];
  if (n == kNoNode) return false;
  if (anchors_.empty()) return true;  // names the node: a holder
  return tree_.block(n, ref_group_) != s.blocks[ref_group_][b];
}

void BlockManager::grow(std::vector<int32_t>& v, uint64_t n) {
  if (v.capacity() < n) v.reserve(std::max<uint64_t>(n, 2 * v.capacity()));
}

void BlockManager::reserve_blocks(Sequence& s, uint64_t n) {
  if (s.nodes.capacity() >= n) return;
  const uint64_t cap = std::max<uint64_t>(n, 2 * s.nodes.capacity());
  for (auto& b : s.blocks) b.reserve(cap);
  s.nodes.reserve(cap);
}

void BlockManager::debug_check() const {
#ifndef NDEBUG
  check_invariants();
#endif
}

// ---------------------------------------------------------------------------
// Reference counting, eviction, allocation
// ---------------------------------------------------------------------------

void BlockManager::hold_slot(uint32_t node, uint32_t g) {
  const uint32_t blk = tree_.block(node, g);
  BlockPool& pool = pools_[group_pool_[g]];
  if (pool.info(blk).ref == 0) {
    --group_counters_[g].cached_blocks;
    ++group_counters_[g].in_use_blocks;
    // Cached: it leaves its queue; its priority is set again on release.
    const int32_t k = window_slot_[g];
    if (k < 0) {
      if (policy_.contains(node)) policy_.remove(node);
      if (!expiry_.empty()) expiry_.cancel(expiry_key(node, 0));
    } else {
      window_policies_[k].remove(node);
      if (!expiry_.empty()) expiry_.cancel(expiry_key(node, uint32_t(k) + 1));
    }
  }
  pool.add_ref(blk);
}

void BlockManager::hold_node(uint32_t node) {
  for (uint32_t g = 0; g < num_groups(); ++g)
    if (tree_.block(node, g) != kNoBlock) hold_slot(node, g);
}

void BlockManager::hold_anchor(uint32_t node) {
  if (anchors_.empty()) {
    ++tree_.holders(node);
    return;
  }
  for (uint32_t g : anchors_) hold_slot(node, g);
}

void BlockManager::release_anchor(uint32_t node, BlockRetention r) {
  if (anchors_.empty()) {
    --tree_.holders(node);
    erase_if_unused(node);
    return;
  }
  for (uint32_t g = 0; g < num_groups(); ++g)
    set_scratch2_[g] = windowed(g) ? kNoBlock : tree_.block(node, g);
  release_set(set_scratch2_.data(), 1, r);
}

void BlockManager::on_cached(uint32_t node, BlockRetention r) {
  TreeNode& t = tree_.node(node);
  t.priority = r.priority;
  t.duration_ms = r.duration_ms;
  t.age = ++clock_;
  if (r.duration_ms != kNoDuration && r.priority != kDefaultPriority) {
    // The duration counts from when the block became reusable.
    const uint64_t at = revert_moment(t.reusable_at, r.duration_ms);
    if (at <= time_.now_ms()) t.priority = kDefaultPriority;
    else expiry_.schedule(expiry_key(node, 0), at);
  }
  if (primary_leaf(node)) policy_.push_newest(node, t.priority, t.age);
}

void BlockManager::on_window_cached(uint32_t node, uint32_t g, BlockRetention r) {
  const uint32_t k = uint32_t(window_slot_[g]);
  uint32_t priority = r.priority;
  if (r.duration_ms != kNoDuration && r.priority != kDefaultPriority) {
    const uint64_t at = revert_moment(tree_.node(node).reusable_at, r.duration_ms);
    if (at <= time_.now_ms()) priority = kDefaultPriority;
    else expiry_.schedule(expiry_key(node, k + 1), at);
  }
  window_policies_[k].push_newest(node, priority, ++clock_);
}

void BlockManager::expire_due() {
  if (expiry_.empty()) return;
  const uint64_t now = time_.now_ms();
  while (!expiry_.empty() && expiry_.next_moment() <= now) {
    const uint32_t key = expiry_.next_node();
    expiry_.cancel(key);
    const uint32_t node = key / expiry_stride_;
    const uint32_t k = key % expiry_stride_;
    if (k == 0) {
      TreeNode& t = tree_.node(node);
      t.priority = kDefaultPriority;
      if (policy_.contains(node)) {
        policy_.remove(node);
        policy_.insert_by_age(node, kDefaultPriority, t.age);
      } else if (host_.enabled() && host_.policy.contains(node)) {
        host_.policy.remove(node);
        host_.policy.insert_by_age(node, kDefaultPriority, t.age);
      }
    } else {
      EvictionPolicy& wp = window_policies_[k - 1];
      const uint64_t age = wp.age(node);
      wp.remove(node);
      wp.insert_by_age(node, kDefaultPriority, age);
    }
  }
}

void BlockManager::mark_published(uint32_t node, const Sequence& s, uint64_t b) {
  TreeNode& t = tree_.node(node);
  t.priority = s.priority_of_block(b, T_);
  t.reusable_at = time_.now_ms();
}

void BlockManager::advance_clock(uint64_t ms) {
  if (!time_.manual())
    fail(KVC_ERR_INVALID_STATE,
         "this cache reads the monotonic clock; kvc_cache_advance_clock needs a cache created "
         "with kvc_config_set_manual_clock(config, true)");
  if (ms > UINT64_MAX - time_.now_ms())
    invalid_argument("milliseconds (" + std::to_string(ms) + ") would overflow the clock, now at " +
                     std::to_string(time_.now_ms()) + " ms");
  time_.advance(ms);
  expire_due();
  debug_check();
}

bool BlockManager::release_block(uint32_t g, uint32_t blk) {
  BlockPool& pool = pools_[group_pool_[g]];
  const bool cached = pool.release(blk);
  if (pool.info(blk).ref == 0) {
    GroupStats& c = group_counters_[g];
    --c.in_use_blocks;
    if (cached) ++c.cached_blocks;
  }
  return cached;
}

void BlockManager::release_set(const uint32_t* blocks, size_t stride, BlockRetention r) {
  uint32_t cached = kNoNode;
  for (uint32_t g = 0; g < num_groups(); ++g) {
    const uint32_t b = blocks[g * stride];
    if (b == kNoBlock || !release_block(g, b)) continue;
    const uint32_t node = pools_[group_pool_[g]].info(b).node;
    if (windowed(g)) on_window_cached(node, g, r);
    else cached = node;
  }
  if (cached != kNoNode) on_cached(cached, r);
}

void BlockManager::release_node(uint32_t node, BlockRetention r) {
  for (uint32_t g = 0; g < num_groups(); ++g) set_scratch2_[g] = tree_.block(node, g);
  release_set(set_scratch2_.data(), 1, r);
}

void BlockManager::release_position(Sequence& s, uint64_t b) {
  const BlockRetention retention = s.retention_of_block(b, T_);
  const bool anchor = holds_anchor(s, b);
  for (uint32_t g = 0; g < num_groups(); ++g) set_scratch2_[g] = s.blocks[g][b];
  release_set(set_scratch2_.data(), 1, retention);
  if (anchor) release_anchor(s.nodes[b], retention);
}

void BlockManager::release_out_of_window(Sequence& s) {
  for (uint32_t g : windowed_) {
    const uint64_t end = std::min<uint64_t>(first_needed(g, s.committed), s.num_blocks());
    for (uint64_t b = s.window_begin[g]; b < end; ++b) {
      const uint32_t blk = s.blocks[g][b];
      s.blocks[g][b] = kNoBlock;
      if (blk == kNoBlock) continue;
      ++group_counters_[g].released_blocks;
      if (release_block(g, blk))
        on_window_cached(pools_[group_pool_[g]].info(blk).node, g, s.retention_of_block(b, T_));
    }
    if (end > s.window_begin[g]) s.window_begin[g] = end;
  }
}

void BlockManager::evict_node(uint32_t node) {
  policy_.remove(node);
  if (!expiry_.empty()) expiry_.cancel(expiry_key(node, 0));
  if (host_.host_children[node] != 0) drop_host_children(node);  // useless without it
  const TreeNode& t = tree_.node(node);
  const uint32_t parent = t.parent;
  for (uint32_t g = 0; g < num_groups(); ++g) {
    const uint32_t blk = tree_.block(node, g);
    if (blk == kNoBlock) continue;
    if (windowed(g)) {
      // A node without its anchor blocks is useless: its windowed slots go too.
      const uint32_t k = uint32_t(window_slot_[g]);
      window_policies_[k].remove(node);
      expiry_.cancel(expiry_key(node, k + 1));
    }
    pools_[group_pool_[g]].evict(blk);
    --group_counters_[g].cached_blocks;
    ++group_counters_[g].evicted_blocks;
  }
  scopes_.unref(t.scope);
  tree_.erase(node);
  ++counters_.evicted_blocks;
  // A cached parent left without primary children becomes evictable at its age.
  if (parent != RadixTree::kRoot && primary_leaf(parent) && node_ref(parent) == 0) {
    const TreeNode& p = tree_.node(parent);
    policy_.insert_by_age(parent, p.priority, p.age);
  }
  // The next victims are most often this parent and its ancestors, or the
  // next oldest leaf.
  const uint32_t next = policy_.victim();
  if (next != kNoNode) tree_.prefetch_erase_path(next, 3);
}

void BlockManager::evict_window_slot(uint32_t node, uint32_t g) {
  const uint32_t k = uint32_t(window_slot_[g]);
  window_policies_[k].remove(node);
  expiry_.cancel(expiry_key(node, k + 1));
  pools_[group_pool_[g]].evict(tree_.block(node, g));
  tree_.set_block(node, g, kNoBlock);
  --group_counters_[g].cached_blocks;
  ++group_counters_[g].evicted_blocks;
  if (anchors_.empty()) erase_if_unused(node);
}

void BlockManager::erase_if_unused(uint32_t node) {
  while (node != RadixTree::kRoot) {
    const TreeNode& t = tree_.node(node);
    if (tree_.holders(node) != 0 || !tree_.is_leaf(node) || node_has_block(node)) return;
    const uint32_t parent = t.parent;
    scopes_.unref(t.scope);
    tree_.erase(node);
    ++counters_.evicted_blocks;
    node = parent;
  }
}

void BlockManager::evict_one(uint32_t pool) {
  uint32_t best = kNoNode, best_group = UINT32_MAX;
  uint32_t best_priority = UINT32_MAX;
  uint64_t best_age = 0;
  auto consider = [&](uint32_t node, uint32_t priority, uint64_t age, uint32_t group) {
    if (node == kNoNode) return;
    if (priority < best_priority || (priority == best_priority && age < best_age)) {
      best = node, best_group = group, best_priority = priority, best_age = age;
    }
  };
  if (pool_has_anchor_[pool]) {
    const uint32_t v = policy_.victim();
    if (v != kNoNode) consider(v, policy_.priority(v), policy_.age(v), UINT32_MAX);
  }
  for (uint32_t g : pool_windowed_[pool]) {
    const EvictionPolicy& wp = window_policies_[uint32_t(window_slot_[g])];
    const uint32_t v = wp.victim();
    if (v != kNoNode) consider(v, wp.priority(v), wp.age(v), g);
  }
  if (best == kNoNode)  // have_blocks() rules this out
    fail(KVC_ERR_INTERNAL, "pool " + std::to_string(pool) + " has no block to evict");
  if (best_group == UINT32_MAX) evict_node(best);
  else evict_window_slot(best, best_group);
}

uint32_t BlockManager::alloc_block(uint32_t g) {
  const uint32_t p = group_pool_[g];
  BlockPool& pool = pools_[p];
  if (pool.num_free() == 0) expire_due();  // the victim order must be current
  while (pool.num_free() == 0) {
    if (arena_ && arena_->num_free() > 0) pool.take_page();  // free memory first
    else evict_one(p);
  }
  ++group_counters_[g].in_use_blocks;
  return pool.acquire_free();
}

void BlockManager::alloc_set(uint32_t* out) {
  for (uint32_t g = 0; g < num_groups(); ++g) out[g] = alloc_block(g);
}

void BlockManager::evict_ahead(uint64_t count) {
  expire_due();  // the victim order must be current
  const uint32_t G = num_groups();
  const bool expiring = !expiry_.empty();
  // Scope references are dropped once per run of victims in one scope.
  uint32_t scope = ScopeTable::kNone, scope_refs = 0;
  // The victims most often climb a chain from its leaf: what erasing them
  // touches is warmed kLead victims ahead, one more ancestor per victim
  // (`far`, the last one warmed), and the whole lead again when the next
  // victim is not the parent.
  constexpr int kLead = 6;
  uint32_t v = policy_.victim();
  uint32_t far = v == kNoNode ? RadixTree::kRoot : tree_.prefetch_erase_path(v, kLead);
  for (uint64_t i = 0; i < count; ++i) {
    if (v == kNoNode)  // have_blocks() rules this out
      fail(KVC_ERR_INTERNAL, "no block to evict");
    policy_.remove(v);
    if (expiring) expiry_.cancel(expiry_key(v, 0));
    const TreeNode& t = tree_.node(v);
    const uint32_t parent = t.parent;
    const uint32_t* blocks = tree_.blocks(v);
    for (uint32_t g = 0; g < G; ++g) evicted_[i * G + g] = blocks[g];
    if (t.scope != scope) {
      if (scope_refs != 0) scopes_.unref(scope, scope_refs);
      scope = t.scope;
      scope_refs = 0;
    }
    ++scope_refs;
    tree_.erase(v);
    // A cached parent left without children becomes evictable at its age.
    bool climbs = false;
    if (parent != RadixTree::kRoot && tree_.is_leaf(parent) && node_ref(parent) == 0) {
      const TreeNode& p = tree_.node(parent);
      policy_.insert_by_age(parent, p.priority, p.age);
      climbs = true;
    }
    v = policy_.victim();
    if (v == kNoNode) continue;
    if (!climbs || v != parent) {
      far = tree_.prefetch_erase_path(v, kLead);
    } else if (far != RadixTree::kRoot) {
      far = tree_.node(far).parent;
      if (far != RadixTree::kRoot) tree_.prefetch_erase_path(far, 0);
    }
  }
  if (scope_refs != 0) scopes_.unref(scope, scope_refs);
  for (uint32_t g = 0; g < G; ++g) {
    group_counters_[g].cached_blocks -= count;
    group_counters_[g].evicted_blocks += count;
  }
  counters_.evicted_blocks += count;
}

void BlockManager::append_new_sets(Sequence& s, uint64_t count) {
  if (!windowed_.empty() || arena_ || host_.enabled()) {
    for (uint64_t i = 0; i < count; ++i) append_new_set(s);
    return;
  }
  // Every eviction frees one block of each group, so this many are needed.
  const uint64_t free = free_sets();
  uint64_t victims = count > free ? count - free : 0;
  const uint32_t G = num_groups();
  // Within the capacity reserved by the caller: no allocation.
  const uint64_t first = s.num_blocks();
  for (auto& v : s.blocks) v.resize(first + count);
  s.nodes.resize(first + count, kNoNode);
  if (G == 1) {
    // The free blocks, then each victim's block, which alloc_block would
    // push and pop at once.
    BlockPool& pool = pools_[group_pool_[0]];
    uint32_t* out = s.blocks[0].data() + first;
    for (uint64_t i = 0; i < count - victims; ++i) out[i] = pool.acquire_free();
    for (uint64_t i = count - victims; i < count; i += kEvictChunk) {
      const uint64_t n = std::min(count - i, kEvictChunk);
      evict_ahead(n);
      pool.evict_into_use(evicted_.data(), n);
      std::copy(evicted_.begin(), evicted_.begin() + ptrdiff_t(n), out + i);
    }
  } else {
    const uint32_t* ready = evicted_.data();  // blocks of victims evicted ahead
    const uint32_t* ready_end = ready;
    for (uint64_t i = first; i < first + count; ++i) {
      for (uint32_t g = 0; g < G; ++g) {
        BlockPool& pool = pools_[group_pool_[g]];
        if (pool.num_free() == 0) {  // where alloc_block would evict
          if (ready == ready_end) {
            const uint64_t n = std::min(victims, kEvictChunk);
            evict_ahead(n);
            victims -= n;
            ready = evicted_.data();
            ready_end = ready + n * G;
          }
          for (uint32_t h = 0; h < G; ++h) pools_[group_pool_[h]].evict(ready[h]);
          ready += G;
        }
        s.blocks[g][i] = pool.acquire_free();
      }
    }
  }
  for (uint32_t g = 0; g < G; ++g) group_counters_[g].in_use_blocks += count;
  if (count != 0) s.tail_private = true;
}

void BlockManager::copy_set(const uint32_t* src, const uint32_t* dst, uint32_t rows,
                            void* stream) {
  for (uint32_t g = 0; g < num_groups(); ++g) {
    const BlockCopy c{src[g], dst[g], rows};
    device_.copy_blocks(memory_[group_pool_[g]]->base(), grouping_.groups[g].geometry, &c, 1,
                        stream);
  }
}

void BlockManager::append_new_set(Sequence& s) {
  alloc_set(set_scratch_.data());
  for (uint32_t g = 0; g < num_groups(); ++g) s.blocks[g].push_back(set_scratch_[g]);
  s.nodes.push_back(kNoNode);
  s.tail_private = true;
}

void BlockManager::copy_on_write(Sequence& s, void* stream) {
  const uint64_t b = s.num_blocks() - 1;
  for (uint32_t g = 0; g < num_groups(); ++g) set_scratch3_[g] = s.blocks[g][b];
  alloc_set(set_scratch_.data());  // the old tail is held, so never evicted here
  copy_set(set_scratch3_.data(), set_scratch_.data(), uint32_t(s.length() % T_), stream);
  release_position(s, b);
  for (uint32_t g = 0; g < num_groups(); ++g) s.blocks[g][b] = set_scratch_[g];
  s.tail_private = true;
}

// ---------------------------------------------------------------------------
// Lookup
// ---------------------------------------------------------------------------

BlockManager::Match BlockManager::match_prefix(const int32_t* tokens, uint64_t n, uint32_t scope,
                                               const std::vector<ExtraKey>& extras) const {
  match_full_.clear();
  Match m;
  if (!cfg_.block_reuse || scope == ScopeTable::kNone || n < 2) return m;
  const uint64_t limit = n - 1;  // the last prompt token is always recomputed
  const uint64_t scope_digest = scopes_.digest(scope);
  uint32_t parent = RadixTree::kRoot;
  uint64_t parent_hash = 0;
  const uint64_t max_full = limit / T_;
  if (extras.empty()) {
    // Hashing, table slots and nodes pipelined over the blocks.
    tree_.match_full_blocks(parent, parent_hash, scope, scope_digest, tokens, max_full,
                            match_full_);
    if (!match_full_.empty()) parent = match_full_.back();
  } else {
    for (uint64_t b = 0; b < max_full; ++b) {
      const int32_t* toks = tokens + b * T_;
      encode_block_extras(extras, b * T_, (b + 1) * T_, extra_scratch_);
      const uint64_t extra_digest =
          extra_scratch_.empty() ? 0 : hash_bytes(extra_scratch_.data(), extra_scratch_.size());
      const uint64_t h = hash_block(parent_hash, scope_digest, extra_digest, toks, T_);
      const uint32_t node = tree_.find(parent, scope, toks, T_, extra_scratch_, h);
      if (node == kNoNode) break;
      match_full_.push_back(node);
      parent = node;
      parent_hash = h;
    }
  }
  if (!windowed_.empty()) {
    const size_t full = match_full_.size();
    trim_to_windows();
    if (match_full_.size() != full) return m;  // the partial block would follow a gap
  }
  if (!cfg_.partial_reuse) return m;
  const uint64_t begin = uint64_t(match_full_.size()) * T_;
  if (begin >= limit) return m;
  const uint32_t room = uint32_t(std::min<uint64_t>(T_, limit - begin));
  if (any_extra_overlaps(extras, begin, begin + room)) return m;
  const int32_t* want = tokens + begin;
  tree_.for_each_first_token_match(parent, scope, want[0], [&](uint32_t node) {
    const TreeNode& t = tree_.node(node);
    if (!t.extra.empty()) return;
    for (uint32_t g : windowed_)  // the block is copied or taken whole
      if (tree_.block(node, g) == kNoBlock) return;
    const bool usable = cfg_.copy_on_partial_reuse || (node_ref(node) == 0 && tree_.is_leaf(node));
    if (!usable) return;
    const int32_t* have = tree_.tokens(node);
    const uint32_t most = std::min<uint32_t>(room, t.num_tokens);
    uint32_t k = 0;
    while (k < most && have[k] == want[k]) ++k;
    if (k > m.partial_tokens) {
      m.partial = node;
      m.partial_tokens = k;
    }
  });
  m.in_place = m.partial != kNoNode && !cfg_.copy_on_partial_reuse;
  return m;
}

void BlockManager::trim_to_windows() const {
  // last_missing[w]: the last position before k whose slot windowed group
  // w lacks. Reusing k blocks needs none missing from first_needed(k*T) on.
  std::vector<int64_t>& last_missing = window_scratch_;
  for (size_t w = 0; w < windowed_.size(); ++w) last_missing[w] = -1;
  size_t best = 0;
  for (size_t k = 1; k <= match_full_.size(); ++k) {
    bool ok = true;
    for (size_t w = 0; w < windowed_.size(); ++w) {
      const uint32_t g = windowed_[w];
      if (tree_.block(match_full_[k - 1], g) == kNoBlock) last_missing[w] = int64_t(k - 1);
      ok = ok && last_missing[w] < int64_t(first_needed(g, k * T_));
    }
    if (ok) best = k;
  }
  match_full_.resize(best);
}

// ---------------------------------------------------------------------------
// Sequences
// ---------------------------------------------------------------------------

const Sequence& BlockManager::sequence(uint64_t id) const {
  const Sequence* s = seqs_.find(id);
  if (s == nullptr) not_found(id);
  return *s;
}

Sequence& BlockManager::sequence(uint64_t id) {
  Sequence* s = seqs_.find(id);
  if (s == nullptr) not_found(id);
  return *s;
}

namespace {

void check_options(const SequenceOptions& o) {
  check_priority(o.prompt_priority, "options->prompt_priority");
  check_priority(o.decode_priority, "options->decode_priority");
  check_retention_ranges(o.retention_ranges);
  for (size_t i = 0; i < o.extra_keys.size(); ++i) {
    const ExtraKey& k = o.extra_keys[i];
    if (k.length == 0)
      invalid_argument("options->extra_keys[" + std::to_string(i) + "].length must be > 0, got 0");
    if (k.offset > kMaxSequenceTokens || k.length > kMaxSequenceTokens)
      invalid_argument("options->extra_keys[" + std::to_string(i) + "] covers tokens " +
                       std::to_string(k.offset) + "+" + std::to_string(k.length) +
                       ", beyond the longest sequence (" + std::to_string(kMaxSequenceTokens) +
                       " tokens)");
  }
}

void check_length(uint64_t n, const char* what) {
  if (n > kMaxSequenceTokens)
    invalid_argument(std::string(what) + " would make the sequence " + std::to_string(n) +
                     " tokens long; the limit is " + std::to_string(kMaxSequenceTokens));
}

// `n` more tokens on a sequence of `length` (<= kMaxSequenceTokens): compared
// without forming length + n, which wraps for n near UINT64_MAX.
void check_growth(uint64_t length, uint64_t n, const char* what) {
  if (n > kMaxSequenceTokens - length)
    invalid_argument(std::string(what) + " = " + std::to_string(n) + " on a sequence of " +
                     std::to_string(length) + " tokens would pass the limit of " +
                     std::to_string(kMaxSequenceTokens) + " tokens");
}

std::vector<ExtraKey> sorted_extras(const SequenceOptions& o) {
  std::vector<ExtraKey> keys = o.extra_keys;
  sort_extra_keys(keys);
  return keys;
}

}  // namespace

uint64_t BlockManager::add(uint64_t id, const int32_t* tokens, uint64_t n,
                           const SequenceOptions& options, void* stream) {
  uint64_t cached = 0;
  if (!try_add(id, tokens, n, options, stream, &cached)) fail(refusal_.status, refusal_.message);
  return cached;
}

void BlockManager::extend(uint64_t id, const int32_t* tokens, uint64_t n, void* stream) {
  if (!try_extend(id, tokens, n, stream)) fail(refusal_.status, refusal_.message);
}

void BlockManager::extend_batch(const uint64_t* ids, const int32_t* tokens, size_t count,
                                void* stream) {
  if (!try_extend_batch(ids, tokens, count, stream)) fail(refusal_.status, refusal_.message);
}

bool BlockManager::try_add(uint64_t id, const int32_t* tokens, uint64_t n,
                           const SequenceOptions& options, void* stream,
                           uint64_t* cached_tokens_out) {
  if (n == 0) invalid_argument("num_tokens must be > 0: a prompt cannot be empty");
  check_length(n, "num_tokens");
  check_options(options);
  if (seqs_.find(id) != nullptr)
    fail(KVC_ERR_ALREADY_EXISTS, seq_name(id) + " already exists");

  const std::string scope_bytes =
      encode_scope(options.has_salt, options.salt, options.has_lora, options.lora_id);
  std::vector<ExtraKey> extras = sorted_extras(options);
  const Match m = match_prefix(tokens, n, scopes_.find(scope_bytes), extras);
  const uint64_t num_blocks = blocks_for(n, T_);
  const uint64_t full = match_full_.size();
  const uint64_t cached_tokens = full * T_ + m.partial_tokens;
  // Per group, the first reused position it holds (a windowed group needs
  // only the blocks the first computed token can attend to).
  for (uint32_t g = 0; g < num_groups(); ++g)
    window_scratch_[g] = int64_t(std::min<uint64_t>(first_needed(g, cached_tokens), full));
  // Host-tier nodes are copied back (onboarded) into a fresh set each.
  const uint64_t onboards = count_in_host(match_full_, m.partial);
  // Cached primary blocks this add takes into use are no longer evictable.
  uint64_t* taken = pool_scratch2_.data();
  uint64_t* needed = pool_scratch_.data();
  const uint64_t sets = num_blocks - full - (m.in_place ? 1 : 0) + onboards;
  for (size_t p = 0; p < pools_.size(); ++p) {
    taken[p] = 0;
    needed[p] = sets * pool_groups_[p];
  }
  // Reused nodes nobody holds stop being evictable; that can only matter
  // when the free blocks alone fall short (or pages may have to move).
  bool short_of_free = arena_ != nullptr;
  for (size_t p = 0; p < pools_.size(); ++p) short_of_free |= needed[p] > pools_[p].num_free();
  for (uint32_t g = 0; g < num_groups() && short_of_free; ++g) {
    const BlockPool& pool = pools_[group_pool_[g]];
    for (uint64_t b = uint64_t(window_scratch_[g]); b < full; ++b) {
      const uint32_t node = match_full_[b];
      if (!in_host_tier(node))
        taken[group_pool_[g]] += pool.info(tree_.block(node, g)).ref == 0 ? 1 : 0;
    }
    if (m.partial != kNoNode && !in_host_tier(m.partial))
      taken[group_pool_[g]] += pool.info(tree_.block(m.partial, g)).ref == 0 ? 1 : 0;
  }
  if (!have_blocks(needed, taken, "adding the prompt")) return false;

  // Everything that allocates on the host, before the first change.
  auto seq = std::make_unique<Sequence>();
  seq->id = id;
  seq->prompt_priority = uint8_t(options.prompt_priority);
  seq->decode_priority = uint8_t(options.decode_priority);
  seq->decode_duration_ms = options.decode_duration_ms;
  seq->retention = options.retention_ranges;
  seq->prompt_len = n;
  seq->token_base = full * T_;
  seq->tokens.assign(tokens + full * T_, tokens + n);
  seq->extra_keys = std::move(extras);
  seq->blocks.resize(num_groups());
  seq->window_begin.assign(num_groups(), 0);
  seq->slot_cursor.assign(num_groups(), 0);
  reserve_blocks(*seq, num_blocks + 1);
  seqs_.reserve_one();
  seq->scope = scopes_.intern(scope_bytes);
  try {
    prepare_sets(sets, match_full_, m.partial, window_scratch_.data(), stream);  // host tier: onboard, offload
  } catch (...) {
    scopes_.unref(seq->scope);
    throw;
  }

  // From here on nothing can fail (the vectors have their capacity).
  const uint32_t G = num_groups();
  if (windowed_.empty()) {
    // Holding the reused nodes in bulk (hold_anchor of every group). Only
    // cached leaves are queued for eviction, and every reused node but the
    // last has its successor for a primary child (prepare_sets brought
    // back any from the host tier): only the last can be queued.
    seq->nodes.assign(match_full_.begin(), match_full_.end());
    if (full > 0 && policy_.contains(match_full_[full - 1])) policy_.remove(match_full_[full - 1]);
    if (!expiry_.empty())
      for (uint64_t i = 0; i < full; ++i) expiry_.cancel(expiry_key(match_full_[i], 0));
    for (uint32_t g = 0; g < G; ++g) {
      std::vector<uint32_t>& out = seq->blocks[g];
      out.resize(full);
      tree_.gather_blocks(match_full_.data(), full, g, out.data());
      const uint64_t was_cached = pools_[group_pool_[g]].add_refs(out.data(), full);
      group_counters_[g].cached_blocks -= was_cached;
      group_counters_[g].in_use_blocks += was_cached;
    }
  } else {
    for (uint64_t b = 0; b < full; ++b) {
      const uint32_t node = match_full_[b];
      hold_anchor(node);  // with full groups: the sequence's own anchor blocks
      for (uint32_t g = 0; g < G; ++g) {
        if (!windowed(g)) {
          seq->blocks[g].push_back(tree_.block(node, g));
        } else if (b >= uint64_t(window_scratch_[g])) {
          hold_slot(node, g);
          seq->blocks[g].push_back(tree_.block(node, g));
        } else {
          seq->blocks[g].push_back(kNoBlock);
        }
      }
      seq->nodes.push_back(node);
    }
    for (uint32_t g = 0; g < G; ++g)
      seq->window_begin[g] = windowed(g) ? uint64_t(window_scratch_[g]) : 0;
  }
  for (uint32_t g = 0; g < G; ++g) {
    GroupStats& c = group_counters_[g];
    c.reused_blocks += full - uint64_t(window_scratch_[g]) + (m.partial != kNoNode ? 1 : 0);
    c.missed_blocks += num_blocks - full - (m.partial != kNoNode ? 1 : 0);
  }
  if (m.partial != kNoNode) hold_node(m.partial);
  move_pages();  // after the holds: idle pages are exact now
  if (m.partial != kNoNode) {
    if (m.in_place) {
      // Copy on partial reuse is off and nothing else uses the block: the
      // sequence takes it over, and it leaves the tree.
      const uint32_t parent = tree_.node(m.partial).parent;
      for (uint32_t g = 0; g < num_groups(); ++g) {
        const uint32_t blk = tree_.block(m.partial, g);
        pools_[group_pool_[g]].set_node(blk, kNoNode);
        seq->blocks[g].push_back(blk);
      }
      seq->nodes.push_back(kNoNode);
      scopes_.unref(tree_.node(m.partial).scope);
      tree_.erase(m.partial);
      if (anchors_.empty()) erase_if_unused(parent);
    } else {
      // Copy on partial reuse: a new block gets the matched rows.
      append_new_set(*seq);
      for (uint32_t g = 0; g < num_groups(); ++g) {
        set_scratch3_[g] = tree_.block(m.partial, g);
        set_scratch_[g] = seq->blocks[g].back();
      }
      copy_set(set_scratch3_.data(), set_scratch_.data(), m.partial_tokens, stream);
      const TreeNode& t = tree_.node(m.partial);
      release_node(m.partial, {t.priority, t.duration_ms});
    }
  }
  append_new_sets(*seq, num_blocks - seq->num_blocks());

  const uint64_t reused = full + (m.partial != kNoNode ? 1 : 0);
  counters_.reused_blocks += reused;
  counters_.missed_blocks += num_blocks - reused;
  seq->published = full;
  seq->tail_private = true;  // new, copied or taken over: never shared
  seq->cached = cached_tokens;
  seq->committed = seq->cached;
  *cached_tokens_out = seq->cached;
  seqs_.insert(std::move(seq));
  debug_check();
  return true;
}

bool BlockManager::try_extend(uint64_t id, const int32_t* tokens, uint64_t n, void* stream) {
  Sequence& s = sequence(id);
  if (n == 0) return true;
  check_growth(s.length(), n, "num_tokens");
  const uint64_t len = s.length();
  const bool cow = needs_copy_on_write(s);
  const uint64_t new_blocks = blocks_for(len + n, T_) - s.num_blocks();
  if (!have_sets(new_blocks + (cow ? 1 : 0), "extending", id)) return false;
  grow(s.tokens, s.tokens.size() + n);
  reserve_blocks(s, s.num_blocks() + new_blocks);
  prepare_sets(new_blocks + (cow ? 1 : 0), no_nodes_, kNoNode, nullptr, stream);
  move_pages();

  if (cow) copy_on_write(s, stream);
  s.tokens.insert(s.tokens.end(), tokens, tokens + n);
  append_new_sets(s, new_blocks);
  debug_check();
  return true;
}

Sequence& BlockManager::sequence_for_batch(const uint64_t* ids, size_t i, uint64_t epoch) {
  return claim_for_batch(seqs_.find(ids[i]), ids, i, epoch);
}

Sequence& BlockManager::claim_for_batch(Sequence* s, const uint64_t* ids, size_t i,
                                        uint64_t epoch) {
  if (s == nullptr)
    fail(KVC_ERR_NOT_FOUND, "ids[" + std::to_string(i) + "]: no " + seq_name(ids[i]) +
                                " in this cache");
  if (s->batch_mark == epoch)
    invalid_argument("ids[" + std::to_string(i) + "] = " + std::to_string(ids[i]) +
                     " appears twice in the batch");
  s->batch_mark = epoch;
  return *s;
}

namespace {

// The two lines of a sequence a decode step touches (sequence.h).
inline void prefetch_sequence(const Sequence* s) {
  __builtin_prefetch(s, 1);
  __builtin_prefetch(reinterpret_cast<const char*>(s) + 64, 1);
}

}  // namespace

bool BlockManager::try_extend_batch(const uint64_t* ids, const int32_t* tokens, size_t count,
                                    void* stream) {
  const uint64_t epoch = next_batch_epoch();
  // The lookups run ahead of the checks: table slots kSlotAhead ids ahead,
  // sequences (found, not yet claimed) kSeqAhead ahead, so that the chain
  // slot -> sequence -> token array costs no wait per sequence. Errors are
  // still raised in index order by claim_for_batch.
  constexpr size_t kSlotAhead = 16, kSeqAhead = 8;
  batch_scratch_.resize(count);
  Sequence** seqs = batch_scratch_.data();
  batch_cow_.resize(std::max(batch_cow_.size(), count));
  for (size_t j = 0; j < std::min(count, kSlotAhead); ++j) seqs_.prefetch(ids[j]);
  for (size_t j = 0; j < std::min(count, kSeqAhead); ++j) {
    seqs[j] = seqs_.find(ids[j]);
    if (seqs[j] != nullptr) prefetch_sequence(seqs[j]);
  }
  uint64_t needed = 0;
  for (size_t i = 0; i < count; ++i) {
    if (i + kSlotAhead < count) seqs_.prefetch(ids[i + kSlotAhead]);
    if (i + kSeqAhead < count) {
      Sequence* ahead = seqs_.find(ids[i + kSeqAhead]);
      seqs[i + kSeqAhead] = ahead;
      if (ahead != nullptr) prefetch_sequence(ahead);
    }
    Sequence* s = &claim_for_batch(seqs[i], ids, i, epoch);
    if (s->length() >= kMaxSequenceTokens)  // the message is only built on failure
      check_length(s->length() + 1, ("ids[" + std::to_string(i) + "]").c_str());
    const bool cow = needs_copy_on_write(*s);
    batch_cow_[i] = cow;
    needed += (s->length() % T_ == 0 ? 1 : 0) + (cow ? 1 : 0);
    // Capacity only (no visible change), so it may happen before the checks end.
    grow(s->tokens, s->tokens.size() + 1);
    reserve_blocks(*s, s->num_blocks() + 1);
    // The line the token goes to, for the loop below.
    __builtin_prefetch(s->tokens.data() + s->tokens.size(), 1);
  }
  if (!have_sets(needed, "this decode step")) return false;
  prepare_sets(needed, no_nodes_, kNoNode, nullptr, stream);
  move_pages();
  for (size_t i = 0; i < count; ++i) {
    if (i + kSeqAhead < count) {
      const Sequence* ahead = seqs[i + kSeqAhead];
      __builtin_prefetch(ahead->tokens.data() + ahead->tokens.size(), 1);
    }
    Sequence& s = *seqs[i];
    if (batch_cow_[i] && needs_copy_on_write(s)) copy_on_write(s, stream);  // a sibling may have copied first
    const bool new_block = s.length() % T_ == 0;
    s.tokens.push_back(tokens[i]);
    if (new_block) append_new_set(s);
  }
  debug_check();
  return true;
}

void BlockManager::link_new_node(uint32_t node, uint32_t scope) {
  for (uint32_t g = 0; g < num_groups(); ++g)
    if (set_scratch_[g] != kNoBlock) pools_[group_pool_[g]].set_node(set_scratch_[g], node);
  scopes_.ref(scope);
}

bool BlockManager::publish_full(Sequence& s, uint64_t b, const std::string& extra) {
  const uint32_t parent = b == 0 ? RadixTree::kRoot : s.nodes[b - 1];
  const int32_t* toks = s.token_at(b * T_);
  const uint64_t extra_digest = extra.empty() ? 0 : hash_bytes(extra.data(), extra.size());
  const uint64_t h =
      hash_block(tree_.node(parent).hash, scopes_.digest(s.scope), extra_digest, toks, T_);
  const uint32_t found = tree_.find(parent, s.scope, toks, T_, extra, h);
  if (found != kNoNode && in_host_tier(found)) return adopt_host_node(s, b, found);
  if (found != kNoNode) {
    // Already cached: keep our own copy, anchor the cached one.
    s.nodes[b] = found;
    if (holds_anchor(s, b)) hold_anchor(found);
    // A windowed slot the node lost to eviction takes this sequence's block,
    // so the prefix is reusable again in that group; only a block this
    // sequence holds alone (a fork sibling may not hold the node's anchor).
    for (uint32_t g : windowed_) {
      const uint32_t own = s.blocks[g][b];
      if (own == kNoBlock || tree_.block(found, g) != kNoBlock) continue;
      const BlockInfo& info = pools_[group_pool_[g]].info(own);
      if (info.ref != 1 || info.node != kNoNode) continue;
      tree_.set_block(found, g, own);
      pools_[group_pool_[g]].set_node(own, found);
    }
    return true;
  }
  // A block shared with a fork sibling or a pin waits until this sequence
  // holds it alone: the sibling may not hold the ancestors it would be
  // linked under.
  if (lead_group(s, b) == UINT32_MAX || tree_.full()) return false;  // nothing to publish / no room
  if (!holds_alone(s, b)) return false;
  for (uint32_t g = 0; g < num_groups(); ++g) set_scratch_[g] = s.blocks[g][b];
  std::string key_extra = extra;  // small or empty: no allocation in the common case
  const uint32_t node =
      tree_.insert(parent, s.scope, toks, T_, std::move(key_extra), h, set_scratch_.data());
  link_new_node(node, s.scope);
  mark_published(node, s, b);
  s.nodes[b] = node;
  if (anchors_.empty()) ++tree_.holders(node);
  return true;
}

void BlockManager::commit(uint64_t id, uint64_t num_computed) {
  Sequence& s = sequence(id);
  if (num_computed > s.length())
    invalid_argument("num_computed (" + std::to_string(num_computed) + ") exceeds the length (" +
                     std::to_string(s.length()) + " tokens) of " + seq_name(id));
  const uint64_t committed = std::max(s.committed, num_computed);
  if (cfg_.block_reuse) {
    // Publish every full computed block not yet published, in order (also
    // ones an earlier commit had to leave while a fork sibling shared them).
    const uint64_t first = s.published;
    const uint64_t end = committed / T_;
    if (end > first) {
      // Encode the extra keys of every block first: the only allocation.
      if (extras_scratch_.size() < end - first) extras_scratch_.resize(end - first);
      for (uint64_t b = first; b < end; ++b) {
        if (s.extra_keys.empty()) extras_scratch_[b - first].clear();
        else encode_block_extras(s.extra_keys, b * T_, (b + 1) * T_, extras_scratch_[b - first]);
      }
      while (s.published < end && publish_full(s, s.published, extras_scratch_[s.published - first]))
        ++s.published;
    }
  }
  s.committed = committed;
  if (!windowed_.empty()) release_out_of_window(s);
  debug_check();
}

void BlockManager::rewind(uint64_t id, uint64_t n) {
  Sequence& s = sequence(id);
  if (n > s.length())
    invalid_argument("cannot rewind " + std::to_string(n) + " tokens: " + seq_name(id) +
                     " has only " + std::to_string(s.length()));
  if (n == 0) return;
  const uint64_t new_len = s.length() - n;
  for (uint32_t g : windowed_) {
    // The blocks a windowed group released are gone: the new last token
    // must still see its whole window.
    const uint64_t begin = s.window_begin[g];
    if (begin == 0) continue;
    const uint64_t shortest = begin * T_ + window_[g] - 1;
    if (new_len < shortest)
      invalid_argument("cannot rewind " + std::to_string(n) + " tokens: " + seq_name(id) +
                       " would be " + std::to_string(new_len) + " tokens long, but layer group " +
                       std::to_string(g) + " (window " + std::to_string(window_[g]) +
                       ") has released the blocks before token " + std::to_string(begin * T_) +
                       ", so it can rewind at most " + std::to_string(s.length() - shortest) +
                       " tokens (rewind before committing rejected tokens)");
  }
  const uint64_t keep = blocks_for(new_len, T_);
  // Rewinding into the published blocks whose tokens only the tree keeps:
  // take the kept rows of the new tail back from its node. Reserve first.
  const bool rebase = new_len < s.token_base;
  const uint64_t base = new_len / T_ * T_;
  if (rebase) s.tokens.reserve(new_len - base);
  if (rebase) {
    const int32_t* kept = new_len > base ? tree_.tokens(s.nodes[new_len / T_]) : nullptr;
    s.tokens.assign(kept, kept + (new_len - base));
    s.token_base = base;
  }
  while (s.num_blocks() > keep) {
    const uint64_t b = s.num_blocks() - 1;
    release_position(s, b);
    for (auto& v : s.blocks) v.pop_back();
    s.nodes.pop_back();
  }
  if (new_len % T_ != 0) {
    // The tail is no longer full: it is no longer the published block. A
    // tree block kept as the tail is copied before the next write.
    const uint64_t b = keep - 1;
    const uint32_t node = s.nodes[b];
    if (node != kNoNode) {
      if (holds_anchor(s, b)) {
        // Windowed blocks this sequence gave the node go back to it: it no
        // longer holds the node's anchor blocks. A pin or fork sharing such
        // a block keeps it as a block of no node (holds_alone() then keeps
        // it out of any new node until one holder is left).
        for (uint32_t g : windowed_) {
          const uint32_t own = s.blocks[g][b];
          if (own == kNoBlock || tree_.block(node, g) != own) continue;
          tree_.set_block(node, g, kNoBlock);
          pools_[group_pool_[g]].set_node(own, kNoNode);
        }
        release_anchor(node, s.retention_of_block(b, T_));
      }
      s.nodes[b] = kNoNode;
    }
  }
  s.published = std::min<uint64_t>(s.published, new_len / T_);
  if (!rebase) s.tokens.resize(new_len - s.token_base);
  s.tail_private = false;  // the new tail may be a shared or published block
  s.committed = std::min(s.committed, new_len);
  s.cached = std::min(s.cached, new_len);
  for (uint64_t& c : s.slot_cursor) c = std::min(c, new_len);
  debug_check();
}

void BlockManager::fork(uint64_t parent, uint64_t child) {
  Sequence& p = sequence(parent);
  if (seqs_.find(child) != nullptr)
    fail(KVC_ERR_ALREADY_EXISTS, seq_name(child) + " already exists");
  auto c = std::make_unique<Sequence>(p);
  c->id = child;
  c->batch_mark = 0;
  c->tail_private = false;
  seqs_.reserve_one();
  p.tail_private = false;

  scopes_.ref(c->scope);
  for (uint64_t b = 0; b < c->num_blocks(); ++b) {
    for (uint32_t g = 0; g < num_groups(); ++g)
      if (c->blocks[g][b] != kNoBlock) pools_[group_pool_[g]].add_ref(c->blocks[g][b]);
    if (holds_anchor(*c, b)) hold_anchor(c->nodes[b]);
  }
  seqs_.insert(std::move(c));
  debug_check();
}

void BlockManager::publish_tail(Sequence& s) {
  const uint64_t b = s.committed / T_;
  const uint32_t rows = uint32_t(s.committed % T_);
  if (rows == 0 || b >= s.num_blocks()) return;
  const uint32_t parent = b == 0 ? RadixTree::kRoot : s.nodes[b - 1];
  if (parent == kNoNode) return;
  if (b != s.published) return;  // its parent is not published
  if (tree_.full()) return;
  if (!holds_alone(s, b)) return;  // shared or already in the tree
  if (any_extra_overlaps(s.extra_keys, b * T_, b * T_ + rows)) return;
  const int32_t* toks = s.token_at(b * T_);
  const uint64_t h = hash_block(tree_.node(parent).hash, scopes_.digest(s.scope), 0, toks, rows);
  extra_scratch_.clear();
  if (tree_.find(parent, s.scope, toks, rows, extra_scratch_, h) != kNoNode) return;
  for (uint32_t g = 0; g < num_groups(); ++g) set_scratch_[g] = s.blocks[g][b];
  const uint32_t node =
      tree_.insert(parent, s.scope, toks, rows, std::string(), h, set_scratch_.data());
  link_new_node(node, s.scope);
  mark_published(node, s, b);
}

void BlockManager::remove(uint64_t id) {
  Sequence& s = sequence(id);
  if (cfg_.block_reuse && cfg_.partial_reuse) publish_tail(s);
  // Deepest first, so a parent is always released after its children.
  for (uint64_t b = s.num_blocks(); b > 0; --b) release_position(s, b - 1);
  scopes_.unref(s.scope);
  seqs_.erase(id);
  debug_check();
}

void BlockManager::pin(uint64_t id) {
  Sequence& s = sequence(id);
  if (pins_.count(id) != 0) fail(KVC_ERR_ALREADY_EXISTS, seq_name(id) + " is already pinned");
  // The published blocks: the ones that outlive the sequence in the tree,
  // a chain from the root, so a pin never holds a node without its parent.
  Pin pin;
  const uint32_t G = num_groups();
  pin.blocks.reserve(s.published * G);
  pin.retention.reserve(s.published);
  for (uint64_t b = 0; b < s.published; ++b) {
    for (uint32_t g = 0; g < G; ++g) pin.blocks.push_back(tree_.block(s.nodes[b], g));
    pin.retention.push_back(s.retention_of_block(b, T_));
  }
  auto it = pins_.emplace(id, std::move(pin)).first;
  for (uint64_t b = 0; b < s.published; ++b) hold_node(s.nodes[b]);
  (void)it;
  debug_check();
}

void BlockManager::unpin(uint64_t id) {
  auto it = pins_.find(id);
  if (it == pins_.end()) fail(KVC_ERR_NOT_FOUND, seq_name(id) + " is not pinned");
  const Pin& p = it->second;
  const uint32_t G = num_groups();
  for (size_t e = p.retention.size(); e > 0; --e)
    release_set(&p.blocks[(e - 1) * G], 1, p.retention[e - 1]);
  pins_.erase(it);
  debug_check();
}

// ---------------------------------------------------------------------------
// Queries
// ---------------------------------------------------------------------------

uint64_t BlockManager::probe(const int32_t* tokens, uint64_t n,
                             const SequenceOptions& options) const {
  if (n == 0) invalid_argument("num_tokens must be > 0: a prompt cannot be empty");
  check_length(n, "num_tokens");
  check_options(options);
  const std::string scope_bytes =
      encode_scope(options.has_salt, options.salt, options.has_lora, options.lora_id);
  const Match m = match_prefix(tokens, n, scopes_.find(scope_bytes), sorted_extras(options));
  return uint64_t(match_full_.size()) * T_ + m.partial_tokens;
}

uint64_t BlockManager::blocks_needed(uint64_t id, uint64_t n) const {
  const Sequence& s = sequence(id);
  if (n == 0) return 0;
  check_growth(s.length(), n, "num_tokens");
  return blocks_for(s.length() + n, T_) - s.num_blocks() + (needs_copy_on_write(s) ? 1 : 0);
}

void BlockManager::reset_reuse() {
  uint64_t in_use = 0;
  for (const BlockPool& p : pools_) in_use += p.num_in_use();
  if (in_use > 0)
    fail(KVC_ERR_INVALID_STATE, "cannot reset the reuse state while " + std::to_string(in_use) +
                                    " blocks are in use (by sequences or pins)");
  const uint64_t evicted = counters_.evicted_blocks;
  std::vector<uint64_t> group_evicted;
  for (const GroupStats& c : group_counters_) group_evicted.push_back(c.evicted_blocks);
  for (uint32_t v = policy_.victim(); v != kNoNode; v = policy_.victim()) evict_node(v);
  for (uint32_t g : windowed_) {
    const EvictionPolicy& wp = window_policies_[uint32_t(window_slot_[g])];
    for (uint32_t v = wp.victim(); v != kNoNode; v = wp.victim()) evict_window_slot(v, g);
  }
  for (uint32_t v = host_.policy.victim(); v != kNoNode; v = host_.policy.victim())
    evict_host_node(v);
  // A reset is not an eviction.
  counters_.evicted_blocks = evicted;
  for (uint32_t g = 0; g < num_groups(); ++g) group_counters_[g].evicted_blocks = group_evicted[g];
  debug_check();
}

CacheStats BlockManager::stats() const {
  CacheStats s = counters_;
  s.num_blocks = s.free_blocks = s.cached_blocks = s.in_use_blocks = 0;
  for (const BlockPool& p : pools_) {
    s.num_blocks += p.capacity();
    s.free_blocks += p.num_free();
    s.cached_blocks += p.num_cached();
    s.in_use_blocks += p.num_in_use();
  }
  if (arena_) {
    // Pages no pool owns count as blocks of the pool with the largest blocks.
    uint64_t per_page = UINT64_MAX;
    for (const BlockPool& p : pools_) per_page = std::min<uint64_t>(per_page, p.blocks_per_page());
    s.num_blocks += arena_->num_free() * per_page;
    s.free_blocks += arena_->num_free() * per_page;
  }
  s.host = host_.counters;
  for (const BlockPool& p : host_.pools) {
    s.host_blocks += p.capacity();
    s.host_free_blocks += p.num_free();
    s.host_cached_blocks += p.num_cached();
  }
  s.num_sequences = seqs_.size();
  s.num_pinned = pins_.size();
  s.tree_nodes = tree_.size();
  return s;
}

GroupStats BlockManager::group_stats(uint32_t group) const {
  if (group >= num_groups())
    invalid_argument("group must be < num_groups (" + std::to_string(num_groups()) + "), got " +
                     std::to_string(group));
  return group_counters_[group];
}

}  // namespace kvc
