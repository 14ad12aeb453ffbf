// The work item of one thread block of the paged prefill kernels
// (prefill_kernel.cuh, prefill_wgmma_kernel.cuh, prefill_tma_kernel.cuh):
// the query tile, kv head and split it computes, the tile's sequence and
// rows, the sequence's block table row (checked against its length) and the
// KV range of the piece. All three kernels take the planner's grid
// (prefill_plan.h) and must read it the same way, so it is decoded here once.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/kernel_errors.h"
#include "cuda/prefill_params.h"
#include "cuda/prefill_plan.h"

namespace kvc {

struct PrefillWorkItem {
  uint32_t tile;   // query tile of the launch
  uint32_t piece;  // (kv head, split) of the tile
  uint32_t kvh;
  uint32_t split;
  PrefillSeq sq;
  int G;           // query heads per kv head
  int rows_valid;  // packed query rows of the sequence (q_len * G)
  int r0;          // the tile's first row in the sequence
  int prefix;      // cached tokens before the sequence's first query
  int pos_min;     // position of the tile's first row
  int pos_max;     // position of its last valid row
  int window;      // 0 = full attention
  const int32_t* table_row;
  int lo_s, hi_s;  // KV range [lo_s, hi_s) of the piece (empty on a short table)
  int n_first;     // first token of the piece's first KV tile (a multiple of the tile)
  int n_tiles;     // KV tiles from n_first that cover [lo_s, hi_s)
};

// Heaviest tiles first, all (kv head, split) pieces of a tile side by side so
// that they share the K/V reads in L2. A table row shorter than its sequence
// is recorded once (thread 0 of the sequence's first tile and piece) and
// leaves the piece nothing to read, so no block beyond the row is touched.
__device__ __forceinline__ PrefillWorkItem prefill_work_item(const PrefillParams& p) {
  constexpr int BM = int(kPrefillTileRows);
  constexpr int BN = int(kPrefillTileTokens);  // splits start on multiples of it
  PrefillWorkItem w;
  const uint32_t pieces = p.kv_heads * p.num_splits;
  w.tile = p.num_tiles - 1 - blockIdx.x / pieces;
  w.piece = blockIdx.x % pieces;
  w.kvh = w.piece / p.num_splits;
  w.split = w.piece % p.num_splits;
  int lo_b = 0, hi_b = int(p.num_seqs) - 1;
  while (lo_b < hi_b) {
    const int mid = (lo_b + hi_b + 1) >> 1;
    if (uint32_t(p.seqs[mid].tile_begin) <= w.tile) lo_b = mid;
    else hi_b = mid - 1;
  }
  w.sq = p.seqs[lo_b];
  w.G = int(p.group);
  w.rows_valid = w.sq.q_len * w.G;
  w.r0 = int(w.tile - uint32_t(w.sq.tile_begin)) * BM;
  w.prefix = w.sq.kv_len - w.sq.q_len;
  w.pos_min = w.prefix + w.r0 / w.G;
  w.pos_max = w.prefix + (min(w.r0 + BM, w.rows_valid) - 1) / w.G;
  w.window = int(p.window);

  bool table_ok = true;
  if (p.indptr != nullptr) {
    const int32_t begin = p.indptr[w.sq.index];
    const int64_t have = int64_t(p.indptr[w.sq.index + 1]) - begin;
    const int64_t need = (int64_t(w.sq.kv_len) + (1 << p.block_shift) - 1) >> p.block_shift;
    if (have < need) {
      if (threadIdx.x == 0 && w.r0 == 0 && w.piece == 0)
        record_kernel_error(p.err, kPrefillTableTooShort, p.layer, w.sq.index, have, need);
      table_ok = false;
    }
    w.table_row = p.table + begin;
  } else {
    w.table_row = p.table + uint64_t(w.sq.index) * p.table_stride;
  }

  const int lo = w.window != 0 ? max(0, w.pos_min + 1 - w.window) : 0;
  const int hi = w.pos_max + 1;
  w.lo_s = lo;
  w.hi_s = hi;
  if (p.num_splits > 1) {
    const int base = (lo / BN) * BN + int(w.split * p.split_tokens);
    w.lo_s = max(lo, base);
    w.hi_s = min(hi, base + int(p.split_tokens));
  }
  if (!table_ok) w.hi_s = w.lo_s;
  w.n_first = (w.lo_s / BN) * BN;
  w.n_tiles = w.hi_s > w.lo_s ? (w.hi_s - w.n_first + BN - 1) / BN : 0;
  return w;
}

}  // namespace kvc
