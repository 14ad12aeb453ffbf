#include "backend/kernel_checks.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "base/error.h"

namespace kvc {

namespace {

std::string str(uint64_t v) { return std::to_string(v); }
std::string str(int64_t v) { return std::to_string(v); }
std::string str(int32_t v) { return std::to_string(v); }
std::string str(uint32_t v) { return std::to_string(v); }
std::string str(float v) { return std::to_string(v); }

void require_ptr(const void* p, const char* name) {
  if (p == nullptr) invalid_argument(std::string(name) + " must not be NULL");
}

void check_scale(float s, const char* name) {
  if (!(std::isfinite(s) && s > 0.0f))
    invalid_argument(std::string(name) + " must be finite and > 0, got " + str(s));
}

std::string dtype_str(kvc_dtype_t d) {
  return dtype_size(d) == 0 ? "unknown dtype " + str(d) : std::string(dtype_name(d));
}

bool is_fp8(kvc_dtype_t d) { return d == KVC_DTYPE_FP8_E4M3; }
bool is_float_input(kvc_dtype_t d) {
  return d == KVC_DTYPE_F32 || d == KVC_DTYPE_F16 || d == KVC_DTYPE_BF16;
}

}  // namespace

void check_store_args(const StoreKvWork& w) {
  const LayerSlabs& kv = w.kv;
  const bool accepted = w.src_dtype == kv.dtype || (is_fp8(kv.dtype) && is_float_input(w.src_dtype));
  if (!accepted)
    invalid_argument("src_dtype " + dtype_str(w.src_dtype) + " cannot be stored in a " +
                     dtype_str(kv.dtype) + " cache (it must equal the cache dtype; an " +
                     "fp8_e4m3 cache also takes f32, f16 or bf16)");
  if (kv.kv_factor == 1 && w.value != nullptr)
    invalid_argument("value must be NULL for a cache with kv_factor 1 (K and V are one tensor)");
  if (w.num_tokens == 0) return;
  require_ptr(w.key, "key");
  if (kv.kv_factor == 2) require_ptr(w.value, "value");
  require_ptr(w.slot_mapping, "slot_mapping");
  if (is_fp8(kv.dtype) && w.src_dtype != kv.dtype) {
    check_scale(w.k_scale, "k_scale");
    if (kv.kv_factor == 2) check_scale(w.v_scale, "v_scale");
  }
}

void check_store_slots(const StoreKvWork& w) {
  const int64_t limit = int64_t(w.kv.num_slots());
  for (uint32_t i = 0; i < w.num_tokens; ++i) {
    const int64_t s = w.slot_mapping[i];
    if (s < -1 || s >= limit)
      invalid_argument("slot_mapping[" + str(i) + "] = " + str(s) + " is outside [-1, " +
                       str(limit) + ") (layer " + str(w.kv.layer) + ": " + str(w.kv.num_blocks) +
                       " blocks of " + str(w.kv.tokens_per_block) + " tokens)");
  }
}

void check_decode_shape(const DecodeWork& w) {
  const LayerSlabs& kv = w.kv;
  if (kv.head_dim != 64 && kv.head_dim != 128 && kv.head_dim != 256)
    fail(KVC_ERR_UNSUPPORTED, "decode attention supports head_dim 64, 128 or 256; layer " +
                                  str(kv.layer) + " has head_dim " + str(kv.head_dim));
  if (w.q_heads == 0 || w.q_heads % kv.kv_heads != 0)
    invalid_argument("q_heads must be a positive multiple of the layer's kv_heads (" +
                     str(kv.kv_heads) + "), got " + str(w.q_heads));
  const bool q_ok = is_fp8(kv.dtype)
                        ? (w.q_dtype == KVC_DTYPE_F16 || w.q_dtype == KVC_DTYPE_BF16)
                        : w.q_dtype == kv.dtype;
  if (!q_ok)
    invalid_argument("q_dtype " + dtype_str(w.q_dtype) + " does not fit a " + dtype_str(kv.dtype) +
                     " cache (it must equal the cache dtype; an fp8_e4m3 cache takes f16 or "
                     "bf16 queries)");
  if (w.table_format != KVC_TABLE_PADDED && w.table_format != KVC_TABLE_CSR)
    invalid_argument("table_format must be KVC_TABLE_PADDED (1) or KVC_TABLE_CSR (2), got " +
                     str(w.table_format));
  if (w.batch == 0) return;
  if (w.max_seq_len == 0) invalid_argument("max_seq_len must be > 0 when batch > 0");
  if (w.max_seq_len > (1u << 30))
    invalid_argument("max_seq_len must be <= 2^30, got " + str(w.max_seq_len));
  if (w.table_format == KVC_TABLE_PADDED) {
    const uint64_t need = blocks_for(w.max_seq_len, kv.tokens_per_block);
    if (w.table_stride < need)
      invalid_argument("table_stride (" + str(w.table_stride) + ") is less than the " +
                       str(need) + " blocks that max_seq_len " + str(w.max_seq_len) +
                       " spans at " + str(kv.tokens_per_block) + " tokens per block");
  } else if (w.table_stride != 0) {
    invalid_argument("table_stride must be 0 for KVC_TABLE_CSR, got " + str(w.table_stride));
  }
}

void check_decode_args(const DecodeWork& w) {
  check_decode_shape(w);
  const LayerSlabs& kv = w.kv;
  if (!std::isfinite(w.softmax_scale))
    invalid_argument("softmax_scale must be finite, got " + str(w.softmax_scale));
  if (is_fp8(kv.dtype)) {
    check_scale(w.k_scale, "k_scale");
    check_scale(w.v_scale, "v_scale");
  }
  if (w.batch == 0) return;
  require_ptr(w.query, "query");
  require_ptr(w.out, "out");
  require_ptr(w.seq_lens, "seq_lens");
  require_ptr(w.block_table, "block_table");
  if (w.table_format == KVC_TABLE_PADDED) {
    if (w.indptr != nullptr) invalid_argument("indptr must be NULL for KVC_TABLE_PADDED");
  } else {
    require_ptr(w.indptr, "indptr");
  }
}

void check_decode_tables(const DecodeWork& w) {
  const LayerSlabs& kv = w.kv;
  const uint32_t T = kv.tokens_per_block;
  if (w.table_format == KVC_TABLE_CSR && w.batch > 0 && w.indptr[0] != 0)
    invalid_argument("indptr[0] must be 0, got " + str(w.indptr[0]));
  for (uint32_t b = 0; b < w.batch; ++b) {
    const int32_t len = w.seq_lens[b];
    if (len < 0 || uint32_t(len) > w.max_seq_len)
      invalid_argument("seq_lens[" + str(b) + "] = " + str(len) + " is outside [0, max_seq_len " +
                       str(w.max_seq_len) + "]");
    const int32_t* row = w.block_table + uint64_t(b) * w.table_stride;
    if (w.table_format == KVC_TABLE_CSR) {
      const int32_t begin = w.indptr[b], end = w.indptr[b + 1];
      const uint64_t need = blocks_for(uint64_t(len), T);
      if (end < begin || uint64_t(end - begin) < need)
        invalid_argument("indptr[" + str(b) + "..] = [" + str(begin) + ", " + str(end) +
                         ") holds fewer than the " + str(need) + " blocks seq_lens[" + str(b) +
                         "] = " + str(len) + " spans");
      row = w.block_table + begin;
    }
    // Only the blocks the window reaches are read, so only they must be valid.
    const uint32_t first = (w.window != 0 && uint32_t(len) > w.window) ? (len - w.window) / T : 0;
    const uint64_t end_block = blocks_for(uint64_t(len), T);
    for (uint64_t j = first; j < end_block; ++j) {
      const int32_t id = row[j];
      if (id < 0 || uint64_t(id) >= kv.num_blocks)
        invalid_argument("block table entry " + str(j) + " of sequence " + str(b) + " is " +
                         str(id) + ", outside [0, " + str(kv.num_blocks) + ")");
    }
  }
}

void check_prefill_shape(const PrefillWork& w) {
  const LayerSlabs& kv = w.kv;
  if (kv.head_dim != 64 && kv.head_dim != 128 && kv.head_dim != 256)
    fail(KVC_ERR_UNSUPPORTED, "prefill attention supports head_dim 64, 128 or 256; layer " +
                                  str(kv.layer) + " has head_dim " + str(kv.head_dim));
  if (w.q_heads == 0 || w.q_heads % kv.kv_heads != 0)
    invalid_argument("q_heads must be a positive multiple of the layer's kv_heads (" +
                     str(kv.kv_heads) + "), got " + str(w.q_heads));
  const bool q_ok = is_fp8(kv.dtype)
                        ? (w.q_dtype == KVC_DTYPE_F16 || w.q_dtype == KVC_DTYPE_BF16)
                        : w.q_dtype == kv.dtype;
  if (!q_ok)
    invalid_argument("q_dtype " + dtype_str(w.q_dtype) + " does not fit a " + dtype_str(kv.dtype) +
                     " cache (it must equal the cache dtype; an fp8_e4m3 cache takes f16 or "
                     "bf16 queries)");
  if (w.table_format != KVC_TABLE_PADDED && w.table_format != KVC_TABLE_CSR)
    invalid_argument("table_format must be KVC_TABLE_PADDED (1) or KVC_TABLE_CSR (2), got " +
                     str(w.table_format));
  if (w.total_q > (1u << 30)) invalid_argument("total_q must be <= 2^30, got " + str(w.total_q));
  if (w.batch == 0) return;
  if (w.max_kv_len == 0) invalid_argument("max_kv_len must be > 0 when batch > 0");
  if (w.max_kv_len > (1u << 30))
    invalid_argument("max_kv_len must be <= 2^30, got " + str(w.max_kv_len));
  if (w.table_format == KVC_TABLE_PADDED) {
    const uint64_t need = blocks_for(w.max_kv_len, kv.tokens_per_block);
    if (w.table_stride < need)
      invalid_argument("table_stride (" + str(w.table_stride) + ") is less than the " +
                       str(need) + " blocks that max_kv_len " + str(w.max_kv_len) +
                       " spans at " + str(kv.tokens_per_block) + " tokens per block");
  } else if (w.table_stride != 0) {
    invalid_argument("table_stride must be 0 for KVC_TABLE_CSR, got " + str(w.table_stride));
  }
}

void check_prefill_args(const PrefillWork& w) {
  check_prefill_shape(w);
  const LayerSlabs& kv = w.kv;
  if (!std::isfinite(w.softmax_scale))
    invalid_argument("softmax_scale must be finite, got " + str(w.softmax_scale));
  if (!(std::isfinite(w.soft_cap) && w.soft_cap >= 0.0f))
    invalid_argument("logits_soft_cap must be finite and >= 0 (0 = none), got " +
                     str(w.soft_cap));
  if (is_fp8(kv.dtype)) {
    check_scale(w.k_scale, "k_scale");
    check_scale(w.v_scale, "v_scale");
  }
  if (w.batch == 0) {
    if (w.total_q != 0) invalid_argument("total_q must be 0 when batch is 0, got " + str(w.total_q));
    return;
  }
  require_ptr(w.qo_indptr, "qo_indptr");
  require_ptr(w.kv_lens, "kv_lens");
  require_ptr(w.block_table, "block_table");
  if (w.table_format == KVC_TABLE_PADDED) {
    if (w.indptr != nullptr) invalid_argument("indptr must be NULL for KVC_TABLE_PADDED");
  } else {
    require_ptr(w.indptr, "indptr");
  }
  if (w.total_q > 0) {
    require_ptr(w.query, "query");
    require_ptr(w.out, "out");
  }
  // The host arrays: a ragged batch FlashInfer's way.
  if (w.qo_indptr[0] != 0) invalid_argument("qo_indptr[0] must be 0, got " + str(w.qo_indptr[0]));
  for (uint32_t b = 0; b < w.batch; ++b) {
    const int32_t lo = w.qo_indptr[b], hi = w.qo_indptr[b + 1];
    if (hi < lo)
      invalid_argument("qo_indptr must not decrease: qo_indptr[" + str(b + 1) + "] = " + str(hi) +
                       " < qo_indptr[" + str(b) + "] = " + str(lo));
    const int32_t len = w.kv_lens[b];
    if (len < 0 || uint32_t(len) > w.max_kv_len)
      invalid_argument("kv_lens[" + str(b) + "] = " + str(len) + " is outside [0, max_kv_len " +
                       str(w.max_kv_len) + "]");
    if (hi - lo > len)
      invalid_argument("sequence " + str(b) + " has q_len " + str(hi - lo) +
                       " (qo_indptr) above its kv_len " + str(len) +
                       " (kv_lens counts the new tokens too)");
  }
  if (uint32_t(w.qo_indptr[w.batch]) != w.total_q)
    invalid_argument("qo_indptr[batch] = " + str(w.qo_indptr[w.batch]) +
                     " does not match total_q = " + str(w.total_q));
}

void check_prefill_tables(const PrefillWork& w) {
  const LayerSlabs& kv = w.kv;
  const uint32_t T = kv.tokens_per_block;
  if (w.table_format == KVC_TABLE_CSR && w.batch > 0 && w.indptr[0] != 0)
    invalid_argument("indptr[0] must be 0, got " + str(w.indptr[0]));
  for (uint32_t b = 0; b < w.batch; ++b) {
    const uint32_t q_len = uint32_t(w.qo_indptr[b + 1] - w.qo_indptr[b]);
    const uint32_t len = uint32_t(w.kv_lens[b]);
    const int32_t* row = w.block_table + uint64_t(b) * w.table_stride;
    const uint64_t end_block = blocks_for(len, T);
    if (w.table_format == KVC_TABLE_CSR) {
      const int32_t begin = w.indptr[b], end = w.indptr[b + 1];
      if (end < begin || uint64_t(end - begin) < end_block)
        invalid_argument("indptr[" + str(b) + "..] = [" + str(begin) + ", " + str(end) +
                         ") holds fewer than the " + str(end_block) + " blocks kv_lens[" +
                         str(b) + "] = " + str(len) + " spans");
      row = w.block_table + begin;
    }
    if (q_len == 0) continue;  // nothing is read
    // Only the blocks the first query's window reaches are read.
    const uint32_t first_pos = len - q_len;
    const uint32_t lo = (w.window != 0 && first_pos + 1 > w.window) ? first_pos + 1 - w.window : 0;
    for (uint64_t j = lo / T; j < end_block; ++j) {
      const int32_t id = row[j];
      if (id < 0 || uint64_t(id) >= kv.num_blocks)
        invalid_argument("block table entry " + str(j) + " of sequence " + str(b) + " is " +
                         str(id) + ", outside [0, " + str(kv.num_blocks) + ")");
    }
  }
}

void check_block_copies(const BlockCopy* copies, size_t count, uint64_t num_blocks) {
  std::vector<uint32_t> dsts;
  dsts.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    const BlockCopy& c = copies[i];
    if (c.src >= num_blocks)
      invalid_argument("src[" + str(uint64_t(i)) + "] = " + str(int64_t(int32_t(c.src))) +
                       " is outside [0, " + str(num_blocks) + ")");
    if (c.dst >= num_blocks)
      invalid_argument("dst[" + str(uint64_t(i)) + "] = " + str(int64_t(int32_t(c.dst))) +
                       " is outside [0, " + str(num_blocks) + ")");
    dsts.push_back(c.dst);
  }
  std::sort(dsts.begin(), dsts.end());
  const auto dup = std::adjacent_find(dsts.begin(), dsts.end());
  if (dup != dsts.end())
    invalid_argument("block " + str(*dup) + " is the destination of more than one copy");
  for (size_t i = 0; i < count; ++i) {
    if (std::binary_search(dsts.begin(), dsts.end(), copies[i].src))
      invalid_argument("block " + str(copies[i].src) + " is both the source of copy " +
                       str(uint64_t(i)) + " and the destination of a copy in the same call");
  }
}

}  // namespace kvc
