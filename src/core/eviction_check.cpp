// Eviction's part of the invariant checker: the anchor queue holds exactly
// the cached primary leaves (no primary child) at their priority and age
// but those deferred by the stores (a write-through job pending),
// each windowed group's queue exactly its cached slots, every queue in age
// order within a priority; a node in use has its parent in use; retention
// expiries wait exactly for cached entries, at the moment their duration
// ends, and none is overdue on the manual clock.
#include <string>

#include "base/error.h"
#include "core/eviction.h"

namespace kvc {

namespace {

[[noreturn]] void broken(const std::string& what) {
  fail(KVC_ERR_INTERNAL, "cache invariant broken: " + what);
}

}  // namespace

void Eviction::check() const {
  // Cached leaves exactly the queued nodes, cached windowed slots exactly
  // the queued slots.
  uint64_t queued = 0;
  for (uint32_t n = 1; n < tree_.id_bound(); ++n) {
    const TreeNode& t = tree_.node(n);
    if (!t.live) {
      if (policy_.contains(n)) broken("dead tree node " + std::to_string(n) + " is queued");
      for (const EvictionPolicy& wp : window_policies_)
        if (wp.contains(n)) broken("dead tree node " + std::to_string(n) + " has a queued slot");
      continue;
    }
    const std::string who = "tree node " + std::to_string(n);
    if (t.tier != kPrimaryTier) {  // its tier checks its blocks and queue
      if (policy_.contains(n)) broken(who + " lives in the host tier but is queued for primary eviction");
      for (const EvictionPolicy& wp : window_policies_)
        if (wp.contains(n)) broken(who + " lives in the host tier but has a queued windowed slot");
      continue;
    }
    for (uint32_t g : layout_.windowed) {
      const uint32_t id = tree_.block(n, g);
      if (id == kNoBlock) continue;
      const EvictionPolicy& wp = window_policies_[uint32_t(layout_.window_slot[g])];
      if ((residency_.info(g, id).ref == 0) != wp.contains(n))
        broken(who + " group " + std::to_string(g) +
               (wp.contains(n) ? " slot is queued but in use" : " slot is cached but not queued"));
    }
    if (layout_.anchors.empty()) {
      if (policy_.contains(n)) broken(who + " is queued without full groups");
      continue;
    }
    const uint32_t ref0 = index_.node_ref(n);
    // Whoever holds a windowed slot holds the node's anchor blocks too.
    if (ref0 == 0)
      for (uint32_t g : layout_.windowed)
        if (tree_.block(n, g) != kNoBlock && residency_.info(g, tree_.block(n, g)).ref != 0)
          broken(who + " has a windowed slot in use while its anchor blocks are cached");
    if (ref0 > 0 && t.parent != RadixTree::kRoot && index_.node_ref(t.parent) == 0)
      broken(who + " is in use but its parent is not");
    // A leaf for primary eviction: no primary child (offloaded ones do not count).
    const bool evictable = ref0 == 0 && index_.primary_leaf(n);
    // A cached leaf whose write-through job was pending when it was the
    // victim waits on the stores' deferred list instead (StoreChain::defer).
    const bool deferred = evictable && !policy_.contains(n) && stores_ != nullptr &&
                          stores_->deferred(n);
    if (evictable != policy_.contains(n) && !deferred)
      broken(who + (evictable ? " is a cached leaf but not queued" : " is queued but not evictable"));
    if (evictable && !deferred) {
      ++queued;
      if (policy_.priority(n) != t.priority || policy_.age(n) != t.age)
        broken(who + " is queued with a stale priority or age");
    }
  }
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
        broken(who + " group " + std::to_string(layout_.windowed[k]) +
               " slot awaits a priority expiry but is not cached");
      if (time_.manual() && expiry_.moment(key) <= time_.now_ms())
        broken(who + " has an expired slot priority that was not reverted");
      continue;
    }
    if (!t.live || index_.node_ref(n) != 0) broken(who + " awaits a priority expiry but is not cached");
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
    check_order(window_policies_[k], "window eviction queue of group " + std::to_string(layout_.windowed[k]));
    uint64_t cached_slots = 0;
    for (uint32_t n = 1; n < tree_.id_bound(); ++n) {
      const TreeNode& t = tree_.node(n);
      const uint32_t id = t.live && t.tier == kPrimaryTier ? tree_.block(n, layout_.windowed[k]) : kNoBlock;
      if (id != kNoBlock && residency_.info(layout_.windowed[k], id).ref == 0) ++cached_slots;
    }
    if (cached_slots != window_policies_[k].size())
      broken("window eviction queue of group " + std::to_string(layout_.windowed[k]) +
             " size differs from its cached slots");
  }
  // No trial change outlives the plan that made it.
  if (!undo_.empty()) broken("a planning trial on the eviction queues was not undone");
}

}  // namespace kvc
