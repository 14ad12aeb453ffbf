// The split-KV planner of CUDA decode attention: pure host arithmetic, so it
// runs without a GPU. Plans cover every token, fill the GPU when the batch
// is small, do not split a batch that already fills it, and never need more
// workspace than decode_workspace_bound() promises for a larger shape.
#include <gtest/gtest.h>

#include "cuda/decode_split.h"

namespace kvc {
namespace {

DecodeShape llama(uint64_t batch, uint64_t tokens, uint64_t min_split = kMinSplitTokens) {
  DecodeShape s;
  s.min_split_tokens = min_split;
  s.batch = batch;
  s.q_heads = 32;
  s.kv_heads = 8;
  s.heads_per_cta = 4;
  s.head_chunks = 1;
  s.head_dim = 128;
  s.max_tokens = tokens;
  s.tile = 32;
  s.wave = 132 * 2;
  return s;
}

uint64_t rows_needed(const DecodeShape& s, const DecodeSplit& d) {
  return d.num_splits > 1 ? s.batch * s.q_heads * d.num_splits : 0;
}

TEST(DecodeSplit, CoversEveryToken) {
  for (uint64_t min_split : {kMinSplitTokens, kMinSplitTokensFp8})
  for (uint64_t batch : {1, 3, 8, 64, 512})
    for (uint64_t tokens : {1, 31, 32, 257, 4096, 32768, 1 << 20}) {
      const DecodeShape s = llama(batch, tokens, min_split);
      const DecodeSplit d = plan_decode_split(s);
      ASSERT_GE(d.num_splits, 1u);
      EXPECT_EQ(d.split_tokens % s.tile, 0u);
      EXPECT_GE(uint64_t(d.num_splits) * d.split_tokens, tokens) << batch << " " << tokens;
      EXPECT_LT(uint64_t(d.num_splits - 1) * d.split_tokens, tokens) << "an empty split";
    }
}

TEST(DecodeSplit, OneLongSequenceFillsTheGpu) {
  const DecodeShape s = llama(1, 32768);
  const DecodeSplit d = plan_decode_split(s);
  // 8 blocks without a split; at least a wave of them with it.
  EXPECT_GE(uint64_t(d.num_splits) * 8, s.wave * 3 / 4) << d.num_splits;
  EXPECT_GE(d.split_tokens, kMinSplitTokens / 2);
}

TEST(DecodeSplit, OneMergeRoundWhenItFillsHalfAWave) {
  // fp8 at three blocks per SM: 49 splits would fit the wave, 32 are taken.
  for (uint64_t tokens : {8192, 16384, 32768}) {
    DecodeShape s = llama(1, tokens, kMinSplitTokensFp8);
    s.wave = 132 * 3;
    EXPECT_LE(plan_decode_split(s).num_splits, kMergeRoundSplits) << tokens;
  }
  // One kv head: 32 splits are 32 blocks, far from half a wave: cut further.
  DecodeShape mqa = llama(1, 32768);
  mqa.kv_heads = 1;
  mqa.q_heads = 4;
  EXPECT_GT(plan_decode_split(mqa).num_splits, kMergeRoundSplits);
}

TEST(DecodeSplit, Fp8SplitsAsBf16) {
  // Batch 1 x 4096 tokens, 8 blocks without a split: 16 splits of 256
  // tokens for either type (fp8 at three blocks per SM too).
  const DecodeSplit bf16 = plan_decode_split(llama(1, 4096));
  DecodeShape fp8_shape = llama(1, 4096, kMinSplitTokensFp8);
  fp8_shape.wave = 132 * 3;
  const DecodeSplit fp8 = plan_decode_split(fp8_shape);
  EXPECT_EQ(bf16.num_splits, 16u);
  EXPECT_EQ(fp8.num_splits, 16u);
  EXPECT_EQ(fp8.split_tokens, 256u);
}

TEST(DecodeSplit, ShortSequencesAreNotCut) {
  EXPECT_EQ(plan_decode_split(llama(1, 200)).num_splits, 1u);
  EXPECT_EQ(plan_decode_split(llama(1, 200, kMinSplitTokensFp8)).num_splits, 1u);
  EXPECT_EQ(plan_decode_split(llama(512, 32768)).num_splits, 1u);
}

TEST(DecodeSplit, WorkspaceBoundCoversSmallerShapes) {
  for (uint64_t min_split : {kMinSplitTokens, kMinSplitTokensFp8})
  for (uint64_t big_batch : {1, 2, 7, 33, 64, 300})
    for (uint64_t big_tokens : {100, 1000, 4096, 40000, 1 << 20}) {
      const uint64_t bound = decode_workspace_bound(llama(big_batch, big_tokens, min_split));
      for (uint64_t b = 1; b <= big_batch; b += 1 + b / 3)
        for (uint64_t t = 1; t <= big_tokens; t = t * 3 + 5) {
          const DecodeShape s = llama(b, t, min_split);
          const uint64_t need = rows_needed(s, plan_decode_split(s)) * (128 * 4 + 8);
          ASSERT_LE(need, bound) << "batch " << b << " tokens " << t << " under " << big_batch
                                 << " x " << big_tokens;
        }
    }
}

TEST(DecodeSplit, WorkspaceBoundIsMonotonic) {
  uint64_t prev_t = 0;
  for (uint64_t t = 1; t < (1u << 22); t = t * 2 + 1) {
    uint64_t prev_b = 0;
    for (uint64_t b = 1; b < 2000; b = b * 2 + 1) {
      const uint64_t w = decode_workspace_bound(llama(b, t));
      EXPECT_GE(w, prev_b);
      prev_b = w;
    }
    const uint64_t w = decode_workspace_bound(llama(1, t));
    EXPECT_GE(w, prev_t);
    prev_t = w;
  }
}

}  // namespace
}  // namespace kvc
