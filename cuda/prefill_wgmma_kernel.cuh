// Paged prefill attention for Hopper (sm_90a): the work decomposition of
// prefill_kernel.cuh (a thread block owns a tile of 128 packed query rows
// of one kv head: row r is query token r / G, head kvh * G + r % G, and
// one split-KV piece of its causal range), with the math on wgmma:
//  - two warpgroups of 64 rows each; Q, K and V tiles are stored in
//    shared memory in wgmma's canonical 128-byte-swizzled layout: a tile
//    of R rows is [D / 64][R][128 bytes], 16-byte chunk c of row r at
//    chunk c ^ (r & 7), every 8-row atom 1024-byte aligned;
//  - S = Q K^T: wgmma m64n64k16, both operands K-major from shared memory
//    (descriptors, start address advanced 32 bytes per k-step);
//  - O += P V: wgmma m64nDk16 with P from registers (the S accumulators
//    repacked to 16 bits: the accumulator layout of two n8 columns is the
//    A fragment of one k-step) and V N-major (imm-trans-b), leading byte
//    offset = the next 64 dims, stride byte offset = the next 8 tokens;
//  - K/V tiles of 64 tokens are gathered through the block table with
//    cp.async by all threads, STAGES deep (2: two thread blocks per SM;
//    a warp-specialized version with a producer warpgroup and mbarriers,
//    in the history of this file, was no faster); a fence.proxy.async makes the
//    copies visible to the tensor cores before the barrier that publishes
//    them; the byte offsets of each tile's rows come from a ring in shared
//    memory filled STAGES tiles ahead (as in prefill_kernel.cuh);
//  - online softmax in the exp2 domain with the lazy rescale of
//    prefill_kernel.cuh (the reference moves only when a row's max grows by
//    more than 2^8), soft cap, causal and window masks, LSE; split pieces go
//    to the workspace for prefill_merge_kernel.
// Where tensor maps can address the pool (8 or more tokens per block), the
// TMA-fed, warp-specialized kernel of prefill_tma_kernel.cuh runs instead
// (1.4x faster on the H200); this one runs the rest and benchmark
// configuration 4.
// The body exists only in the sm_90a compilation (wgmma); prefill_wgmma.cu,
// compiled for sm_90a alone, includes this header.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "cuda/cuda_numeric.cuh"
#include "cuda/kernel_errors.h"
#include "cuda/prefill_params.h"
#include "cuda/prefill_plan.h"
#include "cuda/prefill_work_item.cuh"
#include "cuda/tensor_core_ptx.cuh"
#include "cuda/wgmma_ptx.cuh"

namespace kvc {

namespace {

constexpr int kWgBM = int(kPrefillTileRows);    // packed query rows: 2 warpgroups x 64
constexpr int kWgBN = int(kPrefillTileTokens);  // K/V tokens per tile
constexpr int kWgThreads = 256;
static_assert(kWgBM == 128 && kWgBN == 64, "the wgmma kernel's shapes are fixed");

template <int D, int STAGES> struct WgSmem {
  static constexpr int kTile = kWgBN * D * 2;  // one K or V stage
  static constexpr int kQ = 0;
  static constexpr int kK = kWgBM * D * 2;
  static constexpr int kV = kK + STAGES * kTile;
  static constexpr int kOffs = kV + STAGES * kTile;  // STAGES x BN int64 row offsets
  static constexpr int kBytes = kOffs + STAGES * kWgBN * 8 + 1024;  // + alignment slack
};

template <bool V>
__device__ __forceinline__ constexpr bool mask_on_wg(std::integral_constant<bool, V>) { return V; }

// Byte offset of 16-byte chunk c of row r in a [D / 64][ROWS][128 B] tile.
template <int ROWS>
__device__ __forceinline__ uint32_t sw128(int r, int c) {
  return uint32_t((c >> 3) * ROWS * 128 + r * 128 + (((c & 7) ^ (r & 7)) << 4));
}

template <class Q, int D, bool CAP, int STAGES>
__global__ void __launch_bounds__(kWgThreads, STAGES == 2 ? 2 : 1)
    prefill_wgmma_kernel(const __grid_constant__ PrefillParams p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using S = WgSmem<D, STAGES>;
  constexpr int BM = kWgBM, BN = kWgBN, THREADS = kWgThreads;
  constexpr int NO = D / 2;  // O accumulators per thread
  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw = smem_u32(smem_raw);
  const uint32_t s_base = (raw + 1023u) & ~1023u;  // swizzle atoms: 1024-byte aligned
  unsigned char* smem = smem_raw + (s_base - raw);
  const uint32_t s_q = s_base + S::kQ;
  const uint32_t s_k = s_base + S::kK;
  const uint32_t s_v = s_base + S::kV;

  const int tid = threadIdx.x;
  const int wg = tid >> 7;
  const int warp = (tid >> 5) & 3;
  const int lane = tid & 31;

  // The work item (prefill_work_item.cuh).
  const PrefillWorkItem w = prefill_work_item(p);

  // This thread's two rows (accumulator rows lane / 4 and + 8 of its warp).
  int pos_row[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int pr = w.r0 + wg * 64 + warp * 16 + (lane >> 2) + h * 8;
    pos_row[h] = w.prefix + min(pr, w.rows_valid - 1) / w.G;
  }
  const bool wg_active = w.r0 + wg * 64 < w.rows_valid;

  float o[NO];
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
#pragma unroll
  for (int i = 0; i < NO; ++i) o[i] = 0.0f;

  int64_t* offs = reinterpret_cast<int64_t*>(smem + S::kOffs);
  __shared__ const int32_t* ctx_table;
  __shared__ int32_t ctx_range[2];
  if (tid == 0) {
    ctx_table = w.table_row;
    ctx_range[0] = w.lo_s;
    ctx_range[1] = w.hi_s;
  }
  auto load_id = [&](int jt) -> int32_t {
    const int t = w.n_first + jt * BN + tid;
    if (tid >= BN || t < ctx_range[0] || t >= ctx_range[1]) return -1;
    return ctx_table[t >> p.block_shift];
  };
  auto store_offset = [&](int jt, int32_t id) {
    if (tid >= BN) return;
    const int t = w.n_first + jt * BN + tid;
    int64_t off = -1;
    if (t >= ctx_range[0] && t < ctx_range[1]) {
      if (id < 0 || uint32_t(id) >= p.num_blocks) {
        record_kernel_error(p.err, kPrefillBlockOutOfRange, p.layer, w.sq.index, id, p.num_blocks,
                            t >> p.block_shift);
      } else {
        off = int64_t(uint64_t(id) * p.block_stride +
                      uint64_t(t & ((1 << p.block_shift) - 1)) * p.token_stride +
                      uint64_t(w.kvh) * p.head_stride);
      }
    }
    offs[(jt % STAGES) * BN + tid] = off;
  };
  // Starts the copy of tile jt's K (or V) rows into a swizzled stage.
  auto issue_kv = [&](const unsigned char* src_base, int jt, uint32_t dst_tile) {
    const int64_t* slot = offs + (jt % STAGES) * BN;
    constexpr int CPR = D / 8;
    constexpr int PER = BN * CPR / THREADS;
    constexpr int ROWS_PER_PASS = THREADS / CPR;
    const int c = tid % CPR;
#pragma unroll
    for (int k = 0; k < PER; ++k) {
      const int r = tid / CPR + k * ROWS_PER_PASS;
      const int64_t off = slot[r];
      const unsigned char* src = off >= 0 ? src_base + off + c * 16 : src_base;
      cp_async16(dst_tile + sw128<BN>(r, c), src, off >= 0 ? 16u : 0u);
    }
  };

  if (w.n_tiles > 0) {
    {
      constexpr int CPR = D / 8;
      constexpr int PER = BM * CPR / THREADS;
      constexpr int ROWS_PER_PASS = THREADS / CPR;
      const int c = tid % CPR;
      const unsigned char* qbase = static_cast<const unsigned char*>(p.query);
#pragma unroll
      for (int k = 0; k < PER; ++k) {
        const int r = tid / CPR + k * ROWS_PER_PASS;
        const int pr = w.r0 + r;
        const bool ok = pr < w.rows_valid;
        const uint64_t qrow = uint64_t(w.sq.q_start + (ok ? pr / w.G : 0)) * p.q_heads +
                              w.kvh * uint32_t(w.G) + uint32_t(ok ? pr % w.G : 0);
        cp_async16(s_q + sw128<BM>(r, c), qbase + (qrow * D + c * 8) * 2, ok ? 16u : 0u);
      }
    }
    __syncthreads();  // the producer's context
#pragma unroll
    for (int t = 0; t < STAGES; ++t) store_offset(t, load_id(t));
    __syncthreads();
#pragma unroll
    for (int t = 0; t < STAGES - 1; ++t) {
      if (t < w.n_tiles) {
        issue_kv(p.k_base, t, s_k + uint32_t(t * S::kTile));
        issue_kv(p.v_base, t, s_v + uint32_t(t * S::kTile));
      }
      cp_async_commit();
    }
  }

  const uint32_t q_wg = s_q + uint32_t(wg * 64 * 128);
  auto step = [&](const int j, auto masked) {
    const int n0 = w.n_first + j * BN;
    const uint32_t stage = uint32_t(j % STAGES) * S::kTile;
    const uint32_t k_tile = s_k + stage;
    const uint32_t v_tile = s_v + stage;
    cp_async_wait<STAGES - 2>();  // this thread's copies of tile j have landed
    fence_proxy_async_smem();     // ... and are visible to wgmma
    __syncthreads();              // everyone's; every warpgroup is done with tile j-1
    {
      const int jn = j + STAGES - 1;
      if (jn < w.n_tiles) {
        const uint32_t next = uint32_t(jn % STAGES) * S::kTile;
        issue_kv(p.k_base, jn, s_k + next);
        issue_kv(p.v_base, jn, s_v + next);
      }
      cp_async_commit();
    }
    const int32_t next_id = load_id(j + STAGES);

    if (wg_active) {
      float s[BN / 2];
#pragma unroll
      for (int i = 0; i < BN / 2; ++i) s[i] = 0.0f;
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        const uint64_t da = smem_desc_sw128(q_wg + uint32_t((kk >> 2) * BM * 128 + (kk & 3) * 32), 16, 1024);
        const uint64_t db = smem_desc_sw128(k_tile + uint32_t((kk >> 2) * BN * 128 + (kk & 3) * 32), 16, 1024);
        Wgmma<Q, BN>::ss(s, da, db, 1);
      }
      wgmma_commit();
      wgmma_wait<0>();
      wgmma_fence_regs<BN / 2>(s);

      const float mult = CAP ? 1.0f : p.score_scale;
      if constexpr (CAP) {
#pragma unroll
        for (int i = 0; i < BN / 2; ++i) s[i] = p.cap_log2 * fast_tanh(s[i] * p.score_scale);
      }
      if (mask_on_wg(masked)) {
#pragma unroll
        for (int i = 0; i < BN / 2; ++i) {
          const int t = n0 + (i >> 2) * 8 + (lane & 3) * 2 + (i & 1);
          const int pr = pos_row[(i >> 1) & 1];
          if (t > pr || (w.window != 0 && t + w.window <= pr)) s[i] = -INFINITY;
        }
      }
      float corr[2];
      bool grew = false;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float mx = -INFINITY;
#pragma unroll
        for (int nt = 0; nt < BN / 8; ++nt) mx = fmaxf(mx, fmaxf(s[4 * nt + 2 * h], s[4 * nt + 2 * h + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        mx *= mult;
        const float old = m[h];
        const bool up = mx > old + 8.0f;
        const float ref = up ? mx : old;
        corr[h] = up ? fast_exp2(old - ref) : 1.0f;
        grew |= up;
        m[h] = ref;
        const float neg = ref == -INFINITY ? 0.0f : -ref;
        float sum = 0.0f;
#pragma unroll
        for (int nt = 0; nt < BN / 8; ++nt) {
          s[4 * nt + 2 * h] = fast_exp2(fmaf(s[4 * nt + 2 * h], mult, neg));
          s[4 * nt + 2 * h + 1] = fast_exp2(fmaf(s[4 * nt + 2 * h + 1], mult, neg));
          sum += s[4 * nt + 2 * h] + s[4 * nt + 2 * h + 1];
        }
        l[h] = l[h] * corr[h] + sum;
      }
      if (__any_sync(0xffffffffu, grew)) {
#pragma unroll
        for (int nt = 0; nt < D / 8; ++nt) {
          o[4 * nt + 0] *= corr[0];
          o[4 * nt + 1] *= corr[0];
          o[4 * nt + 2] *= corr[1];
          o[4 * nt + 3] *= corr[1];
        }
      }
      uint32_t pa[BN / 16][4];
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk) {
        pa[kk][0] = pack2<Q>(s[8 * kk + 0], s[8 * kk + 1]);
        pa[kk][1] = pack2<Q>(s[8 * kk + 2], s[8 * kk + 3]);
        pa[kk][2] = pack2<Q>(s[8 * kk + 4], s[8 * kk + 5]);
        pa[kk][3] = pack2<Q>(s[8 * kk + 6], s[8 * kk + 7]);
      }
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk) {
        const uint64_t db = smem_desc_sw128(v_tile + uint32_t(kk * 16 * 128), BN * 128, 1024);
        Wgmma<Q, D>::rs(o, pa[kk], db, 1);
      }
      wgmma_commit();
      wgmma_wait<0>();
      wgmma_fence_regs<NO>(o);
    }
    store_offset(j + STAGES, next_id);
  };
  auto needs_mask = [&](int j) {
    const int n0 = w.n_first + j * BN;
    return n0 + BN - 1 > w.pos_min || (w.window != 0 && n0 < w.pos_max + 1 - w.window);
  };
  int j = 0;
  for (; j < w.n_tiles && needs_mask(j); ++j) step(j, std::true_type{});
  for (; j < w.n_tiles && !needs_mask(j); ++j) step(j, std::false_type{});
  for (; j < w.n_tiles; ++j) step(j, std::true_type{});
  cp_async_wait<0>();

#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float sum = l[h];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const int pr = w.r0 + wg * 64 + warp * 16 + (lane >> 2) + h * 8;
    if (pr >= w.rows_valid) continue;
    const uint32_t qh = w.kvh * uint32_t(w.G) + uint32_t(pr % w.G);
    const uint64_t row = uint64_t(w.sq.q_start + pr / w.G);
    const int d0 = (lane & 3) * 2;
    if (p.num_splits == 1) {
      const float inv = sum > 0.0f ? p.v_scale / sum : 0.0f;
      uint32_t* dst = reinterpret_cast<uint32_t*>(static_cast<Q*>(p.out) + (row * p.q_heads + qh) * D);
#pragma unroll
      for (int nt = 0; nt < D / 8; ++nt)
        dst[(nt * 8 + d0) / 2] = pack2<Q>(o[4 * nt + 2 * h] * inv, o[4 * nt + 2 * h + 1] * inv);
      if (p.lse != nullptr && (lane & 3) == 0)
        p.lse[row * p.q_heads + qh] = sum > 0.0f ? (m[h] + log2f(sum)) * kLn2 : -INFINITY;
    } else {
      const uint64_t part = ((row - uint64_t(p.q_base)) * p.q_heads + qh) * p.num_splits + w.split;
      float2* dst = reinterpret_cast<float2*>(p.ws_o + part * D);
#pragma unroll
      for (int nt = 0; nt < D / 8; ++nt)
        dst[(nt * 8 + d0) / 2] = make_float2(o[4 * nt + 2 * h], o[4 * nt + 2 * h + 1]);
      if ((lane & 3) == 0) p.ws_ml[part] = make_float2(sum > 0.0f ? m[h] : -INFINITY, sum);
    }
  }
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#else
  __trap();  // built for sm_90a only
#endif
}

}  // namespace

}  // namespace kvc

