// Paged prefill attention for Hopper (sm_90a) with TMA-fed K/V and warp
// specialization: the work decomposition and the math of
// prefill_wgmma_kernel.cuh (a thread block owns 128 packed query rows of
// one kv head and one split-KV piece; S = Q K^T and O += P V on wgmma from
// 128-byte-swizzled shared memory; online softmax in the exp2 domain with
// the lazy rescale), with the K/V feed and the schedule of FlashAttention-3:
//  - three warpgroups: warpgroup 0 is the producer (setmaxnreg down to 40
//    registers), warpgroups 1 and 2 consume 64 rows each (up to 232);
//  - the producer's first warp walks the tiles STAGES ahead: lane i reads
//    the block id of box i of the tile from the table (a box = min(block
//    tokens, 64) tokens of one block, one kv head, 64 dims), checks it, and
//    issues its cp.async.bulk.tensor copies (K and V, D / 64 each) against
//    the tensor maps of prefill_tma_map.h; the TMA engine writes the rows
//    swizzled, an mbarrier (`full`) counts the bytes; the consumers free a
//    stage through a second mbarrier (`empty`, one arrival per active
//    consumer warpgroup);
//  - consumers overlap tile j's S = Q K_j with tile j-1's O += P V (FA3's
//    intra-warpgroup overlap): both are issued, S is waited for and its
//    softmax runs while P V is still on the tensor cores;
//  - rows of an edge tile outside the piece's token range (a partial last
//    block, tokens before a window or a split) hold whatever the pool or an
//    earlier stage held: their scores are masked, and the consumers zero
//    their V rows (0 * NaN would be NaN) before P V.
// The body exists only in the sm_90a compilation; prefill_wgmma.cu includes
// this header.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "cuda/prefill_wgmma_kernel.cuh"

namespace kvc {

namespace {

constexpr int kTmaThreads = 384;  // a producer and two consumer warpgroups
static_assert(kTmaBoxTokens == 64, "boxes of up to 64 tokens tile K/V tiles of 64 and 128");

template <int D, int STAGES, int BN = kWgBN> struct TmaSmem {
  static constexpr int kTile = BN * D * 2;  // one K or V stage
  static constexpr int kQ = 0;
  static constexpr int kK = kWgBM * D * 2;
  static constexpr int kV = kK + STAGES * kTile;
  static constexpr int kBar = kV + STAGES * kTile;  // full[STAGES], empty[STAGES]
  static constexpr int kBytes = kBar + 2 * STAGES * 8 + 1024;  // + alignment slack
};

__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t a, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(a), "r"(bytes) : "memory");
}
__device__ __forceinline__ void tma_load_4d(uint32_t dst, const void* map, int c0, int c1, int c2, int c3,
                                            uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4, %5}], [%6];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
      : "memory");
}
template <int N>
__device__ __forceinline__ void named_barrier_sync(int id) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "n"(N) : "memory");
}
__device__ __forceinline__ void named_barrier_arrive_256(int id) {
  asm volatile("bar.arrive %0, 256;\n" ::"r"(id) : "memory");
}
__device__ __forceinline__ void named_barrier_sync_n(int id, int n) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(n) : "memory");
}

template <class Q, int D, bool CAP, int STAGES, bool PP = false, int BN = kWgBN>
__global__ void __launch_bounds__(kTmaThreads, 1)
    prefill_tma_kernel(const __grid_constant__ PrefillParams p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using S = TmaSmem<D, STAGES, BN>;
  constexpr int BM = kWgBM;
  static_assert(BN == 64 || BN == 128, "K/V tiles of 64 or 128 tokens");
  constexpr int NO = D / 2;  // O accumulators per thread
  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw = smem_u32(smem_raw);
  const uint32_t s_base = (raw + 1023u) & ~1023u;  // swizzle atoms: 1024-byte aligned
  const uint32_t s_q = s_base + S::kQ;
  const uint32_t s_k = s_base + S::kK;
  const uint32_t s_v = s_base + S::kV;
  const uint32_t s_full = s_base + S::kBar;
  const uint32_t s_empty = s_full + STAGES * 8;
  unsigned char* smem = smem_raw + (s_base - raw);

  const int tid = threadIdx.x;
  const int wg = tid >> 7;  // 0: producer; 1, 2: consumers of rows 64 * (wg - 1)
  const int warp = (tid >> 5) & 3;
  const int lane = tid & 31;

  // The work item (prefill_work_item.cuh).
  const PrefillWorkItem w = prefill_work_item(p);
  const int n_active = w.r0 + 64 < w.rows_valid ? 2 : 1;  // consumer warpgroups with rows

  if (tid == 0) {
#pragma unroll
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(s_full + 8 * s, 1);
      mbar_init(s_empty + 8 * s, uint32_t(n_active));
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (wg == 0) {
    // The producer.
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
    if (warp == 0 && w.n_tiles > 0) {
      const int shift = int(p.block_shift);
      const int bt = min(1 << shift, kTmaBoxTokens);  // tokens per box (the map's)
      const int nb = BN / bt;              // boxes per tile
      const uint32_t box_bytes = uint32_t(bt * 64 * 2);
      for (int j = 0; j < w.n_tiles; ++j) {
        const int st = j % STAGES;
        if (j >= STAGES) mbar_wait(s_empty + 8 * st, uint32_t((j / STAGES - 1) & 1));
        const int tok = w.n_first + j * BN + lane * bt;
        const bool in_range = lane < nb && tok + bt > w.lo_s && tok < w.hi_s;
        int32_t id = in_range ? w.table_row[tok >> shift] : -1;
        const bool ok = in_range && id >= 0 && uint32_t(id) < p.num_blocks;
        if (in_range && !ok)
          record_kernel_error(p.err, kPrefillBlockOutOfRange, p.layer, w.sq.index, id, p.num_blocks,
                              tok >> shift);
        const uint32_t boxes = __popc(__ballot_sync(0xffffffffu, ok));
        if (lane == 0) mbar_arrive_expect_tx(s_full + 8 * st, boxes * box_bytes * uint32_t(2 * D / 64));
        __syncwarp();
        if (ok) {
          const uint32_t row = uint32_t(st * S::kTile + lane * bt * 128);
          const int tin = tok & ((1 << shift) - 1);
#pragma unroll
          for (int dh = 0; dh < D / 64; ++dh) {
            const uint32_t off = row + uint32_t(dh * BN * 128);
            tma_load_4d(s_k + off, p.tmap_k, dh * 64, int(w.kvh), tin, id, s_full + 8 * st);
            tma_load_4d(s_v + off, p.tmap_v, dh * 64, int(w.kvh), tin, id, s_full + 8 * st);
          }
        }
      }
    }
    return;
  }

  // The consumers.
  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
  const int cw = wg - 1;
  const int ctid = tid - 128;  // 0..255
  float o[NO];
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
#pragma unroll
  for (int i = 0; i < NO; ++i) o[i] = 0.0f;
  int pos_row[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int pr = w.r0 + cw * 64 + warp * 16 + (lane >> 2) + h * 8;
    pos_row[h] = w.prefix + min(pr, w.rows_valid - 1) / w.G;
  }

  if (w.n_tiles > 0) {
    {
      constexpr int CPR = D / 8;
      constexpr int PER = BM * CPR / 256;
      constexpr int ROWS_PER_PASS = 256 / CPR;
      const int c = ctid % CPR;
      const unsigned char* qbase = static_cast<const unsigned char*>(p.query);
#pragma unroll
      for (int k = 0; k < PER; ++k) {
        const int r = ctid / CPR + k * ROWS_PER_PASS;
        const int pr = w.r0 + r;
        const bool ok = pr < w.rows_valid;
        const uint64_t qrow = uint64_t(w.sq.q_start + (ok ? pr / w.G : 0)) * p.q_heads +
                              w.kvh * uint32_t(w.G) + uint32_t(ok ? pr % w.G : 0);
        cp_async16(s_q + sw128<BM>(r, c), qbase + (qrow * D + c * 8) * 2, ok ? 16u : 0u);
      }
      cp_async_commit();
      cp_async_wait<0>();
      fence_proxy_async_smem();
      named_barrier_sync<256>(1);
    }
  }
  const bool active = cw < n_active;
  if (active && w.n_tiles > 0) {
    const uint32_t q_wg = s_q + uint32_t(cw * 64 * 128);
    const float mult = CAP ? 1.0f : p.score_scale;
    auto needs_mask = [&](int j) {
      const int n0 = w.n_first + j * BN;
      return n0 < w.lo_s || n0 + BN > w.hi_s || n0 + BN - 1 > w.pos_min ||
             (w.window != 0 && n0 < w.pos_max + 1 - w.window);
    };
    // Waits for tile j; zeroes the V rows of an edge tile outside [lo_s, hi_s).
    auto acquire = [&](int j) {
      const int st = j % STAGES;
      mbar_wait(s_full + 8 * st, uint32_t((j / STAGES) & 1));
      const int n0 = w.n_first + j * BN;
      if (n0 < w.lo_s || n0 + BN > w.hi_s) {  // the same for every consumer thread
        const int nthreads = n_active * 128;
        for (int i = ctid; i < BN * (D / 8); i += nthreads) {
          const int r = i / (D / 8), c = i % (D / 8);
          const int t = n0 + r;
          if (t < w.lo_s || t >= w.hi_s) {
            unsigned char* dst = smem + S::kV + st * S::kTile + (c >> 3) * BN * 128 + r * 128 + (c & 7) * 16;
            *reinterpret_cast<uint4*>(dst) = make_uint4(0, 0, 0, 0);
          }
        }
        fence_proxy_async_smem();
        named_barrier_sync_n(2, nthreads);
      }
    };
    auto issue_s = [&](float* s, int j) {
      const uint32_t k_tile = s_k + uint32_t((j % STAGES) * S::kTile);
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
    };
    auto issue_pv = [&](const uint32_t (*pa)[4], int j) {
      const uint32_t v_tile = s_v + uint32_t((j % STAGES) * S::kTile);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk) {
        const uint64_t db = smem_desc_sw128(v_tile + uint32_t(kk * 16 * 128), BN * 128, 1024);
        Wgmma<Q, D>::rs(o, pa[kk], db, 1);
      }
      wgmma_commit();
    };
    auto release = [&](int j) {
      if (ctid % 128 == 0) mbar_arrive(s_empty + 8 * (j % STAGES));
    };
    // Softmax of tile j's scores in place (s becomes P in f32); corr: the
    // factors O must be multiplied by, grew: whether any row's moved.
    auto softmax = [&](float* s, int j, auto masked, float* corr) -> bool {
      const int n0 = w.n_first + j * BN;
      if constexpr (CAP) {
#pragma unroll
        for (int i = 0; i < BN / 2; ++i) s[i] = p.cap_log2 * fast_tanh(s[i] * p.score_scale);
      }
      if (mask_on_wg(masked)) {
#pragma unroll
        for (int i = 0; i < BN / 2; ++i) {
          const int t = n0 + (i >> 2) * 8 + (lane & 3) * 2 + (i & 1);
          const int pr = pos_row[(i >> 1) & 1];
          // Tokens outside the piece's range (a tile of 128 may start before a
          // split's first token) and the causal / window masks.
          if (t > pr || (w.window != 0 && t + w.window <= pr) || uint32_t(t - w.lo_s) >= uint32_t(w.hi_s - w.lo_s))
            s[i] = -INFINITY;
        }
      }
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
      return __any_sync(0xffffffffu, grew);
    };
    auto pack = [&](const float* s, uint32_t (*pa)[4]) {
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk) {
        pa[kk][0] = pack2<Q>(s[8 * kk + 0], s[8 * kk + 1]);
        pa[kk][1] = pack2<Q>(s[8 * kk + 2], s[8 * kk + 3]);
        pa[kk][2] = pack2<Q>(s[8 * kk + 4], s[8 * kk + 5]);
        pa[kk][3] = pack2<Q>(s[8 * kk + 6], s[8 * kk + 7]);
      }
    };
    auto rescale = [&](const float* corr) {
#pragma unroll
      for (int nt = 0; nt < D / 8; ++nt) {
        o[4 * nt + 0] *= corr[0];
        o[4 * nt + 1] *= corr[0];
        o[4 * nt + 2] *= corr[1];
        o[4 * nt + 3] *= corr[1];
      }
    };

    // Ping-pong (PP, both consumer warpgroups active): the warpgroups take
    // turns issuing their GEMMs (named barriers 3 and 4), so that one's
    // softmax runs while the other's GEMMs occupy the tensor cores. Each
    // issue point waits for its turn and hands the turn over; the second
    // warpgroup lets the first go at the start and skips its last hand-over.
    const bool pp = PP && n_active == 2;
    int issues_left = w.n_tiles + 1;
    auto turn_wait = [&] {
      if (pp) named_barrier_sync<256>(3 + cw);
    };
    auto turn_pass = [&] {
      --issues_left;
      if (pp && !(cw == 1 && issues_left == 0)) named_barrier_arrive_256(3 + (1 - cw));
    };
    if (pp && cw == 1) named_barrier_arrive_256(3);

    float s[BN / 2];
    uint32_t pa[BN / 16][4];
    float corr[2];
    acquire(0);
    turn_wait();
    issue_s(s, 0);
    turn_pass();
    wgmma_wait<0>();
    wgmma_fence_regs<BN / 2>(s);
    if (needs_mask(0)) softmax(s, 0, std::true_type{}, corr);
    else softmax(s, 0, std::false_type{}, corr);
    pack(s, pa);
    for (int j = 1; j < w.n_tiles; ++j) {
      acquire(j);
      turn_wait();
      issue_s(s, j);
      issue_pv(pa, j - 1);
      turn_pass();
      wgmma_wait<1>();  // S of tile j
      wgmma_fence_regs<BN / 2>(s);
      const bool grew = needs_mask(j) ? softmax(s, j, std::true_type{}, corr)
                                      : softmax(s, j, std::false_type{}, corr);
      wgmma_wait<0>();  // P V of tile j - 1
      wgmma_fence_regs<NO>(o);
      release(j - 1);
      if (grew) rescale(corr);
      pack(s, pa);
    }
    turn_wait();
    issue_pv(pa, w.n_tiles - 1);
    turn_pass();
    wgmma_wait<0>();
    wgmma_fence_regs<NO>(o);
    release(w.n_tiles - 1);
  }
  if (!active) return;

#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float sum = l[h];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const int pr = w.r0 + cw * 64 + warp * 16 + (lane >> 2) + h * 8;
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
