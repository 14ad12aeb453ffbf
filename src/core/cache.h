// A cache: its settings, layer groups, memory plan, device and pools. The
// shape is fixed at creation; everything here that is const is safe to read
// from any thread without the lock.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "backend/device.h"
#include "core/block_manager.h"
#include "core/cache_config.h"
#include "core/layer_groups.h"
#include "core/memory_plan.h"
#include "core/pool_memory.h"

namespace kvc {

class Cache {
 public:
  // Validates cfg, opens its device, sizes and allocates the pools.
  explicit Cache(const CacheConfig& cfg);
  // The same on a given device (tests: a device double that fails copies).
  Cache(const CacheConfig& cfg, std::unique_ptr<Device> device);
  ~Cache();

  const CacheConfig& config() const { return config_; }
  const LayerGrouping& grouping() const { return grouping_; }
  const MemoryPlan& plan() const { return plan_; }
  const HostPlan& host_plan() const { return host_plan_; }
  const DeviceMemoryInfo& device_memory_at_creation() const { return device_memory_; }
  Device& device() const { return *device_; }
  const PoolMemory& pool(uint32_t i) const { return *pools_.at(i); }
  size_t num_pools() const { return pools_.size(); }
  // The secondary tier's pool mirroring primary pool i (none when
  // host_plan().blocks_per_group == 0).
  const PoolMemory& host_pool(uint32_t i) const { return *host_pools_.at(i); }

  // Where layer `layer` lives and its shape (kvc_layer_view_t; what the
  // kernels take). Throws KVC_ERR_INVALID_ARGUMENT for a layer out of range.
  LayerSlabs layer_view(uint32_t layer) const;

  // Serializes the mutating calls on this cache.
  std::mutex& mutex() const { return mutex_; }

  // Sequences, blocks, the radix tree and eviction; callers hold mutex().
  BlockManager& manager() { return *manager_; }
  const BlockManager& manager() const { return *manager_; }

 private:
  CacheConfig config_;
  LayerGrouping grouping_;
  std::unique_ptr<Device> device_;
  DeviceMemoryInfo device_memory_;
  MemoryPlan plan_;
  std::unique_ptr<PoolMemory> arena_memory_;  // pools of different block bytes share it
  HostPlan host_plan_;
  std::vector<std::unique_ptr<PoolMemory>> pools_;
  std::vector<std::unique_ptr<PoolMemory>> host_pools_;
  std::unique_ptr<BlockManager> manager_;
  mutable std::mutex mutex_;
};

}  // namespace kvc
