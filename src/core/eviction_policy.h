// Prioritized LRU over evictable tree nodes (cached leaves). One list per
// priority 0..100, each ordered by age: the moment the node's last owner
// released it. The victim is the oldest node of the lowest non-empty
// priority. Releases append at the newest end (O(1)); a parent that becomes
// a leaf when its last child is evicted is placed by its age, searching from
// both ends at once (O(1) in the usual case, where it was released right
// after that child). Removal is O(1).
#pragma once

#include <cstdint>
#include <vector>

#include "core/big_array.h"
#include "core/block_pool.h"

namespace kvc {

constexpr uint32_t kMaxPriority = 100;
constexpr uint32_t kDefaultPriority = 35;

class EvictionPolicy {
 public:
  explicit EvictionPolicy(uint32_t id_bound);

  // Queues `node` as the newest of `priority`; `age` must be >= every age
  // already queued there.
  void push_newest(uint32_t node, uint32_t priority, uint64_t age);
  // Queues `node` at its place by `age`.
  void insert_by_age(uint32_t node, uint32_t priority, uint64_t age);
  void remove(uint32_t node);
  bool contains(uint32_t node) const { return priority_[node] != kNotQueued; }

  // The next victim (not removed), or kNoNode when nothing is queued.
  uint32_t victim() const;

  uint64_t size() const { return size_; }
  uint64_t age(uint32_t node) const { return links_[node].age; }
  uint32_t priority(uint32_t node) const { return priority_[node]; }

  // Read access in victim order, for a plan that looks ahead without
  // changing the queue: the lowest priority >= `from` whose list is not
  // empty (kMaxPriority + 1: none), a list's oldest node, the node after
  // `node` in its list (kNoNode: the newest).
  uint32_t lowest_priority(uint32_t from) const {
    for (uint32_t w = from >> 6; w < 2; ++w) {
      uint64_t bits = nonempty_[w];
      if (w == (from >> 6)) bits &= ~uint64_t(0) << (from & 63);
      if (bits != 0) return w * 64 + uint32_t(__builtin_ctzll(bits));
    }
    return kMaxPriority + 1;
  }
  uint32_t oldest(uint32_t priority) const { return head_[priority]; }
  uint32_t next(uint32_t node) const { return links_[node].next; }
  // Fetches the line next() and age() read.
  void prefetch(uint32_t node) const { __builtin_prefetch(&links_[node], 0); }

  // Nodes of one priority from oldest to newest (for checks and tests).
  template <class F>
  void for_each(uint32_t priority, F&& f) const {
    for (uint32_t n = head_[priority]; n != kNoNode; n = links_[n].next) f(n);
  }

 private:
  // Whether a node is queued is asked on every hold and release, so it
  // lives apart from the links, one byte per node.
  static constexpr uint8_t kNotQueued = 0xff;
  struct Link {
    uint32_t prev = kNoNode;
    uint32_t next = kNoNode;
    uint64_t age = 0;
  };
  void link_after(uint32_t node, uint32_t after, uint32_t priority);

  BigArray<Link> links_;
  BigArray<uint8_t> priority_;  // the node's list, or kNotQueued
  uint32_t head_[kMaxPriority + 1];  // oldest
  uint32_t tail_[kMaxPriority + 1];  // newest
  uint64_t nonempty_[2] = {0, 0};    // bit p set: list p is not empty
  uint64_t size_ = 0;
};

}  // namespace kvc
