// The host tier's part of the invariant checker (block_manager_check.cpp
// calls it): every host block is free or cached (never in use) and held by
// a live host node; the counts add up per pool; every host node's children
// are host nodes; host_children counts are exact; the host queue holds
// exactly the host nodes without children, by (priority, age).
#include <string>
#include <vector>

#include "core/block_manager.h"
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

void BlockManager::check_host_tier() const {
  const uint32_t G = num_groups();
  if (!host_.enabled()) {
    for (uint32_t n = 0; n < tree_.id_bound(); ++n)
      if (tree_.node(n).live && (tree_.node(n).tier != kPrimaryTier || host_.host_children[n] != 0))
        broken("tree node " + std::to_string(n) + " is in a host tier this cache does not have");
    if (host_.policy.size() != 0) broken("the host queue is not empty without a host tier");
    return;
  }

  // Pools: states and counts.
  for (size_t p = 0; p < host_.pools.size(); ++p) {
    const BlockPool& pool = host_.pools[p];
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
        held = held || (group_pool_[g] == p && tree_.block(b.node, g) == id);
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
  std::vector<uint32_t> host_children(tree_.id_bound(), 0);
  uint64_t queued = 0;
  for (uint32_t n = 1; n < tree_.id_bound(); ++n) {
    const TreeNode& t = tree_.node(n);
    if (!t.live) {
      if (host_.policy.contains(n)) broken("dead tree node " + std::to_string(n) + " is queued");
      continue;
    }
    const std::string who = "tree node " + std::to_string(n);
    if (t.tier != kHostTier) {
      if (host_.policy.contains(n)) broken(who + " is primary but queued in the host tier");
      if (t.parent != RadixTree::kRoot && tree_.node(t.parent).tier == kHostTier)
        broken(who + " is primary under host-tier parent " + std::to_string(t.parent));
      continue;
    }
    ++host_children[t.parent];
    for (uint32_t g = 0; g < G; ++g) {
      const uint32_t id = tree_.block(n, g);
      if (id == kNoBlock && windowed(g)) continue;  // evicted before the offload
      const BlockPool& pool = host_.pools[group_pool_[g]];
      if (id >= pool.capacity() || pool.info(id).node != n)
        broken(who + " holds a host block not marked as its own");
    }
    const bool evictable = t.num_children == 0;
    if (evictable != host_.policy.contains(n))
      broken(who + (evictable ? " is a host leaf but not queued" : " is queued but has children"));
    if (evictable) {
      ++queued;
      if (host_.policy.priority(n) != t.priority || host_.policy.age(n) != t.age)
        broken(who + " is queued in the host tier with a stale priority or age");
    }
  }
  for (uint32_t n = 0; n < tree_.id_bound(); ++n)
    if (tree_.node(n).live && host_children[n] != host_.host_children[n])
      broken("tree node " + std::to_string(n) + " counts " +
             std::to_string(host_.host_children[n]) + " host children but has " +
             std::to_string(host_children[n]));
  if (queued != host_.policy.size()) broken("queue size differs from the host leaves");
  for (uint32_t p = 0; p <= kMaxPriority; ++p) {
    uint64_t last = 0;
    host_.policy.for_each(p, [&](uint32_t n) {
      if (host_.policy.age(n) < last) broken("queue " + std::to_string(p) + " is out of age order");
      last = host_.policy.age(n);
    });
  }
}

}  // namespace kvc
