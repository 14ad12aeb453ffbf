// Cached tree nodes whose retention priority reverts at a given moment: an
// indexed min-heap on that moment, preallocated for every node id, so
// scheduling, cancelling and popping never allocate.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "core/block_pool.h"

namespace kvc {

class ExpiryHeap {
 public:
  explicit ExpiryHeap(uint32_t id_bound) : pos_(id_bound, kNoNode) { heap_.reserve(id_bound); }

  bool contains(uint32_t node) const { return pos_[node] != kNoNode; }
  bool empty() const { return heap_.empty(); }
  size_t size() const { return heap_.size(); }
  uint64_t next_moment() const { return heap_.front().first; }
  uint32_t next_node() const { return heap_.front().second; }
  uint64_t moment(uint32_t node) const { return heap_[pos_[node]].first; }

  // Schedules `node` at `moment`, replacing an earlier schedule.
  void schedule(uint32_t node, uint64_t moment) {
    cancel(node);
    pos_[node] = uint32_t(heap_.size());
    heap_.emplace_back(moment, node);
    up(pos_[node]);
  }
  void cancel(uint32_t node) {
    // Nothing scheduled (every position unset): the position, a random
    // line, is not read. Tiers' moves cancel for every node they move.
    if (heap_.empty()) return;
    const uint32_t i = pos_[node];
    if (i == kNoNode) return;
    const uint32_t last = uint32_t(heap_.size() - 1);
    if (i != last) {
      const auto moved = heap_[last];
      heap_.pop_back();
      place(i, moved);
      up(i);
      down(pos_[moved.second]);
    } else {
      heap_.pop_back();
    }
    pos_[node] = kNoNode;
  }

 private:
  void place(uint32_t i, std::pair<uint64_t, uint32_t> e) {
    heap_[i] = e;
    pos_[e.second] = i;
  }
  void up(uint32_t i) {
    while (i > 0) {
      const uint32_t p = (i - 1) / 2;
      if (heap_[p].first <= heap_[i].first) return;
      const auto e = heap_[i];
      place(i, heap_[p]);
      place(p, e);
      i = p;
    }
  }
  void down(uint32_t i) {
    const uint32_t n = uint32_t(heap_.size());
    while (true) {
      uint32_t m = i;
      for (uint32_t c = 2 * i + 1; c <= 2 * i + 2 && c < n; ++c)
        if (heap_[c].first < heap_[m].first) m = c;
      if (m == i) return;
      const auto e = heap_[i];
      place(i, heap_[m]);
      place(m, e);
      i = m;
    }
  }

  std::vector<std::pair<uint64_t, uint32_t>> heap_;  // (moment, node)
  std::vector<uint32_t> pos_;                        // node -> heap index
};

}  // namespace kvc
