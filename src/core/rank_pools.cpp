#include "core/rank_pools.h"

namespace kvc {

RankPools::RankPools(std::vector<std::unique_ptr<Device>> devices, const LayerGrouping& grouping,
                     const MemoryPlan& plan, const HostPlan& host, bool growable) {
  ranks_.resize(devices.size());
  for (size_t r = 0; r < devices.size(); ++r) {
    Rank& k = ranks_[r];
    k.device = std::move(devices[r]);
    Device& d = *k.device;
    if (plan.num_pages != 0) {
      // One allocation; every pool views it with its own block stride.
      k.arena = growable ? std::make_unique<PoolMemory>(d, plan.page_bytes, plan.num_pages,
                                                        plan.max_pages)
                         : std::make_unique<PoolMemory>(d, plan.page_bytes, plan.num_pages);
      for (size_t p = 0; p < grouping.pools.size(); ++p)
        k.pools.push_back(std::make_unique<PoolMemory>(
            k.arena->base(), grouping.pools[p].block_bytes, plan.pool_blocks[p],
            growable ? plan.max_pool_blocks[p] : plan.pool_blocks[p]));
    } else {
      for (size_t p = 0; p < grouping.pools.size(); ++p)
        k.pools.push_back(growable ? std::make_unique<PoolMemory>(
                                         d, grouping.pools[p].block_bytes, plan.pool_blocks[p],
                                         plan.max_pool_blocks[p])
                                   : std::make_unique<PoolMemory>(
                                         d, grouping.pools[p].block_bytes, plan.pool_blocks[p]));
    }
    if (host.blocks_per_group > 0)
      for (size_t p = 0; p < grouping.pools.size(); ++p)
        k.host_pools.push_back(std::make_unique<PoolMemory>(d, grouping.pools[p].block_bytes,
                                                            host.pool_blocks[p],
                                                            PoolMemory::Kind::kHost));
  }
}

RankPools::~RankPools() {
  // Views and pools before the arena and the device they came from.
  for (Rank& k : ranks_) {
    k.host_pools.clear();
    k.pools.clear();
    k.arena.reset();
  }
}

void RankPools::copy_blocks(uint32_t pool, const BlockGeometry& geometry, const BlockCopy* copies,
                            size_t count, void* stream) const {
  for (uint32_t r = 0; r < ranks_.size(); ++r)
    ranks_[r].device->copy_blocks(ranks_[r].pools[pool]->base(), geometry, copies, count,
                                  stream_of(r, stream));
}

void RankPools::copy_tier(TierDirection direction, uint32_t pool, const TierCopy* copies,
                          size_t count, void* stream) const {
  for (uint32_t r = 0; r < ranks_.size(); ++r) {
    const Rank& k = ranks_[r];
    k.device->copy_tier(direction, k.pools[pool]->base(), k.host_pools[pool]->base(),
                        k.pools[pool]->block_bytes(), copies, count, stream_of(r, stream));
  }
}

void RankPools::order_after_tier_copies(void* stream) const {
  for (uint32_t r = 0; r < ranks_.size(); ++r)
    ranks_[r].device->order_after_tier_copies(stream_of(r, stream));
}

void RankPools::synchronize(void* stream) const {
  for (uint32_t r = 0; r < ranks_.size(); ++r) ranks_[r].device->synchronize(stream_of(r, stream));
}

void RankPools::trim_all() {
  for (Rank& k : ranks_) {
    if (k.arena) k.arena->trim();
    else
      for (auto& p : k.pools) p->trim();
  }
}

void RankPools::back(const MemoryPlan& next) {
  try {
    for (Rank& k : ranks_) {
      if (k.arena) k.arena->back(next.num_pages);
      else
        for (size_t p = 0; p < k.pools.size(); ++p) k.pools[p]->back(next.pool_blocks[p]);
    }
  } catch (...) {
    trim_all();  // what was backed for nothing goes back, on every rank
    throw;
  }
}

void RankPools::set_blocks(const MemoryPlan& next) {
  for (Rank& k : ranks_) {
    if (k.arena) k.arena->set_num_blocks(next.num_pages);
    for (size_t p = 0; p < k.pools.size(); ++p) k.pools[p]->set_num_blocks(next.pool_blocks[p]);
  }
  trim_all();
}

}  // namespace kvc
