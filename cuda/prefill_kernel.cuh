// Paged prefill attention on the tensor cores, FlashAttention-2 style:
//  - a thread block owns a tile of 128 packed query rows: row r of sequence
//    b is (query token r / G, query head kvh * G + r % G) for the G query
//    heads of kv head kvh, so the heads of a GQA group share every K/V tile
//    (a decode row fills G rows); each warp owns 16 or 32 rows;
//  - K/V tiles of 64 tokens are gathered through the block table into
//    shared memory with cp.async (a row of head_dim is contiguous in both
//    layouts), K and V double-buffered: tile j+1 lands during all of tile
//    j's math, and one barrier per tile suffices. fp8 K/V is copied raw and
//    each thread converts the chunks it copied itself to f16/bf16 before
//    the barrier that publishes them, so the conversion needs no extra
//    barrier;
//  - S and O use mma.sync m16n8k16 (f32 accumulation) fed by ldmatrix from
//    XOR-swizzled tiles (16-byte chunk c of row r at c ^ (r & 7): the 8
//    rows of an 8x8 matrix hit 8 different bank groups);
//  - the byte offsets of a tile's K/V rows (block table lookups) are
//    loaded two tiles ahead into a 2-slot ring in shared memory, so no copy
//    waits on a table load;
//  - the online softmax runs in registers in the exp2 domain, the scale
//    folded into the exponent's FFMA; O is rescaled only when some row's
//    max grew by more than 2^8 (FA4's trick: exact; P stays <= 256);
//    P goes from the S accumulators straight into A fragments;
//  - tiles are scheduled heaviest first (the last query tiles of a
//    sequence see the most keys); when the tiles do not fill the GPU the
//    KV range is split (prefill_plan.h) and a merge kernel combines the
//    pieces from the workspace.
// Sequence lengths come from the host (kernel parameters), so the kernel
// reads no lengths from device memory; block ids and CSR rows are checked
// as they are read.
//
// This header holds the kernels; prefill_attention.cu, the only file that
// includes it, plans and launches them.
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

namespace kvc {

namespace {

constexpr int BM = int(kPrefillTileRows);
constexpr int BN = int(kPrefillTileTokens);
// Warps and 16-row MMA tiles per warp by head dim: 4 warps of 32 rows keep
// each K/V element read from shared memory once per 32 rows; head dim 256
// has 8 warps of 16 rows so the output accumulators fit in registers.
template <int D, int W, int SUB> struct Cfg {
  static constexpr int kWarps = W;
  static constexpr int MT = BM / 16 / kWarps;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kMinBlocks = D == 256 || W == 8 ? 1 : 2;
  // SUB: column pieces per K/V tile; S, softmax and P V run per piece, so
  // that fewer scores are live at once.
};
// The default warps per thread block by head dim.
template <int D> constexpr int kDefaultWarps = D == 256 ? 8 : 4;
static_assert((128 / (128 / 8)) % 8 == 0 && (128 / (64 / 8)) % 8 == 0 &&
                  (256 / (256 / 8)) % 8 == 0 && (128 / (128 / 16)) % 8 == 0,
              "copy passes must cover whole multiples of 8 rows (one swizzle pattern per thread)");

template <class Q, class KV, int D> struct Smem {
  static constexpr bool kFp8 = std::is_same_v<KV, fp8_t>;
  static constexpr int kTileBytes = BN * D * 2;
  static constexpr int kQ = 0;
  static constexpr int kK = BM * D * 2;              // two K stages
  static constexpr int kV = kK + 2 * kTileBytes;     // two V stages
  static constexpr int kOffs = kV + 2 * kTileBytes;  // 2 x BN int64 row offsets
  static constexpr int kStageK = kOffs + 2 * BN * 8; // fp8 only: raw K, then raw V
  static constexpr int kStageV = kStageK + BN * D;
  static constexpr int kBytes = kFp8 ? kStageV + BN * D : kStageK;
};

// ---------------------------------------------------------------------------
// The attention kernel

// Whether a tile's masks apply: a compile-time flag, or a bool known at
// run time.
template <bool V>
__device__ __forceinline__ constexpr bool mask_on(std::integral_constant<bool, V>) { return V; }
__device__ __forceinline__ bool mask_on(bool v) { return v; }

// SPLIT_LOOPS: the tiles that need masks run a masked copy of the tile
// code and the others a lean one (three loops); otherwise one loop tests
// the masks' need per tile.
template <class Q, class KV, int D, int W, int SUB, bool CAP, bool SPLIT_LOOPS>
__global__ void __launch_bounds__(Cfg<D, W, SUB>::kThreads, Cfg<D, W, SUB>::kMinBlocks)
    prefill_kernel(const __grid_constant__ PrefillParams p) {
  using C = Cfg<D, W, SUB>;
  using S = Smem<Q, KV, D>;
  constexpr int MT = C::MT, DT = D / 8, THREADS = C::kThreads;
  constexpr int BNS = BN / SUB, NTS = BNS / 8;
  constexpr bool kFp8 = S::kFp8;
  constexpr int RW = MT * 16;  // rows per warp
  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t s_base = smem_u32(smem);
  const uint32_t s_q = s_base + S::kQ;
  const uint32_t s_k = s_base + S::kK;
  const uint32_t s_v = s_base + S::kV;

  const int tid = threadIdx.x;
  const int warp = tid >> 5;
  const int lane = tid & 31;

  // The work item (prefill_work_item.cuh).
  const PrefillWorkItem w = prefill_work_item(p);

  // This thread's rows: per MMA tile mt and half (row lane/4 or +8).
  int pos_row[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int pr = w.r0 + warp * RW + mt * 16 + (lane >> 2) + h * 8;
      pos_row[mt][h] = w.prefix + min(pr, w.rows_valid - 1) / w.G;
    }
  const bool warp_active = w.r0 + warp * RW < w.rows_valid;

  // ldmatrix row addresses, swizzled (see swz): within a row the chunk of
  // k-step kk is the chunk of step 0 XOR (kk << 1), and the row's byte
  // offset has no bits in that range, so one register per operand serves
  // every step.
  uint32_t q_off[MT];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) q_off[mt] = swz<D>(warp * RW + mt * 16 + (lane & 15), lane >> 4);
  const uint32_t k_off = swz<D>(((lane >> 4) & 1) * 8 + (lane & 7), (lane >> 3) & 1);
  const uint32_t v_off = swz<D>(((lane >> 3) & 1) * 8 + (lane & 7), lane >> 4);

  float o[MT][DT][4];
  float m[MT][2], l[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      m[mt][h] = -INFINITY;
      l[mt][h] = 0.0f;
    }
#pragma unroll
    for (int nt = 0; nt < DT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[mt][nt][e] = 0.0f;
  }


  // The offsets ring: slot k holds, for row r of a tile, the byte offset
  // of its token's K (or V) row, or -1 when it is not read (outside the
  // range, or a bad block id).
  int64_t* offs = reinterpret_cast<int64_t*>(smem + S::kOffs);
  // What the producer of the ring needs, kept in shared memory rather than
  // in registers through the loop (written before the prologue's barrier).
  __shared__ const int32_t* ctx_table;
  __shared__ int32_t ctx_range[2];
  if (tid == 0) {
    ctx_table = w.table_row;
    ctx_range[0] = w.lo_s;
    ctx_range[1] = w.hi_s;
  }
  // Block id of row `tid` of tile jt (tid < BN), or -1 when not read.
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
    offs[(jt & 1) * BN + tid] = off;
  };

  // Starts the copy of the K or V tile of tokens [n0, n0 + BN).
  auto issue_kv = [&](const unsigned char* src_base, int jt, uint32_t dst_tile, uint32_t dst_stage) {
    const int64_t* slot = offs + (jt & 1) * BN;
    if constexpr (!kFp8) {
      constexpr int CPR = D / 8;  // 16-byte chunks per row
      constexpr int PER = BN * CPR / THREADS;
      constexpr int ROWS_PER_PASS = THREADS / CPR;
      const int c = tid % CPR;
#pragma unroll
      for (int k = 0; k < PER; ++k) {
        const int r = tid / CPR + k * ROWS_PER_PASS;
        const int64_t off = slot[r];
        const unsigned char* src = off >= 0 ? src_base + off + c * 16 : src_base;
        // ROWS_PER_PASS is a multiple of 8: row r's swizzle is row r0's.
        cp_async16(dst_tile + swz<D>(tid / CPR, c) + uint32_t(k * ROWS_PER_PASS * D * 2), src,
                   off >= 0 ? 16u : 0u);
      }
    } else {
      constexpr int CPR = D / 16;  // 16-byte chunks of fp8 per row
      constexpr int PER = BN * CPR / THREADS;
      constexpr int ROWS_PER_PASS = THREADS / CPR;
      const int c = tid % CPR;
#pragma unroll
      for (int k = 0; k < PER; ++k) {
        const int r = tid / CPR + k * ROWS_PER_PASS;
        const int64_t off = slot[r];
        const unsigned char* src = off >= 0 ? src_base + off + c * 16 : src_base;
        cp_async16(dst_stage + uint32_t((k * THREADS + tid) * 16), src, off >= 0 ? 16u : 0u);
      }
    }
  };
  // fp8: converts the chunks this thread copied into the 16-bit tile.
  auto convert = [&](uint32_t stage_off, uint32_t tile_off) {
    if constexpr (kFp8) {
      constexpr int CPR = D / 16;
      constexpr int PER = BN * CPR / THREADS;
      constexpr int ROWS_PER_PASS = THREADS / CPR;
      const int c = tid % CPR;
#pragma unroll
      for (int k = 0; k < PER; ++k) {
        const uint4 raw = *reinterpret_cast<const uint4*>(smem + stage_off + (k * THREADS + tid) * 16);
        uint4 two[2];
        fp8x16_to<Q>(raw, two);
        const uint32_t row = tile_off + swz<D>(tid / CPR, 0) + uint32_t(k * ROWS_PER_PASS * D * 2);
        *reinterpret_cast<uint4*>(smem + (row ^ uint32_t((2 * c) << 4))) = two[0];
        *reinterpret_cast<uint4*>(smem + (row ^ uint32_t((2 * c + 1) << 4))) = two[1];
      }
    }
  };

  if (w.n_tiles > 0) {
    // Q: row r of the tile is packed row r0 + r; rows past the sequence are zeros.
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
        cp_async16(s_q + swz<D>(r, c), qbase + (qrow * D + c * 8) * 2, ok ? 16u : 0u);
      }
    }
    __syncthreads();  // the producer's context
    store_offset(0, load_id(0));
    store_offset(1, load_id(1));
    __syncthreads();
    issue_kv(p.k_base, 0, s_k, S::kStageK + s_base);
    issue_kv(p.v_base, 0, s_v, S::kStageV + s_base);
    cp_async_commit();
  }

  // One K/V tile. `masked` (a compile-time flag) applies the causal and
  // window masks: tiles needing them come first (the window's edge) and
  // last (the diagonal), so the loops below run the lean version between.
  auto step = [&](const int j, auto masked) {
    const int n0 = w.n_first + j * BN;
    const uint32_t stage = uint32_t(j & 1) * S::kTileBytes;
    const uint32_t k_tile = s_k + stage;
    const uint32_t v_tile = s_v + stage;
    cp_async_wait<0>();  // this thread's copies of K(j) and V(j) have landed
    convert(S::kStageK, S::kK + stage);
    convert(S::kStageV, S::kV + stage);
    __syncthreads();  // K(j), V(j) visible; every warp is done with tile j-1's stages
    if (j + 1 < w.n_tiles) {
      const uint32_t next = uint32_t((j + 1) & 1) * S::kTileBytes;
      issue_kv(p.k_base, j + 1, s_k + next, S::kStageK + s_base);
      issue_kv(p.v_base, j + 1, s_v + next, S::kStageV + s_base);
    }
    cp_async_commit();
    // Tile j+2's block ids: loaded now, stored into the ring at the end of
    // this tile, once the math has hidden the load.
    const int32_t next_id = load_id(j + 2);

    if (warp_active) {
      const float mult = CAP ? 1.0f : p.score_scale;  // > 0
      // The tile's columns in SUB pieces: S, softmax, P V per piece, so that
      // fewer scores are live at once.
#pragma unroll
      for (int hf = 0; hf < SUB; ++hf) {
        const int c0 = n0 + hf * BNS;
        // S = Q K^T over columns [c0, c0 + BNS)
        float s[MT][NTS][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int nt = 0; nt < NTS; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) s[mt][nt][e] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
          uint32_t a[MT][4];
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) ldmatrix_x4(a[mt], s_q + (q_off[mt] ^ uint32_t(kk << 5)));
#pragma unroll
          for (int pp = 0; pp < BNS / 16; ++pp) {
            uint32_t b[4];
            ldmatrix_x4(b, k_tile + uint32_t((hf * BNS + 16 * pp) * D * 2) + (k_off ^ uint32_t(kk << 5)));
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
              mma16816<Q>(s[mt][2 * pp], a[mt], b[0], b[1]);
              mma16816<Q>(s[mt][2 * pp + 1], a[mt], b[2], b[3]);
            }
          }
        }

        // Soft cap (scores then in the exp2 domain already); mask; online
        // softmax with the scale folded into the exponent.
        float corr[MT][2];
        bool grew = false;
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          if constexpr (CAP) {
#pragma unroll
            for (int nt = 0; nt < NTS; ++nt)
#pragma unroll
              for (int e = 0; e < 4; ++e)
                s[mt][nt][e] = p.cap_log2 * fast_tanh(s[mt][nt][e] * p.score_scale);
          }
          if (mask_on(masked)) {
#pragma unroll
            for (int nt = 0; nt < NTS; ++nt)
#pragma unroll
              for (int e = 0; e < 4; ++e) {
                const int t = c0 + nt * 8 + (lane & 3) * 2 + (e & 1);
                const int pr = pos_row[mt][e >> 1];
                if (t > pr || (w.window != 0 && t + w.window <= pr)) s[mt][nt][e] = -INFINITY;
              }
          }
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            float mx = -INFINITY;
#pragma unroll
            for (int nt = 0; nt < NTS; ++nt) mx = fmaxf(mx, fmaxf(s[mt][nt][2 * h], s[mt][nt][2 * h + 1]));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            mx *= mult;  // the piece's max in the exp2 domain (-inf when all masked)
            // Move the row's reference only when the max grew by more than
            // 2^8: below that, exp2(s - ref) <= 256 is exact enough in f32
            // and bf16, and O needs no rescale.
            const float old = m[mt][h];
            const bool up = mx > old + 8.0f;
            const float ref = up ? mx : old;
            corr[mt][h] = up ? fast_exp2(old - ref) : 1.0f;  // old = -inf: 0
            grew |= up;
            m[mt][h] = ref;
            const float neg = ref == -INFINITY ? 0.0f : -ref;  // nothing attended yet: no NaN
            float sum = 0.0f;
#pragma unroll
            for (int nt = 0; nt < NTS; ++nt) {
              s[mt][nt][2 * h] = fast_exp2(fmaf(s[mt][nt][2 * h], mult, neg));
              s[mt][nt][2 * h + 1] = fast_exp2(fmaf(s[mt][nt][2 * h + 1], mult, neg));
              sum += s[mt][nt][2 * h] + s[mt][nt][2 * h + 1];
            }
            l[mt][h] = l[mt][h] * corr[mt][h] + sum;  // this thread's columns; summed over the quad at the end
          }
        }
        if (__any_sync(0xffffffffu, grew)) {
#pragma unroll
          for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int nt = 0; nt < DT; ++nt) {
              o[mt][nt][0] *= corr[mt][0];
              o[mt][nt][1] *= corr[mt][0];
              o[mt][nt][2] *= corr[mt][1];
              o[mt][nt][3] *= corr[mt][1];
            }
        }
        // P as A fragments: the accumulator layout of two n-tiles is the
        // A layout of one k-step.
        uint32_t pa[MT][BNS / 16][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int kk = 0; kk < BNS / 16; ++kk) {
            pa[mt][kk][0] = pack2<Q>(s[mt][2 * kk][0], s[mt][2 * kk][1]);
            pa[mt][kk][1] = pack2<Q>(s[mt][2 * kk][2], s[mt][2 * kk][3]);
            pa[mt][kk][2] = pack2<Q>(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
            pa[mt][kk][3] = pack2<Q>(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
          }
        // O += P V over the piece's tokens
#pragma unroll
        for (int kk = 0; kk < BNS / 16; ++kk) {
#pragma unroll
          for (int pp = 0; pp < D / 16; ++pp) {
            uint32_t b[4];
            ldmatrix_x4_trans(b, v_tile + uint32_t((hf * BNS + 16 * kk) * D * 2) + (v_off ^ uint32_t(pp << 5)));
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
              mma16816<Q>(o[mt][2 * pp], pa[mt][kk], b[0], b[1]);
              mma16816<Q>(o[mt][2 * pp + 1], pa[mt][kk], b[2], b[3]);
            }
          }
        }
      }
    }
    // Slot j % 2 was last read when tile j's copies were issued, before
    // this tile's barrier; tile j+2's copies read it after the next one.
    store_offset(j + 2, next_id);
  };
  auto needs_mask = [&](int j) {
    const int n0 = w.n_first + j * BN;
    return n0 + BN - 1 > w.pos_min || (w.window != 0 && n0 < w.pos_max + 1 - w.window);
  };
  if constexpr (SPLIT_LOOPS) {
    int j = 0;
    for (; j < w.n_tiles && needs_mask(j); ++j) step(j, std::true_type{});
    for (; j < w.n_tiles && !needs_mask(j); ++j) step(j, std::false_type{});
    for (; j < w.n_tiles; ++j) step(j, std::true_type{});
  } else {
    for (int j = 0; j < w.n_tiles; ++j) step(j, needs_mask(j));
  }
  cp_async_wait<0>();

  // Epilogue: the quad's partial sums, then the output (or this piece's
  // partial row for the merge).
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float sum = l[mt][h];
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      const int pr = w.r0 + warp * RW + mt * 16 + (lane >> 2) + h * 8;
      if (pr >= w.rows_valid) continue;
      const uint32_t qh = w.kvh * uint32_t(w.G) + uint32_t(pr % w.G);
      const uint64_t row = uint64_t(w.sq.q_start + pr / w.G);
      const int d0 = (lane & 3) * 2;
      if (p.num_splits == 1) {
        const float inv = sum > 0.0f ? p.v_scale / sum : 0.0f;
        uint32_t* dst = reinterpret_cast<uint32_t*>(static_cast<Q*>(p.out) + (row * p.q_heads + qh) * D);
#pragma unroll
        for (int nt = 0; nt < DT; ++nt)
          dst[(nt * 8 + d0) / 2] = pack2<Q>(o[mt][nt][2 * h] * inv, o[mt][nt][2 * h + 1] * inv);
        if (p.lse != nullptr && (lane & 3) == 0)
          p.lse[row * p.q_heads + qh] = sum > 0.0f ? (m[mt][h] + log2f(sum)) * kLn2 : -INFINITY;
      } else {
        const uint64_t part = ((row - uint64_t(p.q_base)) * p.q_heads + qh) * p.num_splits + w.split;
        float2* dst = reinterpret_cast<float2*>(p.ws_o + part * D);
#pragma unroll
        for (int nt = 0; nt < DT; ++nt)
          dst[(nt * 8 + d0) / 2] = make_float2(o[mt][nt][2 * h], o[mt][nt][2 * h + 1]);
        if ((lane & 3) == 0) p.ws_ml[part] = make_float2(sum > 0.0f ? m[mt][h] : -INFINITY, sum);
      }
    }
  // The merge kernel may start launching now; it waits for this grid.
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

// Combines the pieces of each (query row, head): weights exp2(m - M).
template <class Q, int D>
__global__ void __launch_bounds__(D) prefill_merge_kernel(const __grid_constant__ PrefillParams p) {
  const uint32_t h = blockIdx.y;
  const uint64_t local = blockIdx.x;
  const uint64_t part0 = (local * p.q_heads + h) * p.num_splits;
  asm volatile("griddepcontrol.wait;" ::: "memory");
  float mx = -INFINITY;
  for (uint32_t s = 0; s < p.num_splits; ++s) {
    const float2 v = p.ws_ml[part0 + s];
    if (v.y > 0.0f) mx = fmaxf(mx, v.x);
  }
  float sum = 0.0f, val = 0.0f;
  for (uint32_t s = 0; s < p.num_splits; ++s) {
    const float2 v = p.ws_ml[part0 + s];
    if (v.y > 0.0f) {
      const float w = fast_exp2(v.x - mx);
      sum += v.y * w;
      val += p.ws_o[(part0 + s) * D + threadIdx.x] * w;
    }
  }
  const uint64_t row = uint64_t(p.q_base) + local;
  static_cast<Q*>(p.out)[(row * p.q_heads + h) * D + threadIdx.x] =
      from_f32<Q>(sum > 0.0f ? val * p.v_scale / sum : 0.0f);
  if (p.lse != nullptr && threadIdx.x == 0)
    p.lse[row * p.q_heads + h] = sum > 0.0f ? (mx + log2f(sum)) * kLn2 : -INFINITY;
}

}  // namespace

}  // namespace kvc
