// The merge of split-KV decode: one block per (sequence, query head)
// combines the partial (max, sum, O) rows that the decode kernels wrote to
// the workspace (decode_common.cuh's layout).
// Included by decode_attention.cu only, after decode_common.cuh.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/cuda_numeric.cuh"
#include "cuda/decode_common.cuh"
#include "cuda/decode_split.h"

namespace kvc {

namespace {

// Block-wide reduction over the D threads of a merge block.
template <int D, class Op>
__device__ __forceinline__ float block_reduce(float v, float* scratch, Op op) {
#pragma unroll
  for (int off = 16; off >= 1; off /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, off));
  constexpr int kWarps = D / 32;
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  float r = scratch[0];
#pragma unroll
  for (int w = 1; w < kWarps; ++w) r = op(r, scratch[w]);
  __syncthreads();  // scratch is reused by the next reduction
  return r;
}

// Combines the splits of each (sequence, query head): weights exp2(m - M).
// A merge is a chain of L2 round trips at the tail of the call, so it is
// built to need as few as possible: right after the wait, every thread
// issues the loads of its first kMergePrefetch partial values together with
// the per-split maxima and sums (one round trip for all of them), keeps
// them in registers, and the maxima and sums go to shared memory so that
// they are read from L2 once; further partial values come kMergePrefetch
// loads at a time. The sums run in split order, as before.
constexpr int kMergePrefetch = 32;
static_assert(kMergePrefetch == int(kMergeRoundSplits), "the planner keeps to one merge round");

template <class Q, int D>
__global__ void __launch_bounds__(D) merge_kernel(const __grid_constant__ DecodeParams p) {
  // [num_splits] split maxima, then weights; [num_splits] sums; [32] scratch
  extern __shared__ float weights[];
  const uint32_t h = blockIdx.x;
  const uint32_t b = blockIdx.y;
  const SeqRange seq = sequence_range(p, b, false);
  const uint32_t used =
      seq.len > seq.start ? (seq.len - seq.start + p.split_tokens - 1) / p.split_tokens : 0;
  float* sums = weights + p.num_splits;
  float* scratch = sums + p.num_splits;
  const uint64_t row = uint64_t(b) * p.q_heads + h;
  // Launched as a programmatic dependent of the decode grid: wait until
  // its partial results are complete and visible.
  asm volatile("griddepcontrol.wait;" ::: "memory");
  const float2* ml = p.ws_ml + row * p.num_splits;
  const float* part = p.ws_out + row * p.num_splits * D + threadIdx.x;

  float pre[kMergePrefetch];
#pragma unroll
  for (int s = 0; s < kMergePrefetch; ++s) pre[s] = uint32_t(s) < used ? part[uint64_t(s) * D] : 0.0f;

  float mx = kNoScore;
  for (uint32_t s = threadIdx.x; s < used; s += D) {
    const float2 v = ml[s];
    weights[s] = v.x;
    sums[s] = v.y;
    mx = fmaxf(mx, v.x);
  }
  mx = block_reduce<D>(mx, scratch, [](float a, float c) { return fmaxf(a, c); });
  float sum = 0.0f;
  for (uint32_t s = threadIdx.x; s < used; s += D) {  // the entries this thread wrote
    const float w = exp2f(weights[s] - mx);
    weights[s] = w;
    sum += sums[s] * w;
  }
  sum = block_reduce<D>(sum, scratch, [](float a, float c) { return a + c; });  // also a barrier

  float val = 0.0f;
#pragma unroll
  for (int s = 0; s < kMergePrefetch; ++s)
    if (uint32_t(s) < used) val += weights[s] * pre[s];
  // Further splits (long sequences at batch 1): kMergePrefetch loads in
  // flight per round trip.
  for (uint32_t base = kMergePrefetch; base < used; base += kMergePrefetch) {
#pragma unroll
    for (int s = 0; s < kMergePrefetch; ++s)
      pre[s] = base + uint32_t(s) < used ? part[uint64_t(base + uint32_t(s)) * D] : 0.0f;
#pragma unroll
    for (int s = 0; s < kMergePrefetch; ++s)
      if (base + uint32_t(s) < used) val += weights[base + uint32_t(s)] * pre[s];
  }
  static_cast<Q*>(p.out)[row * D + threadIdx.x] = from_f32<Q>(sum > 0.0f ? val / sum : 0.0f);
}

}  // namespace

}  // namespace kvc
