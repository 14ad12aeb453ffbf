// Collects per-step observations into a bounded number of time buckets for
// the plot: the bucket width doubles (neighbours merge) whenever the run
// outlasts the buckets, so memory stays small however long the run is.
#pragma once

#include <cstdint>
#include <vector>

#include "run_result.h"

namespace sim {

class Timeline {
 public:
  // `expected_s`: a first guess of the run's length; `points`: buckets kept.
  Timeline(double expected_s, uint32_t points);
  void admitted(double time_s, uint64_t prompt_tokens, uint64_t reused_tokens);
  void occupancy(double time_s, double in_use, double cached);
  std::vector<Sample> samples() const;

 private:
  struct Bucket {
    double prompt = 0, reused = 0;
    double in_use_sum = 0, cached_sum = 0;
    uint64_t observations = 0;
  };
  Bucket &at(double time_s);
  double width_;
  uint32_t points_;
  std::vector<Bucket> buckets_;
};

}  // namespace sim
