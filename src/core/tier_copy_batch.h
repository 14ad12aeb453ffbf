// The tier copies of one call in one direction, collected per pool and
// handed to the Device in one call per pool (one kernel launch on CUDA).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "backend/device.h"
#include "core/pool_memory.h"
#include "core/rank_pools.h"

namespace kvc {

class TierCopyBatch {
 public:
  // Empties the batch for `num_pools` pools (keeps the capacity).
  void reset(size_t num_pools);
  void add(uint32_t pool, uint32_t device_block, uint32_t host_block) {
    per_pool_[pool].push_back(TierCopy{device_block, host_block});
  }
  size_t size() const;

  // Enqueues every copy on `stream`. Throws what the Device throws (then the
  // destinations of the whole batch hold undefined bytes).
  // On every rank (rank_pools.h).
  void submit(const RankPools& ranks, TierDirection direction, void* stream) const;

 private:
  std::vector<std::vector<TierCopy>> per_pool_;
};

}  // namespace kvc
