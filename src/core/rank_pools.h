// Tensor parallelism: the bytes of every rank and the loops over them. A
// cache over several ranks (kvc_config_set_ranks) has one manager, one tree
// and one set of block ids; what owns or moves bytes is per rank, and this
// class is its one owner: per rank a Device, the primary pools (their page
// arena), the host tier's pools. Every rank's pools have the same geometry
// (its share of the kv heads, layer_groups.h) and the same block counts, so
// a block id names the same block on every rank, and every copy the core
// plans (copy-on-write, offload, onboard, the moves of a shrink) is made on
// every rank here. One rank is the cache of before.
//
// Streams: the caller's stream is rank 0's; copies on another rank are
// enqueued on that rank device's default stream (NULL), since a stream
// belongs to one device.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/device.h"
#include "core/layer_groups.h"
#include "core/memory_plan.h"
#include "core/pool_memory.h"

namespace kvc {

using PoolList = std::vector<std::unique_ptr<PoolMemory>>;

class RankPools {
 public:
  // Allocates every rank's pools for `plan` and `host` on devices[r] (all
  // or nothing: a failed allocation throws and frees what was allocated).
  // growable: pools reserve their ceiling (kvc_cache_resize).
  RankPools(std::vector<std::unique_ptr<Device>> devices, const LayerGrouping& grouping,
            const MemoryPlan& plan, const HostPlan& host, bool growable);
  ~RankPools();
  RankPools(const RankPools&) = delete;
  RankPools& operator=(const RankPools&) = delete;

  uint32_t num_ranks() const { return uint32_t(ranks_.size()); }
  Device& device(uint32_t rank) const { return *ranks_.at(rank).device; }
  const PoolList& pools(uint32_t rank) const { return ranks_.at(rank).pools; }
  const PoolList& host_pools(uint32_t rank) const { return ranks_.at(rank).host_pools; }
  // Rank `rank`'s share of `stream` (see above).
  static void* stream_of(uint32_t rank, void* stream) { return rank == 0 ? stream : nullptr; }

  // --- The copies, on every rank ------------------------------------------
  void copy_blocks(uint32_t pool, const BlockGeometry& geometry, const BlockCopy* copies,
                   size_t count, void* stream) const;
  // Throws what a Device throws (then the destinations' bytes on every rank
  // are undefined, as one rank's are).
  void copy_tier(TierDirection direction, uint32_t pool, const TierCopy* copies, size_t count,
                 void* stream) const;
  void order_after_tier_copies(void* stream) const;
  void synchronize(void* stream) const;

  // --- kvc_cache_resize, all ranks or none --------------------------------
  // Backs the growth to `next` on every rank; throws with nothing backed
  // for nothing (every rank trimmed back) when one cannot.
  void back(const MemoryPlan& next);
  // Takes the new counts on every rank and returns what lies past them.
  void set_blocks(const MemoryPlan& next);

 private:
  struct Rank {
    std::unique_ptr<Device> device;
    std::unique_ptr<PoolMemory> arena;  // pools of different block bytes share it
    PoolList pools;
    PoolList host_pools;
  };
  void trim_all();
  std::vector<Rank> ranks_;
};

}  // namespace kvc
