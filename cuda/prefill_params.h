// The parameters of the paged prefill attention kernels (prefill_kernel.cuh,
// the mma.sync kernel for every GPU, and prefill_wgmma_kernel.cuh, the
// Hopper one): one struct for both, so that the launch code plans once and
// the split-KV merge kernel serves both.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/kernel_errors.h"

namespace kvc {

inline constexpr int kMaxSeqs = 128;  // sequences per launch (they travel in the parameters)
inline constexpr float kLog2e = 1.4426950408889634f;
inline constexpr float kLn2 = 0.6931471805599453f;
// The TMA kernel's box: min(block tokens, this) tokens of one block.
inline constexpr int kTmaBoxTokens = 64;

struct PrefillSeq {
  int32_t q_start;   // first query row
  int32_t q_len;
  int32_t kv_len;
  int32_t tile_begin;  // first tile of the sequence in this launch
  int32_t index;       // sequence index in the call (its table row)
};

struct PrefillParams {
  const void* query;
  void* out;
  float* lse;
  const unsigned char* k_base;
  const unsigned char* v_base;
  uint64_t block_stride;
  uint64_t token_stride;
  uint64_t head_stride;
  const int32_t* table;
  const int32_t* indptr;  // CSR offsets, or NULL for a padded table
  uint64_t table_stride;
  uint32_t num_blocks;
  uint32_t block_shift;
  uint32_t q_heads;
  uint32_t kv_heads;
  uint32_t group;
  uint32_t window;  // 0 = full
  uint32_t num_splits;
  uint32_t split_tokens;
  uint32_t num_seqs;
  uint32_t num_tiles;
  int32_t q_base;        // first query row of the launch (workspace rows)
  float score_scale;     // softmax_scale * k_scale * log2(e), or / cap when capped
  float cap_log2;        // cap * log2(e); 0 = no soft cap
  float v_scale;
  float* ws_o;           // [rows][q_heads][num_splits][head_dim]
  float2* ws_ml;         // [rows][q_heads][num_splits] (max, sum), exp2 domain
  KernelErrorRecord* err;
  uint32_t layer;
  PrefillSeq seqs[kMaxSeqs];
  // Tensor maps (CUtensorMap, opaque here) over the K and V pools for the
  // Hopper TMA kernel (prefill_tma_kernel.cuh; prefill_tma_map.h encodes
  // them); unused by the other kernels.
  alignas(64) unsigned char tmap_k[128];
  alignas(64) unsigned char tmap_v[128];
};
static_assert(sizeof(PrefillParams) <= 4096, "kernel parameters are limited to 4 KB");

}  // namespace kvc
