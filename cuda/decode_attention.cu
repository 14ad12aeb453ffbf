// Paged decode attention: the launch, the split-KV merge kernel, and the
// CUDA-core kernel. Two kernels compute it: the tensor-core kernel
// (decode_tc_kernel.cuh) wherever it applies (head dim 64 and 128, any K/V
// type, GQA group <= 16 or a multiple of 16), which reads each K/V element
// once per kv head; the CUDA-core kernel below elsewhere (head dim 256,
// other groups). set_decode_kernel_override() forces either (tests,
// benchmarks); the workspace size covers both.
//
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
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <mutex>
#include <type_traits>

#include "cuda/cuda_check.h"
#include "cuda/cuda_kernels.h"
#include "cuda/cuda_numeric.cuh"
#include "cuda/decode_common.cuh"
#include "cuda/decode_split.h"
#include "cuda/decode_tc_kernel.cuh"
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

// One compiled variant: its kernels, its shared memory and how many of its
// blocks fit an SM.
struct Variant {
  void (*decode)(DecodeParams);
  void (*merge)(DecodeParams);
  size_t smem_bytes;
  int threads;
  int heads_per_cta;
  int tile;
  int blocks_per_sm;
};

constexpr int kMaxDevices = 64;

// Per device: the shared-memory opt-in above 48 KiB is a property of the
// function on the current device.
int current_device() {
  int device = 0;
  cuda_check(cudaGetDevice(&device), "cudaGetDevice");
  if (device >= kMaxDevices) fail(KVC_ERR_UNSUPPORTED, "CUDA device ordinal >= 64");
  return device;
}

// Raises the shared-memory limit of r's kernel and counts its resident blocks.
void finish_variant(Variant& r) {
  cuda_check(cudaFuncSetAttribute(r.decode, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  int(r.smem_bytes)),
             "cudaFuncSetAttribute");
  cuda_check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&r.blocks_per_sm, r.decode, r.threads,
                                                           r.smem_bytes),
             "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  r.blocks_per_sm = std::max(r.blocks_per_sm, 1);
}

template <class KV, class Q, int D, int GB>
const Variant& variant() {
  static Variant per_device[kMaxDevices];
  static std::once_flag once[kMaxDevices];
  const int device = current_device();
  std::call_once(once[device], [device] {
    using Tl = Tiling<KV, D, GB>;
    Variant& r = per_device[device];
    r.decode = decode_kernel<KV, Q, D, GB>;
    r.merge = merge_kernel<Q, D>;
    r.smem_bytes = Tl::kSmemBytes;
    r.threads = kThreads;
    r.heads_per_cta = GB;
    r.tile = Tl::TILE;
    finish_variant(r);
  });
  return per_device[device];
}

// The tensor-core kernel (decode_tc_kernel.cuh): heads_per_cta is the
// group, or 16 for a group that is a multiple of 16.
template <class KV, class Q, int D, int STAGES, int MINB = 1>
Variant tc_variant(uint32_t group) {
  static Variant per_device[kMaxDevices];
  static std::once_flag once[kMaxDevices];
  const int device = current_device();
  std::call_once(once[device], [device] {
    using Tl = TcTiling<KV, D, STAGES>;
    Variant& r = per_device[device];
    r.decode = decode_tc_kernel<KV, Q, D, STAGES, MINB>;
    r.merge = merge_kernel<Q, D>;
    r.smem_bytes = Tl::kSmemBytes;
    r.threads = kTcThreads;
    r.tile = Tl::kBlockTokens;
    finish_variant(r);
  });
  Variant v = per_device[device];
  v.heads_per_cta = int(group <= 16 ? group : 16);
  return v;
}

// Query heads per block: the largest of 4, 2, 1 dividing the group (4 keeps
// the per-thread state in registers).
int heads_per_cta(uint32_t group) { return group % 4 == 0 ? 4 : group % 2 == 0 ? 2 : 1; }

template <class KV, class Q, int D>
Variant pick_gb(uint32_t group) {
  switch (heads_per_cta(group)) {
    case 4: return variant<KV, Q, D, 4>();
    case 2: return variant<KV, Q, D, 2>();
    default: return variant<KV, Q, D, 1>();
  }
}

template <class KV, class Q>
Variant pick_dim(uint32_t head_dim, uint32_t group) {
  switch (head_dim) {
    case 64: return pick_gb<KV, Q, 64>(group);
    case 128: return pick_gb<KV, Q, 128>(group);
    default: return pick_gb<KV, Q, 256>(group);
  }
}

// The CUDA-core kernel for w.
Variant pick_cuda_core(const DecodeWork& w) {
  const LayerSlabs& kv = w.kv;
  const uint32_t group = w.q_heads / kv.kv_heads;
  switch (kv.dtype) {
    case KVC_DTYPE_F16: return pick_dim<f16_t, f16_t>(kv.head_dim, group);
    case KVC_DTYPE_BF16: return pick_dim<bf16_t, bf16_t>(kv.head_dim, group);
    case KVC_DTYPE_FP8_E4M3:
      return w.q_dtype == KVC_DTYPE_F16 ? pick_dim<fp8_t, f16_t>(kv.head_dim, group)
                                        : pick_dim<fp8_t, bf16_t>(kv.head_dim, group);
    default:
      fail(KVC_ERR_UNSUPPORTED,
           "decode attention on a CUDA cache supports f16, bf16 and fp8_e4m3 K/V; this cache "
           "holds f32 (the CPU backend computes f32)");
  }
}

// Whether the tensor-core kernel computes w: head dim 64 or 128, and a
// group that fits the 16 rows of a tile or is a multiple of 16.
bool tc_supports(const DecodeWork& w) {
  const LayerSlabs& kv = w.kv;
  const uint32_t group = w.q_heads / kv.kv_heads;
  return (kv.dtype == KVC_DTYPE_F16 || kv.dtype == KVC_DTYPE_BF16 ||
          kv.dtype == KVC_DTYPE_FP8_E4M3) &&
         (kv.head_dim == 64 || kv.head_dim == 128) && (group <= 16 || group % 16 == 0);
}

std::atomic<int> g_path_override{0};

// Pipeline stages per warp: 16-bit K/V 3 (96 KiB, two blocks per SM); fp8
// 4 of raw tiles (64 KiB, three blocks per SM: the tile is converted in
// registers, so more warps hide its latency). Override 3 picks 4 stages
// (128 KiB, one block per SM) for 16-bit K/V and 3 stages (48 KiB, four
// blocks per SM, 1-4% slower on an H200) for fp8 instead. On an H100 (bench/results/2026-11-28-kernels-h100.md) the 16-bit
// defaults were as fast or faster on most rows.
template <class KV, class Q, int D>
Variant pick_tc_stages(uint32_t group, int alt) {
  if constexpr (std::is_same_v<KV, fp8_t>) {
    if (alt == 3) return tc_variant<KV, Q, D, 3, 4>(group);
    return tc_variant<KV, Q, D, 4, 3>(group);
  } else {
    if (alt == 3) return tc_variant<KV, Q, D, 4>(group);
    return tc_variant<KV, Q, D, 3>(group);
  }
}

template <class KV, class Q>
Variant pick_tc_dim(uint32_t head_dim, uint32_t group, int alt) {
  return head_dim == 64 ? pick_tc_stages<KV, Q, 64>(group, alt) : pick_tc_stages<KV, Q, 128>(group, alt);
}

Variant pick_tc(const DecodeWork& w) {
  const uint32_t group = w.q_heads / w.kv.kv_heads;
  const int alt = g_path_override.load(std::memory_order_relaxed);
  switch (w.kv.dtype) {
    case KVC_DTYPE_F16: return pick_tc_dim<f16_t, f16_t>(w.kv.head_dim, group, alt);
    case KVC_DTYPE_BF16: return pick_tc_dim<bf16_t, bf16_t>(w.kv.head_dim, group, alt);
    default:
      return w.q_dtype == KVC_DTYPE_F16 ? pick_tc_dim<fp8_t, f16_t>(w.kv.head_dim, group, alt)
                                        : pick_tc_dim<fp8_t, bf16_t>(w.kv.head_dim, group, alt);
  }
}

// Tensor cores wherever supported (measured on an H100 as fast as the
// CUDA-core kernel or faster at every group size, bench/results), CUDA
// cores elsewhere.
bool use_tc(const DecodeWork& w) {
  if (!tc_supports(w)) return false;
  return g_path_override.load(std::memory_order_relaxed) != 1;
}

Variant pick(const DecodeWork& w) { return use_tc(w) ? pick_tc(w) : pick_cuda_core(w); }

DecodeShape shape_of(const DecodeWork& w, const Variant& v, const GpuInfo& gpu) {
  DecodeShape s;
  s.batch = w.batch;
  s.q_heads = w.q_heads;
  s.kv_heads = w.kv.kv_heads;
  s.heads_per_cta = uint32_t(v.heads_per_cta);
  s.head_chunks = (w.q_heads / w.kv.kv_heads) / s.heads_per_cta;
  s.head_dim = w.kv.head_dim;
  s.max_tokens = w.window != 0 ? std::min(w.max_seq_len, w.window) : w.max_seq_len;
  s.tile = uint32_t(v.tile);
  s.wave = uint64_t(gpu.sm_count) * uint64_t(v.blocks_per_sm);
  s.min_split_tokens = w.kv.dtype == KVC_DTYPE_FP8_E4M3 ? kMinSplitTokensFp8 : kMinSplitTokens;
  return s;
}

}  // namespace

void set_decode_kernel_override(int path) { g_path_override.store(path, std::memory_order_relaxed); }

uint64_t decode_workspace_bytes(const DecodeWork& w, const GpuInfo& gpu) {
  // Either kernel may run a call of this shape (set_decode_kernel_override):
  // the workspace covers both.
  uint64_t bytes = decode_workspace_bound(shape_of(w, pick_cuda_core(w), gpu));
  if (tc_supports(w)) bytes = std::max(bytes, decode_workspace_bound(shape_of(w, pick_tc(w), gpu)));
  return bytes;
}

void launch_decode_attention(const DecodeWork& w, const GpuInfo& gpu, KernelErrorRecord* err,
                             cudaStream_t stream) {
  const LayerSlabs& kv = w.kv;
  const Variant v = pick(w);
  const DecodeShape shape = shape_of(w, v, gpu);
  const DecodeSplit split = plan_decode_split(shape);
  // Queries are read in 16-byte vectors.
  if (reinterpret_cast<uintptr_t>(w.query) % 16 != 0)
    invalid_argument("query must be 16-byte aligned on a CUDA cache");
  const float kLog2e = 1.4426950408889634f;
  const bool fp8 = kv.dtype == KVC_DTYPE_FP8_E4M3;

  DecodeParams p{};
  p.query = w.query;
  p.out = w.out;
  p.k_base = static_cast<const unsigned char*>(kv.base);
  p.v_base = p.k_base + (kv.kv_factor == 2 ? kv.kv_stride : 0);
  p.block_stride = kv.block_stride;
  p.token_stride = kv.token_stride;
  p.head_stride = kv.head_stride;
  p.seq_lens = w.seq_lens;
  p.table = w.block_table;
  p.indptr = w.table_format == KVC_TABLE_CSR ? w.indptr : nullptr;
  p.table_stride = w.table_stride;
  p.num_blocks = uint32_t(std::min<uint64_t>(kv.num_blocks, INT32_MAX));
  p.block_shift = block_shift_of(kv.tokens_per_block);
  // Stateful rows (DecodeWork::contiguous_rows): the offset keeps all of t.
  p.token_mask = w.contiguous_rows ? 0xffffffffu : (1u << p.block_shift) - 1;
  p.q_heads = w.q_heads;
  p.group = w.q_heads / kv.kv_heads;
  p.head_chunks = shape.head_chunks;
  p.max_seq_len = w.max_seq_len;
  p.window = w.window;
  p.num_splits = split.num_splits;
  p.split_tokens = split.split_tokens;
  p.q_scale = w.softmax_scale * (fp8 ? w.k_scale : 1.0f) * kLog2e;
  p.v_scale = fp8 ? w.v_scale : 1.0f;
  if (split.num_splits > 1) {
    const uint64_t rows = uint64_t(w.batch) * w.q_heads * split.num_splits;
    p.ws_out = static_cast<float*>(w.workspace);
    p.ws_ml = reinterpret_cast<float2*>(p.ws_out + rows * kv.head_dim);
  }
  p.err = err;
  p.layer = kv.layer;

  if (w.batch > 65535)
    fail(KVC_ERR_UNSUPPORTED, "decode attention on CUDA takes at most 65535 sequences per call, got " +
                                  std::to_string(w.batch));
  const dim3 grid(split.num_splits, kv.kv_heads * shape.head_chunks, w.batch);
  v.decode<<<grid, v.threads, v.smem_bytes, stream>>>(p);
  cuda_check(cudaGetLastError(), "decode attention kernel launch");
  if (split.num_splits > 1) {
    // Programmatic dependent launch: the merge grid is set up while the
    // decode grid drains, hiding most of the second launch's latency.
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = dim3(w.q_heads, w.batch);
    cfg.blockDim = dim3(kv.head_dim);
    cfg.dynamicSmemBytes = (2 * size_t(split.num_splits) + 32) * sizeof(float);
    cfg.stream = stream;
    cudaLaunchAttribute attr{};
    attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr.val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    cuda_check(cudaLaunchKernelEx(&cfg, v.merge, p), "decode attention merge kernel launch");
    cuda_check(cudaGetLastError(), "decode attention merge kernel launch");
  }
}

}  // namespace kvc
