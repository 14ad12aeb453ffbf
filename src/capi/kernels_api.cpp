// Kernel shims: resolve the layer or group to its place in a pool, check the
// arguments on the host, and hand the work to the cache's Device. Kernels
// only read the cache's shape, so they do not take the cache lock.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backend/kernel_checks.h"
#include "capi/guard.h"
#include "capi/cache_access.h"
#include "capi/handles.h"
#include "kvcache/kernels.h"

using kvc::capi::guarded;
using kvc::capi::read_sized;
using kvc::capi::require;

namespace {

// Resolves the call; `shape_only` checks what the workspace size needs and
// no pointers.
kvc::DecodeWork decode_work_of(const kvc::Cache& c, const kvc_decode_args_t* args,
                               bool shape_only) {
  static const kvc_decode_args_t defaults = KVC_DECODE_ARGS_INIT;
  const kvc_decode_args_t a = read_sized(args, defaults, "args");
  kvc::DecodeWork w;
  w.kv = c.layer_view(a.layer, a.rank);
  w.batch = a.batch;
  w.q_heads = a.q_heads;
  w.q_dtype = a.q_dtype;
  w.table_format = a.table_format;
  w.query = a.query;
  w.out = a.out;
  w.seq_lens = a.seq_lens;
  w.block_table = a.block_table;
  w.indptr = a.indptr;
  w.table_stride = a.table_stride;
  w.max_seq_len = a.max_seq_len;
  w.window = a.window != 0 ? a.window : w.kv.window;
  w.softmax_scale =
      a.softmax_scale != 0.0f ? a.softmax_scale : 1.0f / std::sqrt(float(w.kv.head_dim));
  w.k_scale = a.k_scale;
  w.v_scale = a.v_scale;
  w.workspace = a.workspace;
  w.workspace_bytes = a.workspace_bytes;
  if (shape_only)
    kvc::check_decode_shape(w);
  else
    kvc::check_decode_args(w);
  return w;
}

kvc::StoreKvWork store_work_of(const kvc::Cache& c, const kvc_store_args_t* args) {
  static const kvc_store_args_t defaults = KVC_STORE_ARGS_INIT;
  const kvc_store_args_t a = read_sized(args, defaults, "args");
  kvc::StoreKvWork w;
  w.kv = c.layer_view(a.layer, a.rank);
  w.num_tokens = a.num_tokens;
  w.src_dtype = a.src_dtype;
  w.key = a.key;
  w.value = a.value;
  w.slot_mapping = a.slot_mapping;
  w.k_scale = a.k_scale;
  w.v_scale = a.v_scale;
  return w;
}

kvc::PrefillWork prefill_work_of(const kvc::Cache& c, const kvc_prefill_args_t* args,
                                 bool shape_only) {
  static const kvc_prefill_args_t defaults = KVC_PREFILL_ARGS_INIT;
  const kvc_prefill_args_t a = read_sized(args, defaults, "args");
  kvc::PrefillWork w;
  w.kv = c.layer_view(a.layer, a.rank);
  w.batch = a.batch;
  w.total_q = a.total_q;
  w.q_heads = a.q_heads;
  w.q_dtype = a.q_dtype;
  w.table_format = a.table_format;
  w.query = a.query;
  w.out = a.out;
  w.lse = a.lse;
  w.qo_indptr = a.qo_indptr;
  w.kv_lens = a.kv_lens;
  w.block_table = a.block_table;
  w.indptr = a.indptr;
  w.table_stride = a.table_stride;
  w.max_kv_len = a.max_kv_len;
  w.window = a.window != 0 ? a.window : w.kv.window;
  w.softmax_scale =
      a.softmax_scale != 0.0f ? a.softmax_scale : 1.0f / std::sqrt(float(w.kv.head_dim));
  w.soft_cap = a.logits_soft_cap;
  w.k_scale = a.k_scale;
  w.v_scale = a.v_scale;
  w.workspace = a.workspace;
  w.workspace_bytes = a.workspace_bytes;
  if (shape_only)
    kvc::check_prefill_shape(w);
  else
    kvc::check_prefill_args(w);
  return w;
}

}  // namespace

extern "C" {

KVC_API void kvc_prefill_args_init(kvc_prefill_args_t* args) {
  const kvc_prefill_args_t init = KVC_PREFILL_ARGS_INIT;
  if (args != nullptr) *args = init;
}

KVC_API void kvc_store_args_init(kvc_store_args_t* args) {
  const kvc_store_args_t init = KVC_STORE_ARGS_INIT;
  if (args != nullptr) *args = init;
}

// Out of line: with the rank appended the struct's copy is large enough
// that the compiler moved `args` out of its argument register, which the
// ABI checker reads in the debug info as a changed calling convention.
[[gnu::noinline]] static void fill_decode_args(kvc_decode_args_t* args) {
  static const kvc_decode_args_t init = KVC_DECODE_ARGS_INIT;
  std::memcpy(args, &init, sizeof init);
}

KVC_API void kvc_decode_args_init(kvc_decode_args_t* args) {
  if (args != nullptr) fill_decode_args(args);
}

KVC_API void kvc_store_strides_init(kvc_store_strides_t* strides) {
  const kvc_store_strides_t init = KVC_STORE_STRIDES_INIT;
  if (strides != nullptr) *strides = init;
}

KVC_API kvc_status_t kvc_store_kv(kvc_cache_t* cache, const kvc_store_args_t* args,
                                  void* stream) {
  return guarded([&] {
    kvc::Cache& c = kvc::capi::cache_of(cache);
    kvc::StoreKvWork w = store_work_of(c, args);
    w.set_contiguous_source();
    kvc::check_store_args(w);
    if (w.num_tokens == 0) return;
    c.device(w.kv.rank).store_kv(w, stream);
  });
}

KVC_API kvc_status_t kvc_store_kv_strided(kvc_cache_t* cache, const kvc_store_args_t* args,
                                          const kvc_store_strides_t* strides, void* stream) {
  return guarded([&] {
    kvc::Cache& c = kvc::capi::cache_of(cache);
    kvc::StoreKvWork w = store_work_of(c, args);
    static const kvc_store_strides_t no_strides = KVC_STORE_STRIDES_INIT;
    const kvc_store_strides_t s = read_sized(strides, no_strides, "strides");
    w.seq_len = s.seq_len != 0 ? s.seq_len : w.num_tokens;
    if (w.num_tokens % (w.seq_len != 0 ? w.seq_len : 1) != 0)
      kvc::invalid_argument("num_tokens (" + std::to_string(w.num_tokens) +
                            ") must be a multiple of strides->seq_len (" +
                            std::to_string(w.seq_len) + ")");
    const int64_t given[2][3] = {
        {s.key_seq_stride, s.key_token_stride, s.key_head_stride},
        {s.value_seq_stride, s.value_token_stride, s.value_head_stride}};
    std::memcpy(w.src_strides, given, sizeof given);
    kvc::check_store_args(w);
    if (w.num_tokens == 0) return;
    c.device(w.kv.rank).store_kv(w, stream);
  });
}

KVC_API kvc_status_t kvc_copy_blocks(kvc_cache_t* cache, uint32_t group, const int32_t* src,
                                     const int32_t* dst, const uint32_t* num_tokens,
                                     uint32_t count, void* stream) {
  return guarded([&] {
    kvc::Cache& c = kvc::capi::cache_of(cache);
    const auto& groups = c.grouping().groups;
    if (group >= groups.size())
      kvc::invalid_argument("group must be < num_groups (" + std::to_string(groups.size()) +
                            "), got " + std::to_string(group));
    if (count == 0) return;
    require(src, "src");
    require(dst, "dst");
    const kvc::LayerGroup& g = groups[group];
    const kvc::PoolMemory& pool = c.pool(g.pool);  // every rank's count is equal
    std::vector<kvc::BlockCopy> copies(count);
    for (uint32_t i = 0; i < count; ++i) {
      copies[i].src = uint32_t(src[i]);
      copies[i].dst = uint32_t(dst[i]);
      const uint32_t n = num_tokens != nullptr ? num_tokens[i] : g.geometry.tokens_per_block;
      copies[i].num_tokens = n < g.geometry.tokens_per_block ? n : g.geometry.tokens_per_block;
    }
    kvc::check_block_copies(copies.data(), copies.size(), pool.num_blocks());
    c.ranks().copy_blocks(g.pool, g.geometry, copies.data(), copies.size(), stream);
  });
}

KVC_API kvc_status_t kvc_decode_workspace_size(const kvc_cache_t* cache,
                                               const kvc_decode_args_t* args, uint64_t* bytes) {
  return guarded([&] {
    const kvc::Cache& c = kvc::capi::cache_of(cache);
    require(bytes, "bytes");
    const kvc::DecodeWork w = decode_work_of(c, args, true);
    *bytes = c.device(w.kv.rank).decode_workspace_bytes(w);
  });
}

KVC_API kvc_status_t kvc_decode_attention(kvc_cache_t* cache, const kvc_decode_args_t* args,
                                          void* stream) {
  return guarded([&] {
    kvc::Cache& c = kvc::capi::cache_of(cache);
    const kvc::DecodeWork w = decode_work_of(c, args, false);
    if (w.batch == 0) return;
    if (w.workspace == nullptr && w.workspace_bytes != 0)
      kvc::invalid_argument("workspace is NULL but workspace_bytes is " +
                            std::to_string(w.workspace_bytes));
    const uint64_t need = c.device(w.kv.rank).decode_workspace_bytes(w);
    if (w.workspace_bytes < need)
      kvc::fail(KVC_ERR_BUFFER_TOO_SMALL,
                "workspace_bytes (" + std::to_string(w.workspace_bytes) + ") is less than the " +
                    std::to_string(need) + " bytes this call needs (batch " +
                    std::to_string(w.batch) + ", max_seq_len " + std::to_string(w.max_seq_len) +
                    "); see kvc_decode_workspace_size()");
    c.device(w.kv.rank).decode_attention(w, stream);
  });
}

KVC_API kvc_status_t kvc_prefill_workspace_size(const kvc_cache_t* cache,
                                                const kvc_prefill_args_t* args, uint64_t* bytes) {
  return guarded([&] {
    const kvc::Cache& c = kvc::capi::cache_of(cache);
    require(bytes, "bytes");
    const kvc::PrefillWork w = prefill_work_of(c, args, true);
    *bytes = c.device(w.kv.rank).prefill_workspace_bytes(w);
  });
}

KVC_API kvc_status_t kvc_prefill_attention(kvc_cache_t* cache, const kvc_prefill_args_t* args,
                                           void* stream) {
  return guarded([&] {
    kvc::Cache& c = kvc::capi::cache_of(cache);
    const kvc::PrefillWork w = prefill_work_of(c, args, false);
    if (w.total_q == 0) return;
    if (w.workspace == nullptr && w.workspace_bytes != 0)
      kvc::invalid_argument("workspace is NULL but workspace_bytes is " +
                            std::to_string(w.workspace_bytes));
    const uint64_t need = c.device(w.kv.rank).prefill_workspace_bytes(w);
    if (w.workspace_bytes < need)
      kvc::fail(KVC_ERR_BUFFER_TOO_SMALL,
                "workspace_bytes (" + std::to_string(w.workspace_bytes) + ") is less than the " +
                    std::to_string(need) + " bytes this call needs (batch " +
                    std::to_string(w.batch) + ", total_q " + std::to_string(w.total_q) +
                    ", max_kv_len " + std::to_string(w.max_kv_len) +
                    "); see kvc_prefill_workspace_size()");
    c.device(w.kv.rank).prefill_attention(w, stream);
  });
}

KVC_API kvc_status_t kvc_cache_get_async_error(kvc_cache_t* cache, void* stream,
                                               kvc_status_t* async_error) {
  return guarded([&] {
    kvc::Cache& c = kvc::capi::cache_of(cache);
    require(async_error, "async_error");
    // Every rank's device (rank r > 0 on its default stream); the first
    // error, in rank order, is reported and the others are cleared.
    kvc::AsyncError first;
    for (uint32_t r = 0; r < c.num_ranks(); ++r) {
      kvc::AsyncError e = c.device(r).async_error(kvc::RankPools::stream_of(r, stream));
      if (first.status == KVC_OK && e.status != KVC_OK) {
        if (c.num_ranks() > 1) e.message = "rank " + std::to_string(r) + ": " + e.message;
        first = e;
      }
    }
    *async_error = first.status;
    if (first.status != KVC_OK) kvc::capi::set_last_error(first.message);
  });
}

}  // extern "C"
