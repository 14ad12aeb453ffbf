// The CUDA-core kernel. Decode reads every cached K/V byte once per
// query-head chunk and does little arithmetic per byte, so the kernel is
// built for memory throughput:
//  - a thread block owns one (sequence, kv head, chunk of GB query heads)
//    and a range of tokens (split-KV, see decode_split.h);
//  - a token is read by TPT = head_dim / 16 threads, 16 elements each (one
//    or two 16-byte chunks), so the GB query heads sharing that kv head reuse
//    every loaded element from registers; dot products are finished with
//    butterfly shuffles inside the TPT threads. Chunk c of lane l is chunk
//    c * TPT + l of the row, so each copy instruction reads whole 128-byte
//    lines (a thread's two chunks side by side would use half of every
//    sector twice);
//  - K/V move global -> shared memory with cp.async, kStages steps ahead of
//    the math, so that enough bytes are in flight to saturate HBM. Each
//    thread copies exactly the chunks it later reads, so the pipeline needs
//    no block-wide barrier;
//  - each token group keeps an online softmax (running max, sum and output)
//    over its tokens; the groups of a block are merged through shared
//    memory, and the splits of a sequence by a second small kernel.
// Scores use exp2 with log2(e) folded into the query scale.
// Included by decode_attention.cu only, after decode_common.cuh.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "cuda/cuda_numeric.cuh"
#include "cuda/decode_common.cuh"
#include "cuda/tensor_core_ptx.cuh"

namespace kvc {

namespace {

constexpr int kThreads = 128;
constexpr int kVec = 16;             // head-dim elements per thread
constexpr int kStages = 4;           // cp.async pipeline depth (steps in flight)

template <class KV> struct KvTraits;
// 16-bit K/V: two 16-byte loads per 16 elements, two tokens per step.
template <> struct KvTraits<bf16_t> { static constexpr int kLoads = 2; static constexpr int kUnroll = 2; };
template <> struct KvTraits<f16_t> { static constexpr int kLoads = 2; static constexpr int kUnroll = 2; };
// fp8 K/V: one 16-byte load per 16 elements, four tokens per step to keep
// as many bytes in flight.
template <> struct KvTraits<fp8_t> { static constexpr int kLoads = 1; static constexpr int kUnroll = 4; };

template <class KV>
__device__ __forceinline__ void unpack16(const uint4* raw, float* out) {
  if constexpr (std::is_same_v<KV, fp8_t>) {
    unpack8(make_uint2(raw[0].x, raw[0].y), fp8_t{}, out);
    unpack8(make_uint2(raw[0].z, raw[0].w), fp8_t{}, out + 8);
  } else {
    unpack8(raw[0], KV{}, out);
    unpack8(raw[1], KV{}, out + 8);
  }
}

// Per-variant constants. A pipeline stage holds the K and V chunks of one
// step: [token group][token][K|V][chunk][lane] 16-byte chunks, so the 8
// threads of a quarter warp touch 128 consecutive bytes.
template <class KV, int D, int GB>
struct Tiling {
  static constexpr int TPT = D / kVec;
  static constexpr int TG = kThreads / TPT;
  static constexpr int U = KvTraits<KV>::kUnroll;
  static constexpr int LOADS = KvTraits<KV>::kLoads;
  static constexpr int TILE = TG * U;
  static constexpr int kStageChunks = TG * U * 2 * LOADS * TPT;
  static constexpr int kGroupStride = GB * D + TPT;  // merge rows, padded against bank conflicts
  static constexpr size_t kPipeBytes = size_t(kStages) * kStageChunks * 16;
  static constexpr size_t kMergeBytes = (size_t(TG) * kGroupStride + 2 * TG * GB) * sizeof(float);
  static constexpr size_t kSmemBytes = kPipeBytes > kMergeBytes ? kPipeBytes : kMergeBytes;
  __device__ static constexpr int chunk(int tg, int u, int kv, int c, int lane) {
    return (((tg * U + u) * 2 + kv) * LOADS + c) * TPT + lane;
  }
  // Head-dim index of this thread's element e: chunk e / EPC is chunk
  // (e / EPC) * TPT + lane of the row.
  static constexpr int EPC = 16 / int(sizeof(KV));  // elements per 16-byte chunk
  __device__ static constexpr int dim(int lane, int e) {
    return (e / EPC) * (TPT * EPC) + lane * EPC + e % EPC;
  }
};

template <class KV, class Q, int D, int GB>
__global__ void __launch_bounds__(kThreads, 2) decode_kernel(const __grid_constant__ DecodeParams p) {
  using Tl = Tiling<KV, D, GB>;
  constexpr int TPT = Tl::TPT, TG = Tl::TG, U = Tl::U, LOADS = Tl::LOADS, TILE = Tl::TILE;
  extern __shared__ uint4 smem[];
  // The merge kernel (a programmatic dependent launch) may be scheduled as
  // soon as every block of this grid has started: its blocks take SM room
  // as ours retire and wait (griddepcontrol.wait) for this grid's
  // completion and memory, so its launch and start-up overlap our tail.
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");

  const uint32_t b = blockIdx.z;
  const uint32_t kvh = blockIdx.y / p.head_chunks;
  const uint32_t chunk = blockIdx.y - kvh * p.head_chunks;
  const uint32_t split = blockIdx.x;
  const uint32_t lane = threadIdx.x % TPT;
  const uint32_t tg = threadIdx.x / TPT;
  const uint32_t h0 = kvh * p.group + chunk * GB;

  const SeqRange seq = sequence_range(p, b, threadIdx.x == 0 && split == 0 && blockIdx.y == 0);
  const uint32_t t0 = seq.start + split * p.split_tokens;
  const uint32_t t1 = min(seq.len, t0 + p.split_tokens);
  if (t0 >= t1) {
    // Nothing to attend in this range. With one split this block owns the
    // output: an empty sequence gives zeros. With several, the merge skips
    // ranges past the sequence's end.
    if (p.num_splits == 1) {
      for (uint32_t i = threadIdx.x; i < GB * D; i += kThreads)
        static_cast<Q*>(p.out)[(uint64_t(b) * p.q_heads + h0) * D + i] = from_f32<Q>(0.0f);
    }
    return;
  }

  const uint64_t head_offset = uint64_t(kvh) * p.head_stride + uint64_t(lane) * 16;
  const uint32_t block_mask = p.token_mask;
  const uint32_t steps = (t1 - t0 + TILE - 1) / TILE;
  uint32_t valid_bits = 0;  // bit stage * U + u: that token of the stage was loaded

  // Starts the copies of step `i` into pipeline stage `stage`.
  auto issue = [&](uint32_t i, uint32_t stage) {
    uint4* dst = smem + stage * Tl::kStageChunks;
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const uint32_t t = t0 + i * TILE + tg * U + u;
      bool ok = t < t1;
      if (ok) {
        const int32_t id = seq.row[t >> p.block_shift];
        if (id < 0 || uint32_t(id) >= p.num_blocks) {
          if (lane == 0)
            record_kernel_error(p.err, kBlockOutOfRange, p.layer, b, id, p.num_blocks,
                                t >> p.block_shift);
          ok = false;
        } else {
          const uint64_t off = uint64_t(id) * p.block_stride +
                               uint64_t(t & block_mask) * p.token_stride + head_offset;
          const uint4* kp = reinterpret_cast<const uint4*>(p.k_base + off);
          const uint4* vp = reinterpret_cast<const uint4*>(p.v_base + off);
#pragma unroll
          for (int c = 0; c < LOADS; ++c) {
            cp_async16(smem_u32(dst + Tl::chunk(tg, u, 0, c, lane)), kp + c * TPT, 16u);
            cp_async16(smem_u32(dst + Tl::chunk(tg, u, 1, c, lane)), vp + c * TPT, 16u);
          }
        }
      }
      const uint32_t bit = 1u << (stage * U + u);
      valid_bits = ok ? (valid_bits | bit) : (valid_bits & ~bit);
    }
  };

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (uint32_t(s) < steps) issue(s, s);
    cp_async_commit();
  }

  // This thread's 16 dims of each query head (the K/V element order: each
  // run of 8 is contiguous), pre-scaled.
  float q[GB][kVec];
#pragma unroll
  for (int j = 0; j < GB; ++j) {
    const Q* row = static_cast<const Q*>(p.query) + (uint64_t(b) * p.q_heads + h0 + j) * D;
    const uint4 raw[2] = {*reinterpret_cast<const uint4*>(row + Tl::dim(lane, 0)),
                          *reinterpret_cast<const uint4*>(row + Tl::dim(lane, 8))};
    unpack8(raw[0], Q{}, q[j]);
    unpack8(raw[1], Q{}, q[j] + 8);
#pragma unroll
    for (int e = 0; e < kVec; ++e) q[j][e] *= p.q_scale;
  }

  float m[GB], l[GB], acc[GB][kVec];
#pragma unroll
  for (int j = 0; j < GB; ++j) {
    m[j] = kNoScore;
    l[j] = 0.0f;
#pragma unroll
    for (int e = 0; e < kVec; ++e) acc[j][e] = 0.0f;
  }

  // Every thread runs the same number of steps (shuffles need the whole
  // warp); tokens past t1 are masked.
  for (uint32_t i = 0; i < steps; ++i) {
    const uint32_t stage = i % kStages;
    // Refill the stage read one step ago (by this thread only: no barrier).
    const uint32_t ahead = i + kStages - 1;
    if (ahead < steps) issue(ahead, ahead % kStages);
    cp_async_commit();
    cp_async_wait<kStages - 1>();  // step i's group has landed
    const uint4* src = smem + stage * Tl::kStageChunks;

    bool valid[U];
    float s[U][GB];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      valid[u] = (valid_bits >> (stage * U + u)) & 1u;
      uint4 raw[LOADS];
#pragma unroll
      for (int c = 0; c < LOADS; ++c)
        raw[c] = valid[u] ? src[Tl::chunk(tg, u, 0, c, lane)] : make_uint4(0, 0, 0, 0);
      float k[kVec];
      unpack16<KV>(raw, k);
#pragma unroll
      for (int j = 0; j < GB; ++j) {
        float dot = 0.0f;
#pragma unroll
        for (int e = 0; e < kVec; ++e) dot = fmaf(q[j][e], k[e], dot);
        s[u][j] = dot;
      }
    }
    // Scores: partial dot products, completed across the TPT threads.
#pragma unroll
    for (int off = TPT / 2; off >= 1; off /= 2) {
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int j = 0; j < GB; ++j) s[u][j] += __shfl_xor_sync(0xffffffffu, s[u][j], off);
    }

    // Online softmax over this step's tokens.
#pragma unroll
    for (int j = 0; j < GB; ++j) {
      float mx = m[j];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        if (!valid[u]) s[u][j] = -INFINITY;
        mx = fmaxf(mx, s[u][j]);
      }
      const float corr = exp2f(m[j] - mx);
      m[j] = mx;
      l[j] *= corr;
#pragma unroll
      for (int e = 0; e < kVec; ++e) acc[j][e] *= corr;
#pragma unroll
      for (int u = 0; u < U; ++u) {
        s[u][j] = exp2f(s[u][j] - mx);
        l[j] += s[u][j];
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      // Invalid tokens read zeros, not a stale stage: 0 * NaN would poison acc.
      uint4 raw[LOADS];
#pragma unroll
      for (int c = 0; c < LOADS; ++c)
        raw[c] = valid[u] ? src[Tl::chunk(tg, u, 1, c, lane)] : make_uint4(0, 0, 0, 0);
      float v[kVec];
      unpack16<KV>(raw, v);
#pragma unroll
      for (int j = 0; j < GB; ++j)
#pragma unroll
        for (int e = 0; e < kVec; ++e) acc[j][e] = fmaf(s[u][j], v[e], acc[j][e]);
    }
  }
  cp_async_wait<0>();
  __syncthreads();  // the pipeline's shared memory becomes the merge area

  // Merge the token groups of this block. Element (j, e) of lane sits at
  // group * kGroupStride + (j * kVec + e) * TPT + lane: consecutive threads
  // hit consecutive banks on both the write and the read.
  float* sm_out = reinterpret_cast<float*>(smem);
  float* sm_m = sm_out + TG * Tl::kGroupStride;  // [TG][GB]
  float* sm_l = sm_m + TG * GB;                   // [TG][GB]
#pragma unroll
  for (int j = 0; j < GB; ++j)
#pragma unroll
    for (int e = 0; e < kVec; ++e)
      sm_out[tg * Tl::kGroupStride + (j * kVec + e) * TPT + lane] = acc[j][e];
  if (lane == 0) {
#pragma unroll
    for (int j = 0; j < GB; ++j) {
      sm_m[tg * GB + j] = m[j];
      sm_l[tg * GB + j] = l[j];
    }
  }
  __syncthreads();
  for (uint32_t o = threadIdx.x; o < GB * D; o += kThreads) {
    const uint32_t j = o / D;
    const uint32_t e = (o % D) / TPT;
    const uint32_t ln = o % TPT;
    const uint32_t d = Tl::dim(ln, e);
    float mx = kNoScore;
#pragma unroll
    for (int g = 0; g < TG; ++g) mx = fmaxf(mx, sm_m[g * GB + j]);
    float sum = 0.0f, val = 0.0f;
#pragma unroll
    for (int g = 0; g < TG; ++g) {
      const float w = exp2f(sm_m[g * GB + j] - mx);
      sum += sm_l[g * GB + j] * w;
      val += sm_out[g * Tl::kGroupStride + o] * w;
    }
    const uint64_t row = uint64_t(b) * p.q_heads + h0 + j;
    if (p.num_splits == 1) {
      static_cast<Q*>(p.out)[row * D + d] = from_f32<Q>(sum > 0.0f ? val * p.v_scale / sum : 0.0f);
    } else {
      const uint64_t part = row * p.num_splits + split;
      p.ws_out[part * D + d] = val * p.v_scale;
      if (o % D == 0) p.ws_ml[part] = make_float2(mx, sum);
    }
  }
}

}  // namespace

}  // namespace kvc
