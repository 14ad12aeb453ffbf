// Paged prefill attention, host side: picks the compiled variant (dtypes,
// head dim, soft cap), cuts the batch into launches of at most kMaxSeqs
// sequences (they travel in the kernel parameters), plans split-KV per
// launch (prefill_plan.h) and launches the attention and merge kernels of
// prefill_kernel.cuh, or on a compute capability 9.0 device the Hopper
// kernel of prefill_wgmma_kernel.cuh for the combinations it has
// (prefill_hopper.h). Nothing is allocated: partial rows go to the
// caller's workspace.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <type_traits>

#include "cuda/cuda_check.h"
#include "cuda/cuda_kernels.h"
#include "cuda/prefill_hopper.h"
#include "cuda/prefill_kernel.cuh"
#include "cuda/prefill_plan.h"
#if defined(KVC_HAVE_SM90A)
#include "cuda/prefill_tma_map.h"
#endif

namespace kvc {

namespace {

struct Variant {
  void (*attend)(PrefillParams);
  void (*merge)(PrefillParams);
  size_t smem_bytes;
  int threads;
  int blocks_per_sm;
};

constexpr int kMaxDevices = 64;

std::atomic<int> g_config_override{0};

template <class Q, class KV, int D, bool CAP, int W = kDefaultWarps<D>, bool SPLIT_LOOPS = true>
const Variant& variant() {
  static Variant per_device[kMaxDevices];
  static std::once_flag once[kMaxDevices];
  int device = 0;
  cuda_check(cudaGetDevice(&device), "cudaGetDevice");
  if (device >= kMaxDevices) fail(KVC_ERR_UNSUPPORTED, "CUDA device ordinal >= 64");
  std::call_once(once[device], [device] {
    Variant& r = per_device[device];
    r.attend = prefill_kernel<Q, KV, D, W, 1, CAP, SPLIT_LOOPS>;
    r.merge = prefill_merge_kernel<Q, D>;
    r.smem_bytes = size_t(Smem<Q, KV, D>::kBytes);
    r.threads = Cfg<D, W, 1>::kThreads;
    cuda_check(cudaFuncSetAttribute(r.attend, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    int(r.smem_bytes)),
               "cudaFuncSetAttribute");
    cuda_check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&r.blocks_per_sm, r.attend, r.threads,
                                                             r.smem_bytes),
               "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
    r.blocks_per_sm = std::max(r.blocks_per_sm, 1);
  });
  return per_device[device];
}

template <class Q, class KV, bool CAP>
const Variant& pick_dim(uint32_t head_dim) {
  switch (head_dim) {
    case 64: return variant<Q, KV, 64, CAP>();
    case 128:
      // Benchmarks may ask for another configuration (bf16 without a cap).
      if constexpr (std::is_same_v<Q, bf16_t> && std::is_same_v<KV, bf16_t> && !CAP) {
        switch (g_config_override.load(std::memory_order_relaxed)) {
          case 2: return variant<Q, KV, 128, CAP>();  // the mma.sync default, no Hopper kernel
          case 4: return variant<Q, KV, 128, CAP>();  // the Hopper wgmma kernel without TMA (pick_attend)
          case 1: return variant<Q, KV, 128, CAP, 4, false>();
          case 3: return variant<Q, KV, 128, CAP, 8, true>();
          default: break;
        }
      }
      return variant<Q, KV, 128, CAP>();
    default: return variant<Q, KV, 256, CAP>();
  }
}

template <class Q, class KV>
const Variant& pick_cap(const PrefillWork& w) {
  return w.soft_cap > 0.0f ? pick_dim<Q, KV, true>(w.kv.head_dim)
                           : pick_dim<Q, KV, false>(w.kv.head_dim);
}

const Variant& pick(const PrefillWork& w) {
  const LayerSlabs& kv = w.kv;
  switch (kv.dtype) {
    case KVC_DTYPE_F16: return pick_cap<f16_t, f16_t>(w);
    case KVC_DTYPE_BF16: return pick_cap<bf16_t, bf16_t>(w);
    case KVC_DTYPE_FP8_E4M3:
      return w.q_dtype == KVC_DTYPE_F16 ? pick_cap<f16_t, fp8_t>(w) : pick_cap<bf16_t, fp8_t>(w);
    default:
      fail(KVC_ERR_UNSUPPORTED,
           "prefill attention on a CUDA cache supports f16, bf16 and fp8_e4m3 K/V; this cache "
           "holds f32 (the CPU backend computes f32)");
  }
}

// The attention kernel a launch runs: the Hopper one where there is one
// (and no benchmark configuration asks for another), else the variant's.
struct Attend {
  void (*attend)(PrefillParams);
  size_t smem_bytes;
  int threads;
  int blocks_per_sm;
};

// Default on compute capability 9.0: the TMA kernel where the pool can be
// addressed by tensor maps (filled into p here), else the wgmma kernel;
// benchmark configuration 4 asks for the wgmma kernel.
Attend pick_attend(const PrefillWork& w, const Variant& v, PrefillParams& p) {
#if defined(KVC_HAVE_SM90A)
  const int config = g_config_override.load(std::memory_order_relaxed);
  if (config == 0 || config == 4) {
    if (const PrefillHopperVariant* h =
            prefill_hopper_variant(w.kv.dtype, w.kv.head_dim, w.soft_cap > 0.0f)) {
      if (config == 0 && h->tma.attend != nullptr && prefill_tma_encode(p, w.kv.head_dim, w.kv.kv_heads))
        return {h->tma.attend, h->tma.smem_bytes, h->tma.threads, h->tma.blocks_per_sm};
      return {h->wgmma.attend, h->wgmma.smem_bytes, h->wgmma.threads, h->wgmma.blocks_per_sm};
    }
  }
#else
  (void)w;
  (void)p;
#endif
  return {v.attend, v.smem_bytes, v.threads, v.blocks_per_sm};
}

uint64_t wave_of(const Attend& a, const GpuInfo& gpu) {
  return uint64_t(gpu.sm_count) * std::min<uint64_t>(a.blocks_per_sm, kPrefillMaxBlocksPerSm);
}

}  // namespace

void set_prefill_config_override(int config) {
  g_config_override.store(config, std::memory_order_relaxed);
}

uint64_t prefill_workspace_bytes(const PrefillWork& w, const GpuInfo& gpu) {
  pick(w);  // the dtype checks
  // The largest wave of any variant: the bound holds whichever runs (a
  // soft cap or a benchmark configuration may pick another).
  return prefill_workspace_bound(w.total_q, w.q_heads, w.kv.head_dim, w.max_kv_len,
                                 uint64_t(gpu.sm_count) * kPrefillMaxBlocksPerSm);
}

void launch_prefill_attention(const PrefillWork& w, const GpuInfo& gpu, KernelErrorRecord* err,
                              cudaStream_t stream) {
  const LayerSlabs& kv = w.kv;
  const Variant& v = pick(w);
  // Checked before anything is launched.
  if (reinterpret_cast<uintptr_t>(w.query) % 16 != 0)
    invalid_argument("query must be 16-byte aligned on a CUDA cache");
  if (reinterpret_cast<uintptr_t>(w.out) % 16 != 0)
    invalid_argument("out must be 16-byte aligned on a CUDA cache");
  if (reinterpret_cast<uintptr_t>(w.lse) % 4 != 0)
    invalid_argument("lse must be 4-byte aligned on a CUDA cache");
  const bool fp8 = kv.dtype == KVC_DTYPE_FP8_E4M3;
  const uint32_t G = w.q_heads / kv.kv_heads;

  PrefillParams p{};
  p.query = w.query;
  p.out = w.out;
  p.lse = w.lse;
  p.k_base = static_cast<const unsigned char*>(kv.base);
  p.v_base = p.k_base + (kv.kv_factor == 2 ? kv.kv_stride : 0);
  p.block_stride = kv.block_stride;
  p.token_stride = kv.token_stride;
  p.head_stride = kv.head_stride;
  p.table = w.block_table;
  p.indptr = w.table_format == KVC_TABLE_CSR ? w.indptr : nullptr;
  p.table_stride = w.table_stride;
  p.num_blocks = uint32_t(std::min<uint64_t>(kv.num_blocks, INT32_MAX));
  p.block_shift = block_shift_of(kv.tokens_per_block);
  p.q_heads = w.q_heads;
  p.kv_heads = kv.kv_heads;
  p.group = G;
  p.window = w.window;
  const float scale = w.softmax_scale * (fp8 ? w.k_scale : 1.0f);
  if (w.soft_cap > 0.0f) {
    p.score_scale = scale / w.soft_cap;
    p.cap_log2 = w.soft_cap * kLog2e;
  } else {
    p.score_scale = scale * kLog2e;
    p.cap_log2 = 0.0f;
  }
  p.v_scale = fp8 ? w.v_scale : 1.0f;
  p.err = err;
  p.layer = kv.layer;
  const Attend at = pick_attend(w, v, p);

  const uint64_t wave = wave_of(at, gpu);
  const uint64_t tile_tokens = (BM + G - 1) / G;  // query tokens of a full tile
  uint32_t b = 0;
  while (b < w.batch) {
    // One launch: up to kMaxSeqs non-empty sequences.
    p.num_seqs = 0;
    uint32_t tiles = 0;
    uint64_t max_range = 0;
    int32_t rows_end = 0;
    for (; b < w.batch && p.num_seqs < uint32_t(kMaxSeqs); ++b) {
      const int32_t q_len = w.qo_indptr[b + 1] - w.qo_indptr[b];
      if (q_len == 0) continue;
      PrefillSeq& s = p.seqs[p.num_seqs++];
      s.q_start = w.qo_indptr[b];
      s.q_len = q_len;
      s.kv_len = w.kv_lens[b];
      s.tile_begin = int32_t(tiles);
      s.index = int32_t(b);
      tiles += uint32_t((uint64_t(q_len) * G + BM - 1) / BM);
      uint64_t range = uint64_t(s.kv_len);
      if (w.window != 0) range = std::min<uint64_t>(range, w.window + tile_tokens + BN);
      max_range = std::max(max_range, range);
      rows_end = s.q_start + q_len;
    }
    if (p.num_seqs == 0) break;
    p.num_tiles = tiles;
    p.q_base = p.seqs[0].q_start;
    const PrefillSplit split = plan_prefill_split(uint64_t(tiles) * kv.kv_heads, wave, max_range);
    p.num_splits = split.num_splits;
    p.split_tokens = split.split_tokens;
    const uint64_t rows = uint64_t(rows_end - p.q_base);
    if (split.num_splits > 1) {
      p.ws_o = static_cast<float*>(w.workspace);
      p.ws_ml = reinterpret_cast<float2*>(p.ws_o + rows * w.q_heads * split.num_splits * kv.head_dim);
    } else {
      p.ws_o = nullptr;
      p.ws_ml = nullptr;
    }
    const uint64_t blocks = uint64_t(tiles) * kv.kv_heads * split.num_splits;
    if (blocks > uint64_t(INT32_MAX))
      fail(KVC_ERR_UNSUPPORTED, "prefill attention: " + std::to_string(blocks) +
                                    " thread blocks in one launch exceed the grid limit");
    at.attend<<<dim3(uint32_t(blocks)), at.threads, at.smem_bytes, stream>>>(p);
    cuda_check(cudaGetLastError(), "prefill attention kernel launch");
    if (split.num_splits > 1) {
      cudaLaunchConfig_t cfg{};
      cfg.gridDim = dim3(uint32_t(rows), w.q_heads);
      cfg.blockDim = dim3(kv.head_dim);
      cfg.dynamicSmemBytes = 0;
      cfg.stream = stream;
      cudaLaunchAttribute attr{};
      attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
      attr.val.programmaticStreamSerializationAllowed = 1;
      cfg.attrs = &attr;
      cfg.numAttrs = 1;
      cuda_check(cudaLaunchKernelEx(&cfg, v.merge, p), "prefill attention merge kernel launch");
      cuda_check(cudaGetLastError(), "prefill attention merge kernel launch");
    }
  }
}

}  // namespace kvc
