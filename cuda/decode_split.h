// How decode attention splits its work (split-KV, "flash decoding"): each
// thread block takes one (sequence, kv head, query-head chunk) and a range
// of at most split_tokens tokens; a merge pass combines the ranges. Pure
// host arithmetic, shared by the launch and the workspace size query.
#pragma once

#include <cstdint>

namespace kvc {

// Fewest tokens a split is given when a sequence is cut (DecodeShape::
// min_split_tokens): below this the merge traffic and block start-up
// outweigh the parallelism gained. Per K/V type: fp8 took 128 while its
// tiles were converted through shared memory (latency-bound chains of
// tiles; bench/results/2026-11-28-kernels-h200.md: 4K tokens 10.7 us with
// 32 splits of 128, 11.6 with 16 of 256). Converted in registers it is as
// bf16 again (bench/results/2026-11-28-kernels-h200-r2.md, batch 1, 32 q /
// 8 kv heads, 4K tokens: 11.0 us with 16 splits of 256, 11.8 with 32 of
// 128; bf16 9.9 and 10.0).
constexpr uint64_t kMinSplitTokens = 256;
constexpr uint64_t kMinSplitTokensFp8 = 256;

// Splits the merge kernel combines in one round trip (its prefetch,
// decode_attention.cu). When this many splits already give half a wave of
// thread blocks, the planner cuts no further: a 33rd split costs the merge
// a second round trip. On an H200 (bench/results/2026-11-28-kernels-h200-r2.md),
// batch 1, 32 q / 8 kv heads: bf16 32K 38.1 us at 32 splits, 47.2 at 40;
// fp8 16K 18.8 us at 32, 21.5 at 40, 20.8 at 48.
constexpr uint64_t kMergeRoundSplits = 32;

struct DecodeShape {
  uint64_t batch = 0;
  uint32_t q_heads = 0;
  uint32_t kv_heads = 0;
  uint32_t head_chunks = 0;   // query-head chunks per kv head
  uint32_t heads_per_cta = 0; // query heads one thread block computes
  uint32_t head_dim = 0;
  uint64_t max_tokens = 0;    // attended tokens of the longest sequence
  uint32_t tile = 0;          // tokens a thread block handles per step
  uint64_t wave = 0;          // thread blocks resident on the whole GPU at once
  uint64_t min_split_tokens = kMinSplitTokens;  // kMinSplitTokensFp8 for fp8 K/V
};

struct DecodeSplit {
  uint32_t num_splits = 1;
  uint32_t split_tokens = 0;
};

DecodeSplit plan_decode_split(const DecodeShape& s);

// Benchmarks only: forces the number of splits (0 restores the planner).
// It is clamped to what decode_workspace_bound() covers, so a workspace of
// the queried size stays large enough. Not thread safe; not in the C API.
void set_decode_split_override(uint32_t splits);

// Bytes of partial results (f32 output row + max and sum) a call of this
// shape may need; never decreases as batch or max_tokens grow, and bounds
// every plan_decode_split() of a smaller shape.
uint64_t decode_workspace_bound(const DecodeShape& s);

}  // namespace kvc
