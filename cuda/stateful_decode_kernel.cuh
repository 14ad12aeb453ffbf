// Decode attention of the stateful mode (kvc_stateful_decode) on the tensor
// cores, reading K/V that several rows share once for all of them:
//  - a thread block owns one kv head, one chunk of split_tokens positions
//    and up to 16 packed query rows: the G query heads of that kv head for
//    each of the rows it serves (16 / G rows, or one row and 16 of its heads
//    when G > 16). The rows of a block read the same K/V over the chunk (the
//    host groups rows whose beam table rows agree there, see
//    stateful_decode.cu), so a tile of K/V is loaded once and one MMA tile
//    scores every row of it; without sharing a block serves one row;
//  - K/V tiles of 64 positions go global -> shared memory with cp.async,
//    2 to 8 stages deep (Cfg), addressed through the beam table: the byte
//    offsets of a tile's positions (and a word of bits saying which are
//    attended) are computed a pipeline's depth ahead into a ring in shared
//    memory, from table entries loaded two tiles before that, so neither a
//    copy nor the offsets wait on a table load;
//  - each of the 4 warps takes 16 positions of every tile: S = Q K^T (Q's
//    fragments kept in registers for head dims up to 128, even and odd
//    k-steps in two accumulators) and O += P V with mma.sync m16n8k16 (f32
//    accumulation), an online softmax per warp in the exp2 domain (O
//    rescaled only when a row's max grew by more than 2^8, as the prefill
//    kernel), the warps merged at the end;
//  - the chunk's partial row (O, max, sum) goes to the workspace and a merge
//    kernel combines the chunks of each (row, head).
// A row's result depends only on its own query and K/V and on the chunk
// boundaries (a function of the lengths, not of the sharing), never on the
// rows packed beside it: MMA rows are independent and a rescale by 1 is
// exact. So decoding through the table and after compaction give the same
// bits, shared or not.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "cuda/cuda_numeric.cuh"
#include "cuda/kernel_errors.h"
#include "cuda/tensor_core_ptx.cuh"

namespace kvc {

namespace sd {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kTile = 64;       // positions per pipeline step, 16 per warp
constexpr int kRowsPerCta = 16; // packed query rows: one MMA tile
constexpr uint32_t kMaxSharedRows = 16;  // batches up to this size are grouped
constexpr int kMaxSegments = 32;
constexpr int kMaxGroups = 128;

// Chunks [first_chunk, end_chunk) all have the same `groups` row groups,
// group_rows[first_group ...]; their blocks are items first_item and on.
struct Segment {
  uint32_t first_chunk, end_chunk, first_group, groups, first_item;
};

struct Params {
  const void* query;   // [rows][q_heads][D]
  void* out;           // [rows][q_heads][D]
  const unsigned char* k_base;
  const unsigned char* v_base;
  uint64_t row_stride, token_stride, head_stride;
  const int32_t* table;  // [rows][table_stride] source rows, or NULL: each row its own
  uint32_t table_stride;
  const int32_t* dev_lengths;  // [rows], read when num_segments is 0
  uint32_t rows;
  uint32_t q_heads;
  uint32_t group;        // G: query heads per kv head
  uint32_t head_chunks;  // blocks per (kv head, rows): ceil(G / 16)
  uint32_t max_seq_len;
  uint32_t num_splits;   // chunks
  uint32_t split_tokens; // a multiple of kTile
  float score_scale;     // softmax_scale * k_scale * log2(e)
  float v_scale;
  float* ws_o;    // [rows][q_heads][num_splits][D]
  float2* ws_ml;  // [rows][q_heads][num_splits] (max, sum), exp2 domain
  KernelErrorRecord* err;
  uint32_t layer;
  // Grouped launch (num_segments > 0): blocks are items of the segments,
  // lengths come from the host. Otherwise block x is row x % rows of chunk
  // x / rows, lengths from dev_lengths.
  uint32_t num_segments;
  uint32_t lengths[kMaxSharedRows];
  Segment segments[kMaxSegments];
  uint16_t group_rows[kMaxGroups];  // bit r: row r
};

// Shared memory of a variant with NST pipeline stages.
template <class Q, class KV, int D, int NST>
struct Layout {
  static constexpr bool kFp8 = std::is_same_v<KV, fp8_t>;
  static constexpr int kStages = NST;
  static constexpr int kSlots = NST + 1;  // offsets ring
  static constexpr int kTileBytes = kTile * D * 2;
  static constexpr int kQ = 0;
  static constexpr int kK = kRowsPerCta * D * 2;
  static constexpr int kV = kK + NST * kTileBytes;
  static constexpr int kOffs = kV + NST * kTileBytes;
  static constexpr int kMasks = kOffs + kSlots * kTile * 8;  // per slot: 64 bits, attended positions
  // fp8: per stage raw K, raw V (16-byte copies: aligned to 128 bytes).
  static constexpr int kRaw = kMasks + (kSlots * 8 + 127) / 128 * 128;
  static constexpr int kRawStage = 2 * kTile * D;
  static constexpr int kBytes = kFp8 ? kRaw + NST * kRawStage : kRaw;
  // Epilogue: per warp O [16][D], max [16], sum [16], over the K/V stages.
  static constexpr int kMergeBytes = kWarps * kRowsPerCta * (D + 2) * 4;
  static_assert(kK + kMergeBytes <= kOffs, "the merge area must fit the K/V stages");
  static_assert(kK % 128 == 0 && kV % 128 == 0 && kOffs % 128 == 0 && kMasks % 128 == 0 &&
                    kRaw % 128 == 0 && kRawStage % 128 == 0,
                "shared memory regions aligned for 16-byte copies");
};

// Deepest pipeline (at most 8 stages) whose shared memory fits one block
// per SM (227 KiB on H100, a little kept for the static variables).
template <class Q, class KV, int D, int NST = 8>
constexpr int deepest() {
  if constexpr (NST <= 2 || Layout<Q, KV, D, NST>::kBytes <= 220 * 1024) return NST;
  else return deepest<Q, KV, D, NST - 1>();
}

// The two variants of a (dtypes, head dim): `Normal` fits two blocks per SM
// (three stages; two for head dim 256), `Deep` one block per SM with the
// deepest pipeline, for launches of at most one block per SM (rows that
// share their history need few blocks, each must stream fast). The stages
// change only how far the copies run ahead, never the arithmetic: a row's
// result is the same bits in both.
template <class Q, class KV, int D>
struct Cfg {
  static constexpr int kNormal = D == 256 ? 2 : 3;
  static constexpr int kDeep = deepest<Q, KV, D>();
};

// Length of row r (device lengths checked against max_seq_len).
__device__ __forceinline__ uint32_t row_length(const Params& p, uint32_t r, bool report) {
  if (p.num_segments > 0) return p.lengths[r];
  const int32_t raw = p.dev_lengths[r];
  if (raw < 0 || uint32_t(raw) > p.max_seq_len) {
    if (report) record_kernel_error(p.err, kSeqLenOutOfRange, p.layer, r, raw, p.max_seq_len);
    return 0;
  }
  return uint32_t(raw);
}

template <class Q, class KV, int D, int NST>
__global__ void __launch_bounds__(kThreads, 1) attend_kernel(const __grid_constant__ Params p) {
  using C = Layout<Q, KV, D, NST>;
  constexpr int SLOTS = C::kSlots, DT = D / 8;
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ uint32_t s_rows[kRowsPerCta];
  __shared__ uint32_t s_n;
  const uint32_t s_base = smem_u32(smem);
  const uint32_t s_q = s_base + C::kQ;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;

  // The item: chunk and rows.
  const uint32_t G = p.group;
  const uint32_t kvh = blockIdx.y / p.head_chunks;
  const uint32_t hc = blockIdx.y % p.head_chunks;
  uint32_t chunk, mask = 0, single = 0;
  if (p.num_segments > 0) {
    const uint32_t x = blockIdx.x;
    uint32_t s = 0;
    while (s + 1 < p.num_segments && p.segments[s + 1].first_item <= x) ++s;
    const Segment& seg = p.segments[s];
    const uint32_t i = x - seg.first_item;
    chunk = seg.first_chunk + i / seg.groups;
    mask = p.group_rows[seg.first_group + i % seg.groups];
  } else {
    chunk = blockIdx.x / p.rows;
    single = blockIdx.x % p.rows;
  }
  if (tid == 0) {
    uint32_t n = 0;
    if (p.num_segments > 0) {
      for (uint32_t m = mask; m != 0; m &= m - 1) s_rows[n++] = uint32_t(__ffs(int(m)) - 1);
    } else {
      s_rows[n++] = single;
    }
    s_n = n;
  }
  __syncthreads();
  const uint32_t n_rows = s_n;
  const uint32_t leader = s_rows[0];
  const uint32_t len = row_length(p, leader, tid == 0 && blockIdx.y == 0);
  const uint32_t t0 = chunk * p.split_tokens;
  const uint32_t end = min(len, t0 + p.split_tokens);
  if (t0 >= end) return;  // past this row's end: the merge skips the chunk
  const int n_tiles = int((end - t0 + kTile - 1) / kTile);
  const int32_t* table_row = p.table != nullptr ? p.table + uint64_t(leader) * p.table_stride : nullptr;

  // Packed row pr: row s_rows[pr / GE], query head kvh * G + hc * 16 + pr % GE.
  const uint32_t GE = G < 16 ? G : 16;
  auto packed = [&](int pr, uint32_t* row, uint32_t* head) {
    const uint32_t i = uint32_t(pr) / GE, j = hc * 16 + uint32_t(pr) % GE;
    const bool ok = i < n_rows && j < G;
    *row = ok ? s_rows[i] : 0;
    *head = kvh * G + (ok ? j : 0);
    return ok;
  };

  // The offsets ring: slot k holds, for position r of a tile, the byte
  // offset of its K (or V) row, or -1 when it is not attended (past the
  // end, or a bad table entry).
  int64_t* offs = reinterpret_cast<int64_t*>(smem + C::kOffs);
  uint32_t* masks = reinterpret_cast<uint32_t*>(smem + C::kMasks);
  auto load_id = [&](int jt) -> int32_t {
    const uint32_t t = t0 + uint32_t(jt) * kTile + uint32_t(tid);
    if (tid >= kTile || t >= end) return -1;
    return table_row != nullptr ? table_row[t] : int32_t(leader);
  };
  auto store_offset = [&](int jt, int32_t id) {
    if (tid >= kTile) return;
    const uint32_t t = t0 + uint32_t(jt) * kTile + uint32_t(tid);
    int64_t off = -1;
    if (t < end) {
      if (id < 0 || uint32_t(id) >= p.rows) {
        record_kernel_error(p.err, kBlockOutOfRange, p.layer, leader, id, p.rows, t);
      } else {
        off = int64_t(uint64_t(id) * p.row_stride + uint64_t(t) * p.token_stride +
                      uint64_t(kvh) * p.head_stride);
      }
    }
    offs[(jt % SLOTS) * kTile + tid] = off;
    // The tile's attended positions as bits, for the scores' mask (warps 0
    // and 1 hold positions 0-31 and 32-63).
    const uint32_t bits = __ballot_sync(0xffffffffu, off >= 0);
    if (lane == 0) masks[(jt % SLOTS) * 2 + warp] = bits;
  };

  // Starts the copies of tile jt's K and V into stage jt % NST (fp8: its
  // raw staging), one offset read for both.
  auto issue_tile = [&](int jt) {
    const int st = jt % NST;
    const int64_t* slot = offs + (jt % SLOTS) * kTile;
    if constexpr (!C::kFp8) {
      constexpr int CPR = D / 8;
      constexpr int PER = kTile * CPR / kThreads;
      const uint32_t k_tile = s_base + uint32_t(C::kK + st * C::kTileBytes);
      const uint32_t v_tile = s_base + uint32_t(C::kV + st * C::kTileBytes);
#pragma unroll
      for (int k = 0; k < PER; ++k) {
        const int idx = k * kThreads + tid;
        const int r = idx / CPR, c = idx % CPR;
        const int64_t off = slot[r];
        const uint64_t at = off >= 0 ? uint64_t(off) + uint64_t(c) * 16 : 0;
        const uint32_t n = off >= 0 ? 16u : 0u;
        cp_async16(k_tile + swz<D>(r, c), p.k_base + at, n);
        cp_async16(v_tile + swz<D>(r, c), p.v_base + at, n);
      }
    } else {
      constexpr int CPR = D / 16;
      constexpr int PER = kTile * CPR / kThreads;
      const uint32_t raw = s_base + uint32_t(C::kRaw + st * C::kRawStage);
#pragma unroll
      for (int k = 0; k < PER; ++k) {
        const int idx = k * kThreads + tid;
        const int r = idx / CPR, c = idx % CPR;
        const int64_t off = slot[r];
        const uint64_t at = off >= 0 ? uint64_t(off) + uint64_t(c) * 16 : 0;
        const uint32_t n = off >= 0 ? 16u : 0u;
        cp_async16(raw + uint32_t(idx * 16), p.k_base + at, n);
        cp_async16(raw + uint32_t(kTile * D + idx * 16), p.v_base + at, n);
      }
    }
  };
  // fp8: converts the raw chunks this thread copied into the 16-bit tile.
  auto convert = [&](uint32_t raw_off, uint32_t tile_off) {
    if constexpr (C::kFp8) {
      constexpr int CPR = D / 16;
      constexpr int PER = kTile * CPR / kThreads;
#pragma unroll
      for (int k = 0; k < PER; ++k) {
        const int idx = k * kThreads + tid;
        const int r = idx / CPR, c = idx % CPR;
        const uint4 raw = *reinterpret_cast<const uint4*>(smem + raw_off + idx * 16);
        uint4 two[2];
        fp8x16_to<Q>(raw, two);
        *reinterpret_cast<uint4*>(smem + tile_off + swz<D>(r, 2 * c)) = two[0];
        *reinterpret_cast<uint4*>(smem + tile_off + swz<D>(r, 2 * c + 1)) = two[1];
      }
    }
  };
  auto stage_k = [](int st) { return uint32_t(C::kK + st * C::kTileBytes); };
  auto stage_v = [](int st) { return uint32_t(C::kV + st * C::kTileBytes); };
  auto raw_k = [](int st) { return uint32_t(C::kRaw + st * C::kRawStage); };
  auto raw_v = [](int st) { return uint32_t(C::kRaw + st * C::kRawStage + kTile * D); };

  // Prologue: Q (zeros for unused packed rows), the offsets of tiles
  // 0 .. NST-1, then the copies of tiles 0 .. NST-2 (Q rides in the first group).
  {
    constexpr int CPR = D / 8;
    constexpr int PER = kRowsPerCta * CPR / kThreads;
    const unsigned char* qbase = static_cast<const unsigned char*>(p.query);
#pragma unroll
    for (int k = 0; k < PER; ++k) {
      const int idx = k * kThreads + tid;
      const int r = idx / CPR, c = idx % CPR;
      uint32_t row, head;
      const bool ok = packed(r, &row, &head);
      const uint64_t q_elem = (uint64_t(row) * p.q_heads + head) * D + uint64_t(c) * 8;
      cp_async16(s_q + swz<D>(r, c), qbase + q_elem * sizeof(Q), ok ? 16u : 0u);
    }
  }
#pragma unroll
  for (int jt = 0; jt < NST; ++jt) store_offset(jt, load_id(jt));
  // The table entries of the next two tiles to store, loaded two tiles
  // before they are stored so that no thread waits on the load.
  int32_t ids[2] = {load_id(NST), load_id(NST + 1)};
  __syncthreads();
#pragma unroll
  for (int jt = 0; jt < NST - 1; ++jt) {
    if (jt < n_tiles) issue_tile(jt);
    cp_async_commit();
  }

  const uint32_t q_off = swz<D>(lane & 15, lane >> 4);
  const uint32_t k_off = swz<D>(((lane >> 4) & 1) * 8 + (lane & 7), (lane >> 3) & 1);
  const uint32_t v_off = swz<D>(((lane >> 3) & 1) * 8 + (lane & 7), lane >> 4);
  // Q's A fragments, loaded from shared memory once (head dims up to 128;
  // 256 would not leave the registers for O).
  constexpr bool kQInRegisters = D <= 128;
  uint32_t qa[kQInRegisters ? D / 16 : 1][4];
  float o[DT][4];
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
#pragma unroll
  for (int nt = 0; nt < DT; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[nt][e] = 0.0f;

  for (int j = 0; j < n_tiles; ++j) {
    const int st = j % NST;
    cp_async_wait<NST - 2>();  // this thread's copies of tile j have landed
    convert(raw_k(st), stage_k(st));
    convert(raw_v(st), stage_v(st));
    __syncthreads();  // tile j visible; every warp is done with tile j-1
    if (j + NST - 1 < n_tiles) issue_tile(j + NST - 1);
    cp_async_commit();
    const int32_t later = load_id(j + NST + 2);  // stored two tiles from now

    // This warp's 16 positions of the tile: S = Q K^T.
    const uint32_t k_tile = s_base + stage_k(st) + uint32_t(warp * 16 * D * 2);
    const uint32_t v_tile = s_base + stage_v(st) + uint32_t(warp * 16 * D * 2);
    // Even and odd k-steps go to separate accumulators (two short MMA
    // chains per n-tile instead of one long one), summed at the end.
    float s[2][4], s2[2][4];
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[nt][e] = s2[nt][e] = 0.0f;
    if constexpr (kQInRegisters) {
      if (j == 0) {
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) ldmatrix_x4(qa[kk], s_q + (q_off ^ uint32_t(kk << 5)));
      }
    }
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t a[4], b[4];
      if constexpr (kQInRegisters) {
#pragma unroll
        for (int i = 0; i < 4; ++i) a[i] = qa[kk][i];
      } else {
        ldmatrix_x4(a, s_q + (q_off ^ uint32_t(kk << 5)));
      }
      ldmatrix_x4(b, k_tile + (k_off ^ uint32_t(kk << 5)));
      float(*acc)[4] = (kk & 1) != 0 ? s2 : s;
      mma16816<Q>(acc[0], a, b[0], b[1]);
      mma16816<Q>(acc[1], a, b[2], b[3]);
    }
    // Scale, mask (positions without an offset), online softmax.
    const uint32_t valid = masks[(j % SLOTS) * 2 + (warp >> 1)] >> ((warp & 1) * 16);
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = nt * 8 + (lane & 3) * 2 + (e & 1);
        const float v = s[nt][e] + s2[nt][e];
        s[nt][e] = (valid >> col) & 1u ? v * p.score_scale : -INFINITY;
      }
    float corr[2];
    bool grew = false;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float mx = fmaxf(fmaxf(s[0][2 * h], s[0][2 * h + 1]), fmaxf(s[1][2 * h], s[1][2 * h + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      // Move the reference only when the max grew by more than 2^8.
      const float old = m[h];
      const bool up = mx > old + 8.0f;
      const float ref = up ? mx : old;
      corr[h] = up ? fast_exp2(old - ref) : 1.0f;  // old = -inf: 0
      grew |= up;
      m[h] = ref;
      const float neg = ref == -INFINITY ? 0.0f : -ref;
      float sum = 0.0f;
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        s[nt][2 * h] = fast_exp2(s[nt][2 * h] + neg);
        s[nt][2 * h + 1] = fast_exp2(s[nt][2 * h + 1] + neg);
        sum += s[nt][2 * h] + s[nt][2 * h + 1];
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
    // O += P V: the accumulators of the two n-tiles are the A fragment.
    uint32_t pa[4];
    pa[0] = pack2<Q>(s[0][0], s[0][1]);
    pa[1] = pack2<Q>(s[0][2], s[0][3]);
    pa[2] = pack2<Q>(s[1][0], s[1][1]);
    pa[3] = pack2<Q>(s[1][2], s[1][3]);
#pragma unroll
    for (int pp = 0; pp < D / 16; ++pp) {
      uint32_t b[4];
      ldmatrix_x4_trans(b, v_tile + (v_off ^ uint32_t(pp << 5)));
      mma16816<Q>(o[2 * pp], pa, b[0], b[1]);
      mma16816<Q>(o[2 * pp + 1], pa, b[2], b[3]);
    }
    // Slot (j + NST) % SLOTS is tile j-1's: read for the last time before
    // this tile's barrier.
    store_offset(j + NST, ids[0]);
    ids[0] = ids[1];
    ids[1] = later;
  }
  cp_async_wait<0>();
  __syncthreads();  // the stages become the merge area

  // The warps' partial rows, merged in a fixed order.
  float* sm_o = reinterpret_cast<float*>(smem + C::kK);    // [warp][16][D]
  float* sm_m = sm_o + kWarps * kRowsPerCta * D;            // [warp][16]
  float* sm_l = sm_m + kWarps * kRowsPerCta;                // [warp][16]
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float sum = l[h];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const int r = (lane >> 2) + 8 * h;
    float* dst = sm_o + (warp * kRowsPerCta + r) * D + (lane & 3) * 2;
#pragma unroll
    for (int nt = 0; nt < DT; ++nt) {
      dst[nt * 8] = o[nt][2 * h];
      dst[nt * 8 + 1] = o[nt][2 * h + 1];
    }
    if ((lane & 3) == 0) {
      sm_m[warp * kRowsPerCta + r] = m[h];
      sm_l[warp * kRowsPerCta + r] = sum;
    }
  }
  __syncthreads();
  for (int idx = tid; idx < kRowsPerCta * D; idx += kThreads) {
    const int r = idx / D, d = idx % D;
    uint32_t row, head;
    if (!packed(r, &row, &head)) continue;
    float mx = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w)
      if (sm_l[w * kRowsPerCta + r] > 0.0f) mx = fmaxf(mx, sm_m[w * kRowsPerCta + r]);
    float sum = 0.0f, val = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float lw = sm_l[w * kRowsPerCta + r];
      if (lw > 0.0f) {
        const float wt = fast_exp2(sm_m[w * kRowsPerCta + r] - mx);
        sum += lw * wt;
        val += sm_o[(w * kRowsPerCta + r) * D + d] * wt;
      }
    }
    const uint64_t part = (uint64_t(row) * p.q_heads + head) * p.num_splits + chunk;
    p.ws_o[part * D + d] = val;
    if (d == 0) p.ws_ml[part] = make_float2(mx, sum);
  }
  // The merge kernel may start launching now; it waits for this grid.
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

// Combines the chunks of each (row, head): weights exp2(m - M). Rows
// without positions get zeros.
template <class Q, int D>
__global__ void __launch_bounds__(D) merge_kernel(const __grid_constant__ Params p) {
  const uint32_t h = blockIdx.x, b = blockIdx.y;
  asm volatile("griddepcontrol.wait;" ::: "memory");
  const uint32_t len = row_length(p, b, false);
  const uint32_t used = (len + p.split_tokens - 1) / p.split_tokens;
  const uint64_t part0 = (uint64_t(b) * p.q_heads + h) * p.num_splits;
  float mx = -INFINITY;
  for (uint32_t s = 0; s < used; ++s) {
    const float2 v = p.ws_ml[part0 + s];
    if (v.y > 0.0f) mx = fmaxf(mx, v.x);
  }
  float sum = 0.0f, val = 0.0f;
  for (uint32_t s = 0; s < used; ++s) {
    const float2 v = p.ws_ml[part0 + s];
    if (v.y > 0.0f) {
      const float w = fast_exp2(v.x - mx);
      sum += v.y * w;
      val += p.ws_o[(part0 + s) * D + threadIdx.x] * w;
    }
  }
  static_cast<Q*>(p.out)[(uint64_t(b) * p.q_heads + h) * D + threadIdx.x] =
      from_f32<Q>(sum > 0.0f ? val * p.v_scale / sum : 0.0f);
}

}  // namespace sd

}  // namespace kvc
