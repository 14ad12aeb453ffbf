// How paged prefill attention cuts its work: a thread block owns one tile
// of kPrefillTileRows packed query rows (query token x query head of one kv
// head, so a GQA group shares every K/V tile it loads) of one sequence, and
// the whole causal KV range of those rows, or one of num_splits equal
// pieces of it when the tiles alone do not fill the GPU (split-KV; a merge
// kernel combines the pieces through the workspace). Pure host arithmetic,
// shared by the launch and the workspace size query.
#pragma once

#include <cstdint>

namespace kvc {

constexpr uint32_t kPrefillTileRows = 128;  // packed query rows per thread block
constexpr uint32_t kPrefillTileTokens = 64; // K/V tokens per pipeline step
// Fewest KV tokens a split is given: below this the partial rows written
// and merged cost more than the parallelism gained.
constexpr uint64_t kPrefillMinSplitTokens = 512;
// Thread blocks of any variant resident on one SM at most: the wave the
// workspace bound assumes (a variant's own wave never exceeds it).
constexpr uint64_t kPrefillMaxBlocksPerSm = 2;

struct PrefillSplit {
  uint32_t num_splits = 1;
  uint32_t split_tokens = 0;  // a multiple of kPrefillTileTokens; 0 when not split
};

// base_ctas: tiles x kv heads of one launch; wave: thread blocks resident
// on the whole GPU; max_range: KV tokens of the longest tile range.
PrefillSplit plan_prefill_split(uint64_t base_ctas, uint64_t wave, uint64_t max_range);

// Workspace bytes for total_q rows of q_heads heads of head_dim, contexts
// up to max_kv_len: bounds every plan_prefill_split() of a launch within
// those, and never decreases as one of them grows.
uint64_t prefill_workspace_bound(uint64_t total_q, uint32_t q_heads, uint32_t head_dim,
                                 uint64_t max_kv_len, uint64_t wave);

// Benchmarks only: the kernel configuration. 0 (the default): on a compute
// capability 9.0 device for f16 / bf16 K/V of head dim 64 or 128
// (prefill_hopper.h) the Hopper TMA kernel (prefill_tma_kernel.cuh) where
// the pool has 8 or more tokens per block, else the Hopper wgmma kernel
// (prefill_wgmma_kernel.cuh); on other devices and combinations the
// mma.sync kernel with 4 warps of 32 rows, masked and lean tile loops.
// 4 = the Hopper wgmma kernel wherever a Hopper kernel runs (no TMA). Any
// other value turns the Hopper kernels off, and for bf16 head dim 128
// without a soft cap picks the mma.sync configuration: 1 = 4 warps of 32
// rows, one tile loop testing the masks' need per tile; 2 = the mma.sync
// default; 3 = 8 warps of 16 rows. The workspace size covers every one.
// Not thread safe; not in the C API.
void set_prefill_config_override(int config);

}  // namespace kvc
