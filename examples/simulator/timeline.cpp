#include "timeline.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace sim {

Timeline::Timeline(double expected_s, uint32_t points)
    : width_(std::max(expected_s, 1e-3) / std::max<uint32_t>(points, 2)),
      points_(std::max<uint32_t>(points, 2)) {}

Timeline::Bucket &Timeline::at(double time_s) {
  size_t i = static_cast<size_t>(std::max(0.0, time_s) / width_);
  while (i >= 2 * static_cast<size_t>(points_)) {
    // Merge neighbours: half as many buckets, each twice as wide.
    std::vector<Bucket> merged((buckets_.size() + 1) / 2);
    for (size_t k = 0; k < buckets_.size(); ++k) {
      Bucket &m = merged[k / 2];
      const Bucket &b = buckets_[k];
      m.prompt += b.prompt;
      m.reused += b.reused;
      m.in_use_sum += b.in_use_sum;
      m.cached_sum += b.cached_sum;
      m.observations += b.observations;
    }
    buckets_ = std::move(merged);
    width_ *= 2;
    i = static_cast<size_t>(std::max(0.0, time_s) / width_);
  }
  if (i >= buckets_.size()) buckets_.resize(i + 1);
  return buckets_[i];
}

void Timeline::admitted(double time_s, uint64_t prompt_tokens, uint64_t reused_tokens) {
  Bucket &b = at(time_s);
  b.prompt += static_cast<double>(prompt_tokens);
  b.reused += static_cast<double>(reused_tokens);
}

void Timeline::occupancy(double time_s, double in_use, double cached) {
  Bucket &b = at(time_s);
  b.in_use_sum += in_use;
  b.cached_sum += cached;
  ++b.observations;
}

std::vector<Sample> Timeline::samples() const {
  std::vector<Sample> out;
  for (size_t i = 0; i < buckets_.size(); ++i) {
    const Bucket &b = buckets_[i];
    if (!b.observations && b.prompt == 0) continue;
    Sample s;
    s.time_s = (static_cast<double>(i) + 1.0) * width_;
    s.hit_rate = b.prompt > 0 ? b.reused / b.prompt : std::numeric_limits<double>::quiet_NaN();
    const double n = b.observations ? static_cast<double>(b.observations) : 1.0;
    s.in_use = b.in_use_sum / n;
    s.cached = b.cached_sum / n;
    out.push_back(s);
  }
  return out;
}

}  // namespace sim
