// How many blocks each pool gets. The budget is the least of primary_bytes,
// the bytes of max_tokens tokens in every group, and (on a device that
// reports free memory) free_gpu_memory_fraction of it; a CPU cache with none
// of these takes kDefaultCpuPoolBytes. Every group gets the same number of
// blocks, so every layer can hold the same number of tokens.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/cache_config.h"
#include "core/layer_groups.h"

namespace kvc {

constexpr uint64_t kDefaultCpuPoolBytes = uint64_t(1) << 30;

struct MemoryPlan {
  uint64_t budget_bytes = 0;        // the least of the bounds
  uint64_t blocks_per_group = 0;    // every group gets this many
  uint64_t token_capacity = 0;      // blocks_per_group * tokens_per_block
  std::vector<uint64_t> pool_blocks;  // per pool
  uint64_t total_bytes = 0;         // sum of pool_blocks * block_bytes
  std::string limited_by;           // "primary_bytes", "max_tokens", "free_gpu_memory_fraction" or the CPU default
  // Pools of different block bytes share pages of page_bytes (page_arena.h):
  // then pool_blocks are id bounds (every page carved for that pool), and
  // one allocation of num_pages * page_bytes holds them all. 0: one
  // allocation per pool, split as above.
  uint64_t page_bytes = 0;
  uint64_t num_pages = 0;
};

// Pages: with several pools, page_bytes is the least common multiple of
// their block bytes when that is at most kMaxPageBlocks times the largest
// (else the static split stays), and the budget holds at least one page per
// pool. Not with a host tier (host_cache_bytes > 0): then the split stays.
constexpr uint64_t kMaxPageBlocks = 64;

// The secondary (host) tier mirrors the primary pools: host_cache_bytes
// buys the same number of blocks of every group, pool by pool as above. It
// holds nothing (blocks_per_group 0) when the bytes buy no block of every
// group.
struct HostPlan {
  uint64_t blocks_per_group = 0;
  std::vector<uint64_t> pool_blocks;  // per pool
  uint64_t total_bytes = 0;           // sum of pool_blocks * block_bytes
};

// device_free_bytes == 0 means "the device reports none" (the CPU backend):
// then primary_bytes or max_tokens must bound the pool.
// Throws KVC_ERR_INVALID_ARGUMENT if the budget holds no block of every group.
MemoryPlan plan_memory(const CacheConfig& cfg, const LayerGrouping& grouping,
                       uint64_t device_free_bytes);
HostPlan plan_host_memory(const CacheConfig& cfg, const LayerGrouping& grouping);

}  // namespace kvc
