// What both decode attention kernels (decode_attention.cu: CUDA cores;
// decode_tc_kernel.cuh: tensor cores) share: their parameters and the
// checks of a sequence's length and table row. Included by
// decode_attention.cu only.
#pragma once

#include <cstdint>

#include "cuda/kernel_errors.h"

namespace kvc {

namespace {

constexpr float kNoScore = -1e30f;   // running max before any token: finite, so no inf - inf

struct DecodeParams {
  const void* query;
  void* out;
  const unsigned char* k_base;
  const unsigned char* v_base;
  uint64_t block_stride;
  uint64_t token_stride;
  uint64_t head_stride;
  const int32_t* seq_lens;
  const int32_t* table;
  const int32_t* indptr;  // CSR offsets, or NULL for a padded table
  uint64_t table_stride;
  uint32_t num_blocks;
  uint32_t block_shift;
  uint32_t token_mask;     // paged: tokens_per_block - 1; stateful rows: all ones
  uint32_t q_heads;
  uint32_t group;          // query heads per kv head
  uint32_t head_chunks;    // group / GB
  uint32_t max_seq_len;
  uint32_t window;         // 0 = full
  uint32_t num_splits;
  uint32_t split_tokens;
  float q_scale;           // softmax_scale * k_scale * log2(e)
  float v_scale;
  float* ws_out;           // [batch][q_heads][num_splits][head_dim]
  float2* ws_ml;           // [batch][q_heads][num_splits] (max, sum)
  KernelErrorRecord* err;
  uint32_t layer;
};

// The attended tokens [start, len) of sequence b and its table row, after
// checking what the host could not. Every thread of a block computes the
// same; `report` says whether this thread records errors.
struct SeqRange {
  uint32_t start;
  uint32_t len;
  const int32_t* row;
};

__device__ __forceinline__ SeqRange sequence_range(const DecodeParams& p, uint32_t b, bool report) {
  SeqRange r;
  const int32_t raw = p.seq_lens[b];
  uint32_t len = uint32_t(raw);
  if (raw < 0 || uint32_t(raw) > p.max_seq_len) {
    if (report) record_kernel_error(p.err, kSeqLenOutOfRange, p.layer, b, raw, p.max_seq_len);
    len = 0;
  }
  if (p.indptr != nullptr) {
    const int32_t begin = p.indptr[b];
    const int64_t have = int64_t(p.indptr[b + 1]) - begin;
    const int64_t need = (int64_t(len) + (1 << p.block_shift) - 1) >> p.block_shift;
    if (have < need) {
      if (report) record_kernel_error(p.err, kTableTooShort, p.layer, b, have, need);
      len = 0;
    }
    r.row = p.table + begin;
  } else {
    r.row = p.table + uint64_t(b) * p.table_stride;
  }
  r.len = len;
  r.start = (p.window != 0 && len > p.window) ? len - p.window : 0;
  return r;
}

}  // namespace

}  // namespace kvc
