// Paged decode attention: which kernel and split plan a call gets, and its
// launch. Two kernels compute it: the tensor-core kernel
// (decode_tc_kernel.cuh) wherever it applies (head dim 64 and 128, any K/V
// type, GQA group <= 16 or a multiple of 16), which reads each K/V element
// once per kv head; the CUDA-core kernel
// (decode_cuda_core_kernel.cuh) elsewhere (head dim 256,
// other groups). set_decode_kernel_override() forces either (tests,
// benchmarks); the workspace size covers both.
//
// The splits of a sequence are combined by decode_merge_kernel.cuh.
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
#include "cuda/decode_cuda_core_kernel.cuh"
#include "cuda/decode_merge_kernel.cuh"
#include "cuda/decode_split.h"
#include "cuda/decode_tc_kernel.cuh"
#include "cuda/tensor_core_ptx.cuh"

namespace kvc {

namespace {

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
