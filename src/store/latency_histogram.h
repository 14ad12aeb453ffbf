// Latencies of a tier's lookups in log-scale buckets (four per power of
// two of microseconds, so a percentile is within 19% of the truth) and the
// percentiles read from them. Not synchronized: its owner locks.
#pragma once

#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>

namespace kvc {

class LatencyHistogram {
 public:
  static constexpr int kSubBuckets = 4;
  static constexpr int kBuckets = 40 * kSubBuckets;  // up to 2^40 us

  void add(std::chrono::nanoseconds t) {
    const double us = static_cast<double>(t.count()) / 1000.0;
    int b = 0;
    if (us >= 1.0) b = static_cast<int>(std::log2(us) * kSubBuckets) + 1;
    if (b >= kBuckets) b = kBuckets - 1;
    ++counts_[static_cast<size_t>(b)];
    ++total_;
  }

  uint64_t count() const { return total_; }

  // The upper bound in microseconds of the bucket holding the p-th
  // percentile (0 < p <= 100); 0 with no samples.
  uint64_t percentile_us(double p) const {
    if (total_ == 0) return 0;
    const double want = std::ceil(static_cast<double>(total_) * p / 100.0);
    uint64_t seen = 0;
    for (int b = 0; b < kBuckets; ++b) {
      seen += counts_[static_cast<size_t>(b)];
      if (static_cast<double>(seen) >= want) return upper_us(b);
    }
    return upper_us(kBuckets - 1);
  }

 private:
  static uint64_t upper_us(int b) {
    if (b == 0) return 1;
    return static_cast<uint64_t>(std::ceil(std::exp2(static_cast<double>(b) / kSubBuckets)));
  }

  std::array<uint64_t, kBuckets> counts_{};
  uint64_t total_ = 0;
};

}  // namespace kvc
