// The resolved form of a kernel call, handed from the C API to a Device:
// the layer's place in its pool (base pointer, byte strides, capacity) and
// the caller's arguments. Both backends take the same structs, so the CPU
// reference and the CUDA kernels compute the same function of them.
#pragma once

#include <cstdint>
#include <string>

#include "kvcache/config.h"
#include "kvcache/kernels.h"

namespace kvc {

// One layer's K/V in its pool. Element (block b, kv k, token t, head h,
// dim d) is at base + b*block_stride + k*kv_stride + t*token_stride +
// h*head_stride + d*elem_size bytes.
struct LayerSlabs {
  void* base = nullptr;
  uint64_t num_blocks = 0;
  uint64_t block_stride = 0;
  uint64_t kv_stride = 0;
  uint64_t token_stride = 0;
  uint64_t head_stride = 0;
  uint32_t tokens_per_block = 0;
  uint32_t kv_heads = 0;
  uint32_t head_dim = 0;
  uint32_t kv_factor = 0;
  kvc_dtype_t dtype = 0;
  kvc_layout_t layout = 0;
  uint32_t window = 0;  // the layer's configured attention window; 0 = full
  uint32_t layer = 0;
  uint32_t rank = 0;  // tensor parallelism: the rank whose pool `base` is in
  uint64_t num_slots() const { return num_blocks * tokens_per_block; }
};

struct StoreKvWork {
  LayerSlabs kv;
  uint32_t num_tokens = 0;
  kvc_dtype_t src_dtype = 0;
  const void* key = nullptr;
  const void* value = nullptr;
  const int64_t* slot_mapping = nullptr;
  float k_scale = 1.0f;
  float v_scale = 1.0f;
  // Source addressing, in elements of src_dtype (kvc_store_strides_t):
  // token i is token i % seq_len of source sequence i / seq_len, and head h
  // of it starts at element b*stride[0] + t*stride[1] + h*stride[2] of key
  // (src_strides[0]) or value (src_strides[1]). set_contiguous_source()
  // gives kvc_store_kv's [num_tokens][kv_heads][head_dim].
  uint32_t seq_len = 0;
  int64_t src_strides[2][3] = {{0, 0, 0}, {0, 0, 0}};

  void set_contiguous_source() {
    const int64_t head = kv.head_dim, token = int64_t(kv.kv_heads) * kv.head_dim;
    seq_len = num_tokens;
    for (auto& s : src_strides) {
      s[0] = token * num_tokens;
      s[1] = token;
      s[2] = head;
    }
  }
  // Whether the source is laid out as set_contiguous_source() says (the
  // sequence stride does not matter then: one sequence, or back to back).
  bool contiguous_source() const {
    const int64_t head = kv.head_dim, token = int64_t(kv.kv_heads) * kv.head_dim;
    for (uint32_t k = 0; k < kv.kv_factor; ++k) {
      const int64_t* s = src_strides[k];
      if (s[1] != token || s[2] != head) return false;
      if (seq_len != num_tokens && s[0] != token * seq_len) return false;
    }
    return true;
  }
};

struct DecodeWork {
  LayerSlabs kv;
  uint32_t batch = 0;
  uint32_t q_heads = 0;
  kvc_dtype_t q_dtype = 0;
  kvc_table_format_t table_format = KVC_TABLE_PADDED;
  const void* query = nullptr;
  void* out = nullptr;
  const int32_t* seq_lens = nullptr;
  const int32_t* block_table = nullptr;
  const int32_t* indptr = nullptr;
  uint32_t table_stride = 0;
  uint32_t max_seq_len = 0;
  uint32_t window = 0;        // resolved: 0 = full attention
  float softmax_scale = 0.0f;  // resolved: never 0
  float k_scale = 1.0f;
  float v_scale = 1.0f;
  void* workspace = nullptr;
  uint64_t workspace_bytes = 0;
  // The stateful mode's rows (src/stateful): token t of a sequence is at
  // position t of the row its table entry t / tokens_per_block names
  // (base + id*block_stride + t*token_stride), not at row t % tokens_per_block
  // of a block. tokens_per_block is then 1 (a beam table: one entry per
  // position) or 2^31 (one entry per sequence: its own row).
  bool contiguous_rows = false;
};

struct PrefillWork {
  LayerSlabs kv;
  uint32_t batch = 0;
  uint32_t total_q = 0;
  uint32_t q_heads = 0;
  kvc_dtype_t q_dtype = 0;
  kvc_table_format_t table_format = KVC_TABLE_PADDED;
  const void* query = nullptr;
  void* out = nullptr;
  float* lse = nullptr;
  const int32_t* qo_indptr = nullptr;  // host
  const int32_t* kv_lens = nullptr;    // host
  const int32_t* block_table = nullptr;
  const int32_t* indptr = nullptr;
  uint32_t table_stride = 0;
  uint32_t max_kv_len = 0;
  uint32_t window = 0;         // resolved: 0 = full attention
  float softmax_scale = 0.0f;  // resolved: never 0
  float soft_cap = 0.0f;       // 0 = none
  float k_scale = 1.0f;
  float v_scale = 1.0f;
  void* workspace = nullptr;
  uint64_t workspace_bytes = 0;
};

// The first failure of enqueued kernel work (see kvc_cache_get_async_error).
struct AsyncError {
  kvc_status_t status = KVC_OK;
  std::string message;
};

}  // namespace kvc
