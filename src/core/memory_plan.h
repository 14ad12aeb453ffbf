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
constexpr uint64_t kMaxPlannedStateSlots = 256;

struct MemoryPlan {
  // State slots (state.h) come out of the least of the bounds first:
  // state_slots is max_state_slots, or min(kMaxPlannedStateSlots,
  // max(1, (bound - one block set) / 2 / bytes per slot)); state_bytes =
  // state_slots * bytes per slot; budget_bytes is what is left for the
  // pools. 0 and 0 without state resources.
  uint32_t state_slots = 0;
  uint64_t state_bytes = 0;
  // State snapshots (state.h) come out of what is left after the state
  // slots: snapshot_slots is max_state_snapshots (kNoSnapshots: 0), or
  // min(state_slots, (left - one block set) / 4 / bytes per slot); their
  // bytes are snapshot_bytes. budget_bytes excludes them too.
  uint32_t snapshot_slots = 0;
  uint64_t snapshot_bytes = 0;
  uint64_t budget_bytes = 0;        // the least of the bounds, less state_bytes
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
  // The most a resize may grow to (max_primary_bytes, at least the budget
  // at creation): the address space each pool reserves and the tree's
  // node capacity are sized for it.
  uint64_t max_budget_bytes = 0;
  std::vector<uint64_t> max_pool_blocks;  // per pool (id bounds when paged)
  uint64_t max_pages = 0;                 // paged: the arena's most pages
};

// Pages: with several pools, page_bytes is the least common multiple of
// their block bytes when that is at most kMaxPageBlocks times the largest
// (else the static split stays), and the budget holds at least one page per
// pool. Not with a host tier (host_cache_bytes > 0): then the split stays.
constexpr uint64_t kMaxPageBlocks = 64;

// The secondary (host) tier mirrors the primary pools: host_cache_bytes
// buys the same number of blocks of every group, pool by pool as above. It
// holds nothing (blocks_per_group 0) when the bytes buy no block of every
// group. With state resources and device snapshot slots (state.h), a quarter of
// host_cache_bytes goes to host state snapshots first: snapshot_slots =
// min(2^20, host_cache_bytes / kHostSnapshotShare / bytes per slot), their
// bytes snapshot_bytes; the host pools are planned from the rest.
constexpr uint64_t kHostSnapshotShare = 4;
struct HostPlan {
  uint32_t snapshot_slots = 0;
  uint64_t snapshot_bytes = 0;
  uint64_t blocks_per_group = 0;
  std::vector<uint64_t> pool_blocks;  // per pool
  uint64_t total_bytes = 0;           // sum of pool_blocks * block_bytes
};

// device_free_bytes == 0 means "the device reports none" (the CPU backend):
// then primary_bytes or max_tokens must bound the pool.
// Throws KVC_ERR_INVALID_ARGUMENT if the budget holds no block of every group.
MemoryPlan plan_memory(const CacheConfig& cfg, const LayerGrouping& grouping,
                       uint64_t device_free_bytes);
// The plan for a primary budget of `bytes` in the layout of `current` (the
// same split, or the same page bytes) and its ceiling (kvc_cache_resize):
// every group gets bytes / (one block of every group) blocks, as at
// creation; with a page arena, bytes / page_bytes pages. Throws
// KVC_ERR_INVALID_ARGUMENT when the budget holds no block of every group
// (with an arena: fewer pages than pools) or exceeds current's ceiling.
MemoryPlan plan_resize(const LayerGrouping& grouping, const MemoryPlan& current, uint64_t bytes,
                       uint32_t tokens_per_block);
// AutoDeploy's resize (seed 004, phase 6): the figures measured after a
// forward pass, and the primary bytes they leave:
//   mem_for_paged = (free_mem - non_paged - forward_mem) * free_gpu_fraction
// (rounded down to a byte). Throws KVC_ERR_INVALID_ARGUMENT for a fraction
// outside (0, 1] or non_paged + forward_mem above free_mem.
struct ResizeInputs {
  uint64_t free_bytes = 0;
  uint64_t non_paged_bytes = 0;
  uint64_t forward_bytes = 0;
  double fraction = 0;
};
uint64_t mem_for_paged(const ResizeInputs& in);

// The bytes of one block of every group.
uint64_t block_set_bytes(const LayerGrouping& grouping);
// `device_snapshots`: the primary plan's snapshot_slots (none: no host
// snapshots either).
HostPlan plan_host_memory(const CacheConfig& cfg, const LayerGrouping& grouping,
                          uint32_t device_snapshots = 0);

}  // namespace kvc
