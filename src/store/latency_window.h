// Latency percentiles of a store's recent operations (StoreStats'
// LatencySummary): a ring of the last samples, summarized on demand. Not
// synchronized: its owner locks around it.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#include "core/block_store.h"

namespace kvc {

class LatencyWindow {
 public:
  static constexpr size_t kSamples = 1024;

  void add(uint64_t us) {
    if (ring_.size() < kSamples) ring_.push_back(us);
    else ring_[count_ % kSamples] = us;
    ++count_;
    max_ = std::max(max_, us);
  }
  LatencySummary summary() const {
    LatencySummary s;
    s.count = count_;
    s.max_us = max_;
    if (ring_.empty()) return s;
    std::vector<uint64_t> v = ring_;
    const size_t i50 = (v.size() - 1) / 2, i99 = (v.size() - 1) * 99 / 100;
    std::nth_element(v.begin(), v.begin() + i50, v.end());
    s.p50_us = v[i50];
    std::nth_element(v.begin(), v.begin() + i99, v.end());
    s.p99_us = v[i99];
    return s;
  }

 private:
  std::vector<uint64_t> ring_;
  uint64_t count_ = 0;
  uint64_t max_ = 0;
};

// Microseconds since `start`.
inline uint64_t micros_since(std::chrono::steady_clock::time_point start) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                   std::chrono::steady_clock::now() - start)
                                   .count());
}

}  // namespace kvc
