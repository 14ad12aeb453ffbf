// The host tier's part of the invariant checker (Tier::check): every host
// block is free or cached (never in use) and held by a live host node; the
// counts add up per pool; every host node's children are host nodes; the
// host queue holds exactly the host nodes without children, by (priority,
// age); a call's plan leaves no mark behind (nor queue readers).
#include <string>
#include <vector>

#include "core/host_tier.h"
#include "base/error.h"

namespace kvc {

namespace {

[[noreturn]] void broken(const std::string& what) {
  fail(KVC_ERR_INTERNAL, "cache invariant broken (host tier): " + what);
}

std::string hblk(size_t pool, uint32_t id) {
  return "host block " + std::to_string(id) + " of pool " + std::to_string(pool);
}

}  // namespace

void HostTier::check() const {
  const uint32_t G = layout_.num_groups();

  // Pools: states and counts.
  for (size_t p = 0; p < pools_.size(); ++p) {
    const BlockPool& pool = pools_[p];
    uint64_t n_free = 0, n_cached = 0;
    for (uint32_t id = 0; id < pool.capacity(); ++id) {
      const BlockInfo& b = pool.info(id);
      if (b.ref != 0) broken(hblk(p, id) + " has ref count " + std::to_string(b.ref));
      if (b.node == kNoNode) {
        ++n_free;
        continue;
      }
      ++n_cached;
      if (b.node >= tree_.id_bound() || !tree_.node(b.node).live ||
          tree_.node(b.node).tier != kHostTier)
        broken(hblk(p, id) + " points to tree node " + std::to_string(b.node) +
               ", which is not a live host node");
      bool held = false;
      for (uint32_t g = 0; g < G; ++g)
        held = held || (layout_.group_pool[g] == p && tree_.block(b.node, g) == id);
      if (!held) broken(hblk(p, id) + " is not held by its tree node");
    }
    if (pool.num_in_use() != 0 || n_free != pool.num_free() || n_cached != pool.num_cached())
      broken("pool " + std::to_string(p) + " counts (free " + std::to_string(pool.num_free()) +
             ", cached " + std::to_string(pool.num_cached()) + ", in use " +
             std::to_string(pool.num_in_use()) + ") differ from its blocks (" +
             std::to_string(n_free) + ", " + std::to_string(n_cached) + ", 0)");
    std::vector<char> seen(pool.capacity(), 0);
    for (uint32_t id : pool.free_list()) {
      if (id >= pool.capacity()) broken("a free list holds an out-of-range id");
      if (seen[id]++) broken(hblk(p, id) + " is on the free list twice");
      if (pool.info(id).node != kNoNode) broken(hblk(p, id) + " is on the free list but cached");
    }
  }

  // Nodes: blocks, children, queue.
  uint64_t queued = 0;
  for (uint32_t n = 1; n < tree_.id_bound(); ++n) {
    const TreeNode& t = tree_.node(n);
    if (!t.live) {
      if (policy_.contains(n)) broken("dead tree node " + std::to_string(n) + " is queued");
      continue;
    }
    const std::string who = "tree node " + std::to_string(n);
    if (t.tier != kHostTier) {
      if (policy_.contains(n)) broken(who + " is primary but queued in the host tier");
      if (t.parent != RadixTree::kRoot && tree_.node(t.parent).tier == kHostTier)
        broken(who + " is primary under host-tier parent " + std::to_string(t.parent));
      continue;
    }
    for (uint32_t g = 0; g < G; ++g) {
      const uint32_t id = tree_.block(n, g);
      if (id == kNoBlock && layout_.is_windowed(g)) continue;  // evicted before the offload
      const BlockPool& pool = pools_[layout_.group_pool[g]];
      if (id >= pool.capacity() || pool.info(id).node != n)
        broken(who + " holds a host block not marked as its own");
    }
    const bool evictable = t.num_children == 0;
    if (evictable != policy_.contains(n))
      broken(who + (evictable ? " is a host leaf but not queued" : " is queued but has children"));
    if (evictable) {
      ++queued;
      if (policy_.priority(n) != t.priority || policy_.age(n) != t.age)
        broken(who + " is queued in the host tier with a stale priority or age");
    }
  }
  if (queued != policy_.size()) broken("queue size differs from the host leaves");
  for (uint32_t p = 0; p <= kMaxPriority; ++p) {
    uint64_t last = 0;
    policy_.for_each(p, [&](uint32_t n) {
      if (policy_.age(n) < last) broken("queue " + std::to_string(p) + " is out of age order");
      last = policy_.age(n);
    });
  }
  // A plan's look-ahead leaves nothing behind.
  if (!undo_.empty() || !touched_.empty()) broken("a plan's look-ahead was not undone");
  if (!anchor_plan_.idle() || !host_plan_.idle())
    broken("a read-only plan keeps its queue readers (cursor or added entries)");
  for (uint32_t n = 0; n < tree_.id_bound(); ++n)
    if (!marks_[n].none())
      broken("tree node " + std::to_string(n) + " keeps a plan's marks");
  if (excluded_bits_.size() != (uint64_t(tree_.id_bound()) + 63) / 64)
    broken("the plan's excluded bits cover " + std::to_string(excluded_bits_.size()) +
           " words for " + std::to_string(tree_.id_bound()) + " nodes");
  for (size_t w = 0; w < excluded_bits_.size(); ++w)
    if (excluded_bits_[w] != 0)
      broken("the plan's excluded bits keep word " + std::to_string(w) + " set");
}

}  // namespace kvc
