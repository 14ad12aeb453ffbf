// Paged decode attention on the tensor cores, for GQA groups: the query
// heads of one kv head are the rows of an m16n8k16 tile (padded to 16 with
// zero rows), so each K/V element is read from memory once per kv head and
// used by every head of the group through the mma, instead of once per
// CUDA-core FMA per head:
//  - a thread block owns one (sequence, kv head, chunk of <= 16 query heads)
//    and a range of tokens (split-KV, decode_split.h, as the CUDA-core
//    kernel);
//  - each of its kTcWarps warps streams its own 16-token K/V tiles (tile j
//    of the range goes to warp j % kTcWarps) through a private ring of
//    STAGES shared-memory stages filled with cp.async; a warp waits only
//    for its own copies (wait_group, then __syncwarp), so the block has no
//    barrier until the end;
//  - the 16 lanes of a tile look up one token's block each; the byte
//    offsets travel to the copying lanes by shuffles. Tokens outside the
//    range or with a bad block id are zero-filled (not read) and masked;
//  - S = Q K^T and O += P V with mma.sync (f32 accumulators); 16-bit K/V
//    fed by ldmatrix from XOR-swizzled tiles (prefill_kernel.cuh's layout),
//    fp8 K/V by each lane reading its operands' bytes from the raw tile
//    and converting them in registers (permuted head dims for S, permuted
//    output dims for O: see the loop); three blocks per SM for fp8; the
//    online softmax runs in registers in the exp2 domain, O rescaled only
//    when a row's max grew by more than 2^8 (exact);
//  - the warps' partial (max, sum, O) are merged through shared memory,
//    then written as the output, or as the split's partial row for the
//    merge kernel (the CUDA-core kernel's workspace layout).
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

constexpr int kTcWarps = 4;
constexpr int kTcThreads = kTcWarps * 32;
constexpr int kTcTile = 16;  // tokens per warp step

// KV: the cache's element type; 16-bit K/V lands in the stages in the mma
// layout (read by ldmatrix), fp8 K/V lands raw, kRawBytes per K or V tile,
// rows of D bytes with XOR-swizzled 16-byte chunks (fp8_k_chunk /
// fp8_v_chunk), and each lane converts the bytes it reads straight into
// its mma operand registers (no converted tile in shared memory).
template <class KV, int D, int STAGES>
struct TcTiling {
  static constexpr bool kFp8 = std::is_same_v<KV, fp8_t>;
  static constexpr int kTileBytes = kTcTile * D * 2;  // K or V of one step, 16-bit
  static constexpr int kRawBytes = kTcTile * D * int(sizeof(KV));
  static constexpr int kStageBytes = 2 * kRawBytes;
  static constexpr int kWarpBytes = STAGES * kStageBytes;
  static constexpr int kPipeBytes = kTcWarps * kWarpBytes;
  static constexpr int kRowStride = D + 8;  // merge rows (floats), padded against bank conflicts
  static constexpr int kMergeBytes = kTcWarps * 16 * (kRowStride + 2) * 4;
  static constexpr int kSmemBytes = kPipeBytes > kMergeBytes ? kPipeBytes : kMergeBytes;
  static constexpr int kBlockTokens = kTcWarps * kTcTile;  // tokens a block takes per round
};

__device__ __forceinline__ uint32_t load_u32(const void* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}

// fp8 K/V tiles in shared memory: row r (token r of the tile, D bytes),
// 16-byte chunk c stored at chunk c ^ f(r). The swizzles make the reads of
// the mma fragments below free of bank conflicts (head dim 128; 64 has
// two-way conflicts on V): a K read takes chunks of rows g and g + 8, a V
// read chunk g of rows 2 q4 (+1, +8, +9).
template <int D>
__device__ __forceinline__ uint32_t fp8_k_chunk(int r, int c) {
  return uint32_t(r * D + ((c ^ (r & 1)) << 4));
}
template <int D>
__device__ __forceinline__ uint32_t fp8_v_chunk(int r, int c) {
  const int f = D == 128 ? ((r >> 1) & 3) << 1 : (r >> 1) & 3;
  return uint32_t(r * D + ((c ^ f) << 4));
}

// e4m3 -> f16 pairs for the mma operands: cvt.rn.f16x2.e4m3x2 (exact, NaN
// kept). Measured on an H200 (bench/results/2026-11-28-kernels-h200-r2.md):
// FlashInfer's bit-move dequant (sign to bit 15, the other seven bits to
// bits 7..13, 2^8 folded into the scales) made the kernel 20-25% slower:
// three integer instructions per pair cost more issue slots than one cvt.
// The e4m3 pair in 16-bit half H of x (low byte -> low half).
template <int H>
__device__ __forceinline__ uint32_t e4m3x2_f16x2(uint32_t x) {
  uint32_t r;
  if constexpr (H == 0)
    asm("{\n .reg .b16 lo, hi;\n mov.b32 {lo, hi}, %1;\n cvt.rn.f16x2.e4m3x2 %0, lo;\n}\n"
        : "=r"(r) : "r"(x));
  else
    asm("{\n .reg .b16 lo, hi;\n mov.b32 {lo, hi}, %1;\n cvt.rn.f16x2.e4m3x2 %0, hi;\n}\n"
        : "=r"(r) : "r"(x));
  return r;
}
// Byte J of a and byte J of b (a -> low half) as an f16 pair.
template <int J>
__device__ __forceinline__ uint32_t e4m3_pair_f16x2(uint32_t a, uint32_t b) {
  return e4m3x2_f16x2<J % 2>(__byte_perm(a, b, J < 2 ? 0x5140u : 0x7362u));
}

template <class KV, class Q, int D, int STAGES, int MINB>
__global__ void __launch_bounds__(kTcThreads, MINB) decode_tc_kernel(const __grid_constant__ DecodeParams p) {
  using Tl = TcTiling<KV, D, STAGES>;
  constexpr bool kFp8 = Tl::kFp8;
  using M = std::conditional_t<kFp8, f16_t, Q>;  // the mma's operand type
  static_assert(STAGES <= 32, "valid_bits holds one bit per stage");
  constexpr int KS = D / 16;  // k-steps of S = Q K^T
  constexpr int DT = D / 8;   // n-tiles of O
  extern __shared__ __align__(128) unsigned char tc_smem[];
  // The merge kernel (a programmatic dependent launch) may be scheduled as
  // soon as every block of this grid has started: its blocks take SM room
  // as ours retire and wait (griddepcontrol.wait) for this grid's
  // completion and memory, so its launch and start-up overlap our tail.
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");

  const int warp = int(threadIdx.x >> 5);
  const int lane = int(threadIdx.x & 31);
  const int g = lane >> 2;  // fragment row (and row + 8)
  const int q4 = lane & 3;  // fragment column pair
  const uint32_t b = blockIdx.z;
  const uint32_t kvh = blockIdx.y / p.head_chunks;
  const uint32_t chunk = blockIdx.y - kvh * p.head_chunks;
  const uint32_t split = blockIdx.x;
  const int rows = int(p.group / p.head_chunks);  // query heads of this block, <= 16
  const uint32_t h0 = kvh * p.group + chunk * uint32_t(rows);

  const SeqRange seq = sequence_range(p, b, threadIdx.x == 0 && split == 0 && blockIdx.y == 0);
  const uint32_t t0 = seq.start + split * p.split_tokens;
  const uint32_t t1 = min(seq.len, t0 + p.split_tokens);
  if (t0 >= t1) {
    // As the CUDA-core kernel: zeros with one split, else the merge skips it.
    if (p.num_splits == 1) {
      for (int i = int(threadIdx.x); i < rows * D; i += kTcThreads)
        static_cast<Q*>(p.out)[(uint64_t(b) * p.q_heads + h0) * D + i] = from_f32<Q>(0.0f);
    }
    return;
  }

  // This warp's tiles: j = warp + kTcWarps * i of the range's tiles.
  const uint32_t n_tiles = (t1 - t0 + kTcTile - 1) / kTcTile;
  const uint32_t my_tiles =
      n_tiles > uint32_t(warp) ? (n_tiles - uint32_t(warp) + kTcWarps - 1) / kTcWarps : 0;
  const uint32_t s_warp = smem_u32(tc_smem) + uint32_t(warp * Tl::kWarpBytes);
  const uint64_t head_off = uint64_t(kvh) * p.head_stride;
  // Bit `stage` of lane l < 16: token l of that stage was loaded (a ballot
  // over lanes 0..15 gives a stage's mask).
  uint32_t valid_bits = 0;

  // Starts the copies of this warp's tile i into stage i % STAGES.
  auto issue = [&](uint32_t i) {
    const uint32_t stage = i % STAGES;
    const uint32_t t = t0 + (uint32_t(warp) + kTcWarps * i) * kTcTile + uint32_t(lane & 15);
    int64_t off = -1;
    if (t < t1) {
      const int32_t id = seq.row[t >> p.block_shift];
      if (id < 0 || uint32_t(id) >= p.num_blocks) {
        if (lane < 16)
          record_kernel_error(p.err, kBlockOutOfRange, p.layer, b, id, p.num_blocks, t >> p.block_shift);
      } else {
        off = int64_t(uint64_t(id) * p.block_stride + uint64_t(t & p.token_mask) * p.token_stride +
                      head_off);
      }
    }
    valid_bits = off >= 0 ? (valid_bits | (1u << stage)) : (valid_bits & ~(1u << stage));
    const uint32_t k_dst = s_warp + stage * uint32_t(Tl::kStageBytes);
    const uint32_t v_dst = k_dst + uint32_t(Tl::kRawBytes);
    if constexpr (!kFp8) {
      constexpr int CPR = D / 8;     // 16-byte chunks per row
      constexpr int RPP = 32 / CPR;  // rows per pass of the warp
      const int c = lane % CPR;
#pragma unroll
      for (int k = 0; k < kTcTile / RPP; ++k) {
        const int r = lane / CPR + k * RPP;
        const int64_t o = __shfl_sync(0xffffffffu, off, r);
        const uint32_t bytes = o >= 0 ? 16u : 0u;
        const int64_t src = o >= 0 ? o + c * 16 : 0;
        cp_async16(k_dst + swz<D>(r, c), p.k_base + src, bytes);
        cp_async16(v_dst + swz<D>(r, c), p.v_base + src, bytes);
      }
    } else {
      // Raw rows of D bytes, swizzled chunks (fp8_k_chunk, fp8_v_chunk).
      constexpr int CPR = D / 16;
      constexpr int RPP = 32 / CPR;
      const int c = lane % CPR;
#pragma unroll
      for (int k = 0; k < kTcTile / RPP; ++k) {
        const int r = lane / CPR + k * RPP;
        const int64_t o = __shfl_sync(0xffffffffu, off, r);
        const uint32_t bytes = o >= 0 ? 16u : 0u;
        const int64_t src = o >= 0 ? o + c * 16 : 0;
        cp_async16(k_dst + fp8_k_chunk<D>(r, c), p.k_base + src, bytes);
        cp_async16(v_dst + fp8_v_chunk<D>(r, c), p.v_base + src, bytes);
      }
    }
  };
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (uint32_t(s) < my_tiles) issue(uint32_t(s));
    cp_async_commit();
  }

  // Q as A fragments (rows g and g + 8; zero rows past the block's heads).
  // fp8 K/V: the mma runs in f16 (fp8 converts to f16 exactly); a bf16
  // query is scaled by a power of two that brings the block's largest |q|
  // under 2^14 first (exact; folded into the score scale), so it cannot
  // overflow f16. The head dims of S = Q K^T are permuted for fp8 (the sum
  // does not care): k-step kk's columns 2 q4 + {0, 1} and 2 q4 + {8, 9} are
  // dims (D / 4) q4 + 4 kk + {0, 1} and + {2, 3}, so a lane's K operands of
  // one token are D / 4 consecutive bytes.
  uint32_t qa[KS][4];
  float mult = p.q_scale;
  {
    const Q* q0 = static_cast<const Q*>(p.query) + (uint64_t(b) * p.q_heads + h0) * D;
    const bool lo = g < rows, hi = g + 8 < rows;
#pragma unroll
    for (int kk = 0; kk < KS; ++kk) {
      const int col = kFp8 ? (D / 4) * q4 + 4 * kk : kk * 16 + 2 * q4;
      const int col2 = kFp8 ? col + 2 : col + 8;
      qa[kk][0] = lo ? load_u32(q0 + g * D + col) : 0u;
      qa[kk][1] = hi ? load_u32(q0 + (g + 8) * D + col) : 0u;
      qa[kk][2] = lo ? load_u32(q0 + g * D + col2) : 0u;
      qa[kk][3] = hi ? load_u32(q0 + (g + 8) * D + col2) : 0u;
    }
    if constexpr (kFp8 && std::is_same_v<Q, bf16_t>) {
      float amax = 0.0f;
#pragma unroll
      for (int kk = 0; kk < KS; ++kk)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          amax = fmaxf(amax, fabsf(__uint_as_float(qa[kk][e] << 16)));
          amax = fmaxf(amax, fabsf(__uint_as_float(qa[kk][e] & 0xffff0000u)));
        }
#pragma unroll
      for (int off = 16; off >= 1; off /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
      // 2^-shift * amax < 2^14 (amax may be inf or NaN: no shift, the f16
      // conversion then carries it, as the reference would).
      int shift = 0;
      if (amax >= 16384.0f && amax <= 3.0e38f) shift = ilogbf(amax) - 13;
      const float down = exp2f(float(-shift));
      mult *= exp2f(float(shift));
#pragma unroll
      for (int kk = 0; kk < KS; ++kk)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          qa[kk][e] = pack2<f16_t>(__uint_as_float(qa[kk][e] << 16) * down,
                                   __uint_as_float(qa[kk][e] & 0xffff0000u) * down);
    }
  }

  float o[DT][4];
#pragma unroll
  for (int nt = 0; nt < DT; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[nt][e] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  const uint32_t k_off = swz<D>(((lane >> 4) & 1) * 8 + (lane & 7), (lane >> 3) & 1);
  const uint32_t v_off = swz<D>(((lane >> 3) & 1) * 8 + (lane & 7), lane >> 4);

  for (uint32_t i = 0; i < my_tiles; ++i) {
    // Refill the stage read in step i - 1 (the warp left it at a __syncwarp).
    const uint32_t ahead = i + STAGES - 1;
    if (ahead < my_tiles) issue(ahead);
    cp_async_commit();
    cp_async_wait<STAGES - 1>();  // this lane's copies of step i have landed
    __syncwarp();                 // and every lane's
    const uint32_t stage = i % STAGES;
    const uint32_t k_tile = s_warp + stage * uint32_t(Tl::kStageBytes);
    const uint32_t v_tile = k_tile + uint32_t(Tl::kRawBytes);
    const uint32_t vmask = __ballot_sync(0xffffffffu, (valid_bits >> stage) & 1u);
    // fp8: this stage's raw K and V as bytes (generic pointers).
    const unsigned char* k_raw = tc_smem + (k_tile - smem_u32(tc_smem));
    const unsigned char* v_raw = k_raw + Tl::kRawBytes;

    float s[2][4];
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[nt][e] = 0.0f;
    if constexpr (!kFp8) {
#pragma unroll
      for (int kk = 0; kk < KS; ++kk) {
        uint32_t kb[4];
        ldmatrix_x4(kb, k_tile + (k_off ^ uint32_t(kk << 5)));
        mma16816<M>(s[0], qa[kk], kb[0], kb[1]);
        mma16816<M>(s[1], qa[kk], kb[2], kb[3]);
      }
    } else {
      // B of n-tile nt: token g + 8 nt, its bytes (D / 4) q4 .. + D / 4 - 1
      // (word kk: the dims of k-step kk, see the query above).
      uint32_t kw[2][KS];
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        const int r = g + 8 * nt;
#pragma unroll
        for (int c = 0; c < D / 64; ++c) {
          const uint4 x = *reinterpret_cast<const uint4*>(k_raw + fp8_k_chunk<D>(r, (D / 64) * q4 + c));
          kw[nt][4 * c] = x.x;
          kw[nt][4 * c + 1] = x.y;
          kw[nt][4 * c + 2] = x.z;
          kw[nt][4 * c + 3] = x.w;
        }
      }
#pragma unroll
      for (int kk = 0; kk < KS; ++kk)
#pragma unroll
        for (int nt = 0; nt < 2; ++nt)
          mma16816<M>(s[nt], qa[kk], e4m3x2_f16x2<0>(kw[nt][kk]), e4m3x2_f16x2<1>(kw[nt][kk]));
    }

    // Scale (any sign), mask, online softmax per row half h (row g + 8h).
    float corr[2];
    bool grew = false;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float mx = -INFINITY;
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int col = nt * 8 + 2 * q4 + e;
          float& x = s[nt][2 * h + e];
          x = ((vmask >> col) & 1u) ? x * mult : -INFINITY;
          mx = fmaxf(mx, x);
        }
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float old = m[h];
      const bool up = mx > old + 8.0f;
      const float ref = up ? mx : old;
      corr[h] = up ? fast_exp2(old - ref) : 1.0f;  // old = -inf: 0
      grew |= up;
      m[h] = ref;
      const float neg = ref == -INFINITY ? 0.0f : -ref;
      float sum = 0.0f;
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float& x = s[nt][2 * h + e];
          x = fast_exp2(x + neg);
          sum += x;
        }
      l[h] = l[h] * corr[h] + sum;
    }
    if (__any_sync(0xffffffffu, grew)) {
#pragma unroll
      for (int nt = 0; nt < DT; ++nt) {
        o[nt][0] *= corr[0];
        o[nt][1] *= corr[0];
        o[nt][2] *= corr[1];
        o[nt][3] *= corr[1];
      }
    }
    uint32_t pa[4];
    pa[0] = pack2<M>(s[0][0], s[0][1]);
    pa[1] = pack2<M>(s[0][2], s[0][3]);
    pa[2] = pack2<M>(s[1][0], s[1][1]);
    pa[3] = pack2<M>(s[1][2], s[1][3]);
    if constexpr (!kFp8) {
#pragma unroll
      for (int pp = 0; pp < D / 16; ++pp) {
        uint32_t vb[4];
        ldmatrix_x4_trans(vb, v_tile + (v_off ^ uint32_t(pp << 5)));
        mma16816<M>(o[2 * pp], pa, vb[0], vb[1]);
        mma16816<M>(o[2 * pp + 1], pa, vb[2], vb[3]);
      }
    } else {
      // B of n-tile nt: tokens 2 q4 (+1, +8, +9), at dim (D / 8) g + nt (the
      // output dims are permuted: o[nt][e] is dim (D / 8)(2 q4 + e) + nt).
      // A lane reads D / 8 consecutive bytes of each of its four tokens;
      // byte J of word w is n-tile 4 w + J.
      constexpr int VW = D / 32;
      uint32_t vw[4][VW];
#pragma unroll
      for (int t = 0; t < 4; ++t) {
        const int r = 2 * q4 + (t & 1) + 8 * (t >> 1);
        if constexpr (D == 128) {
          const uint4 x = *reinterpret_cast<const uint4*>(v_raw + fp8_v_chunk<D>(r, g));
          vw[t][0] = x.x;
          vw[t][1] = x.y;
          vw[t][2] = x.z;
          vw[t][3] = x.w;
        } else {
          const uint2 x = *reinterpret_cast<const uint2*>(v_raw + fp8_v_chunk<D>(r, g >> 1) + (g & 1) * 8);
          vw[t][0] = x.x;
          vw[t][1] = x.y;
        }
      }
#pragma unroll
      for (int w = 0; w < VW; ++w) {
        mma16816<M>(o[4 * w], pa, e4m3_pair_f16x2<0>(vw[0][w], vw[1][w]),
                    e4m3_pair_f16x2<0>(vw[2][w], vw[3][w]));
        mma16816<M>(o[4 * w + 1], pa, e4m3_pair_f16x2<1>(vw[0][w], vw[1][w]),
                    e4m3_pair_f16x2<1>(vw[2][w], vw[3][w]));
        mma16816<M>(o[4 * w + 2], pa, e4m3_pair_f16x2<2>(vw[0][w], vw[1][w]),
                    e4m3_pair_f16x2<2>(vw[2][w], vw[3][w]));
        mma16816<M>(o[4 * w + 3], pa, e4m3_pair_f16x2<3>(vw[0][w], vw[1][w]),
                    e4m3_pair_f16x2<3>(vw[2][w], vw[3][w]));
      }
    }
    __syncwarp();  // every lane is done with this stage before it is refilled
  }
  cp_async_wait<0>();
  __syncthreads();  // the pipeline's shared memory becomes the merge area

  float* sm_o = reinterpret_cast<float*>(tc_smem);            // [warp][16][kRowStride]
  float* sm_m = sm_o + kTcWarps * 16 * Tl::kRowStride;       // [warp][16]
  float* sm_l = sm_m + kTcWarps * 16;                        // [warp][16]
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float sum = l[h];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const int row = warp * 16 + g + 8 * h;
    if (q4 == 0) {
      sm_m[row] = m[h];
      sm_l[row] = sum;
    }
    if constexpr (!kFp8) {
#pragma unroll
      for (int nt = 0; nt < DT; ++nt)
        *reinterpret_cast<float2*>(sm_o + row * Tl::kRowStride + nt * 8 + 2 * q4) =
            make_float2(o[nt][2 * h], o[nt][2 * h + 1]);
    } else {
#pragma unroll
      for (int nt = 0; nt < DT; ++nt) {
        sm_o[row * Tl::kRowStride + (D / 8) * (2 * q4) + nt] = o[nt][2 * h];
        sm_o[row * Tl::kRowStride + (D / 8) * (2 * q4 + 1) + nt] = o[nt][2 * h + 1];
      }
    }
  }
  __syncthreads();
  for (int idx = int(threadIdx.x); idx < rows * D; idx += kTcThreads) {
    const int r = idx / D, d = idx % D;
    float mx = -INFINITY;
#pragma unroll
    for (int w = 0; w < kTcWarps; ++w) mx = fmaxf(mx, sm_m[w * 16 + r]);
    const float ref = mx == -INFINITY ? 0.0f : mx;
    float sum = 0.0f, val = 0.0f;
#pragma unroll
    for (int w = 0; w < kTcWarps; ++w) {
      const float wt = fast_exp2(sm_m[w * 16 + r] - ref);
      sum += sm_l[w * 16 + r] * wt;
      val += sm_o[(w * 16 + r) * Tl::kRowStride + d] * wt;
    }
    const uint64_t row = uint64_t(b) * p.q_heads + h0 + uint32_t(r);
    if (p.num_splits == 1) {
      static_cast<Q*>(p.out)[row * D + d] = from_f32<Q>(sum > 0.0f ? val * p.v_scale / sum : 0.0f);
    } else {
      const uint64_t part = row * p.num_splits + split;
      p.ws_out[part * D + d] = val * p.v_scale;
      if (d == 0) p.ws_ml[part] = make_float2(sum > 0.0f ? ref : kNoScore, sum);
    }
  }
}

}  // namespace

}  // namespace kvc
