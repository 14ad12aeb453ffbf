// Paged KV resources of different geometries (kvcache/kv_resource.h) on a
// CUDA cache: a layer of bf16 K/V with head dim 128 beside one of fp8-e4m3
// with head dim 64 (own pools). Storing a prompt's K/V through the store
// kernel and reading it back with decode and prefill attention on each
// layer must give exactly the bytes a single-geometry CUDA cache of that
// layer's geometry gives (the kernels' own reference tests are in
// test_kernels_gpu.cpp and test_prefill_gpu.cpp), and the stored K/V in the
// pool must match bit for bit. Skips with the reason when no CUDA device is
// usable.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kvcache/kvcache.h"

namespace {

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call
#define KVC_OK_(call) ASSERT_EQ((call), KVC_OK) << #call << ": " << kvc_last_error_message()

constexpr uint32_t kT = 16;
constexpr uint32_t kTokens = 37;  // two full blocks and a partial one
constexpr uint32_t kQueries = 5;  // prefill rows at the end of the prompt

struct Geometry {
  uint32_t heads, dim;
  kvc_dtype_t dtype;
};
constexpr Geometry kLayers[2] = {{2, 128, KVC_DTYPE_BF16}, {1, 64, KVC_DTYPE_FP8_E4M3}};

kvc_cache_t* create(kvc_config_t* c) {
  kvc_config_set_tokens_per_block(c, kT);
  kvc_config_set_device(c, KVC_DEVICE_CUDA, 0);
  kvc_config_set_max_tokens(c, 512);
  kvc_cache_t* cache = nullptr;
  const kvc_status_t s = kvc_cache_create(c, &cache);
  kvc_config_destroy(c);
  EXPECT_EQ(s, KVC_OK) << kvc_last_error_message();
  return cache;
}

kvc_cache_t* mixed_cache() {
  kvc_config_t* c = nullptr;
  if (kvc_config_create(&c) != KVC_OK) return nullptr;
  for (uint32_t l = 0; l < 2; ++l) {
    kvc_kv_resource_t r = KVC_KV_RESOURCE_INIT;
    r.layers = &l;
    r.num_layers = 1;
    r.kv_heads = kLayers[l].heads;
    r.head_dim = kLayers[l].dim;
    r.dtype = kLayers[l].dtype;
    uint32_t index = 0;
    EXPECT_EQ(kvc_config_add_kv_resource(c, &r, &index), KVC_OK) << kvc_last_error_message();
  }
  return create(c);
}

kvc_cache_t* single_cache(const Geometry& g) {
  kvc_config_t* c = nullptr;
  if (kvc_config_create(&c) != KVC_OK) return nullptr;
  kvc_config_set_num_layers(c, 1);
  kvc_config_set_kv_heads(c, g.heads);
  kvc_config_set_head_dim(c, g.dim);
  kvc_config_set_dtype(c, g.dtype);
  return create(c);
}

template <class T>
T* to_device(const std::vector<T>& host) {
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, host.size() * sizeof(T)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
            cudaSuccess);
  return static_cast<T*>(p);
}

// What one layer's round trip gives: decode and prefill outputs, and the
// stored K/V bytes of every token (read through the layer view).
struct Result {
  std::vector<uint16_t> decode, prefill;
  std::vector<uint8_t> kv;
};

void round_trip(kvc_cache_t* cache, uint32_t layer, const Geometry& g, Result& out) {
  kvc_layer_view_t v;
  kvc_layer_view_init(&v);
  KVC_OK_(kvc_cache_layer_view(cache, layer, &v));
  std::vector<int32_t> tokens(kTokens);
  for (uint32_t i = 0; i < kTokens; ++i) tokens[i] = int32_t(10 + i);
  const uint64_t id = 1;
  KVC_OK_(kvc_sequence_add(cache, id, tokens.data(), kTokens, nullptr, nullptr, nullptr));
  std::vector<int64_t> slots(kTokens);
  size_t ns = 0;
  KVC_OK_(kvc_batch_slot_mapping(cache, v.group, &id, 1, slots.data(), slots.size(), &ns, nullptr));
  ASSERT_EQ(ns, kTokens);
  const size_t elems = size_t(kTokens) * g.heads * g.dim;
  std::vector<uint16_t> k(elems), val(elems);
  for (size_t i = 0; i < elems; ++i) {  // bf16 in [1, 2), signs mixed; fp8 layers quantize
    k[i] = uint16_t(0x3F80u + (i * 7919 % 127)) ^ uint16_t((i & 1) << 15);
    val[i] = uint16_t(0x3F80u + (i * 104729 % 127));
  }
  uint16_t* dk = to_device(k);
  uint16_t* dv = to_device(val);
  int64_t* dslots = to_device(slots);
  kvc_store_args_t a;
  kvc_store_args_init(&a);
  a.layer = layer;
  a.num_tokens = kTokens;
  a.src_dtype = KVC_DTYPE_BF16;
  a.key = dk;
  a.value = dv;
  a.slot_mapping = dslots;
  KVC_OK_(kvc_store_kv(cache, &a, nullptr));

  std::vector<int32_t> blocks(8);
  size_t nb = 0;
  KVC_OK_(kvc_sequence_block_ids(cache, id, v.group, blocks.data(), blocks.size(), &nb));
  blocks.resize(nb);
  // The stored bytes of every token: K then V of each token, through the view.
  const uint32_t elem = g.dtype == KVC_DTYPE_FP8_E4M3 ? 1 : 2;
  out.kv.clear();
  for (uint32_t t = 0; t < kTokens; ++t)
    for (uint32_t kv = 0; kv < 2; ++kv)
      for (uint32_t h = 0; h < g.heads; ++h) {
        const uint64_t off = uint64_t(blocks[t / kT]) * v.block_stride + kv * v.kv_stride +
                             (t % kT) * v.token_stride + h * v.head_stride;
        std::vector<uint8_t> b(size_t(g.dim) * elem);
        CUDA_OK(cudaMemcpy(b.data(), static_cast<const uint8_t*>(v.base) + off, b.size(),
                           cudaMemcpyDeviceToHost));
        out.kv.insert(out.kv.end(), b.begin(), b.end());
      }

  const uint32_t qh = g.heads * 2;
  std::vector<uint16_t> q(size_t(qh) * g.dim);
  for (size_t i = 0; i < q.size(); ++i) q[i] = uint16_t(0x3C00u + (i * 37 % 127));
  const std::vector<int32_t> len{int32_t(kTokens)};
  uint16_t* dq = to_device(q);
  int32_t* dlen = to_device(len);
  int32_t* dblocks = to_device(blocks);
  uint16_t* dout = to_device(std::vector<uint16_t>(q.size(), 0));
  uint64_t ws_bytes = 0;
  kvc_decode_args_t da;
  kvc_decode_args_init(&da);
  da.layer = layer;
  da.batch = 1;
  da.q_heads = qh;
  da.q_dtype = KVC_DTYPE_BF16;
  da.query = dq;
  da.out = dout;
  da.seq_lens = dlen;
  da.block_table = dblocks;
  da.table_stride = uint32_t(nb);
  da.max_seq_len = kTokens;
  KVC_OK_(kvc_decode_workspace_size(cache, &da, &ws_bytes));
  void* ws = nullptr;
  if (ws_bytes > 0) {
    CUDA_OK(cudaMalloc(&ws, ws_bytes));
  }
  da.workspace = ws;
  da.workspace_bytes = ws_bytes;
  KVC_OK_(kvc_decode_attention(cache, &da, nullptr));
  out.decode.assign(q.size(), 0);
  CUDA_OK(cudaMemcpy(out.decode.data(), dout, q.size() * 2, cudaMemcpyDeviceToHost));

  std::vector<uint16_t> pq(size_t(kQueries) * qh * g.dim);
  for (uint32_t r = 0; r < kQueries; ++r)
    for (size_t i = 0; i < q.size(); ++i) pq[r * q.size() + i] = uint16_t(q[i] ^ (r << 3));
  const std::vector<int32_t> qo{0, int32_t(kQueries)};
  uint16_t* dpq = to_device(pq);
  uint16_t* dpout = to_device(std::vector<uint16_t>(pq.size(), 0));
  kvc_prefill_args_t pa;
  kvc_prefill_args_init(&pa);
  pa.layer = layer;
  pa.batch = 1;
  pa.total_q = kQueries;
  pa.q_heads = qh;
  pa.q_dtype = KVC_DTYPE_BF16;
  pa.query = dpq;
  pa.out = dpout;
  pa.qo_indptr = qo.data();  // host arrays on every device (kernels.h)
  pa.kv_lens = len.data();
  pa.block_table = dblocks;
  pa.table_stride = uint32_t(nb);
  pa.max_kv_len = kTokens;
  uint64_t pws_bytes = 0;
  KVC_OK_(kvc_prefill_workspace_size(cache, &pa, &pws_bytes));
  void* pws = nullptr;
  if (pws_bytes > 0) {
    CUDA_OK(cudaMalloc(&pws, pws_bytes));
  }
  pa.workspace = pws;
  pa.workspace_bytes = pws_bytes;
  KVC_OK_(kvc_prefill_attention(cache, &pa, nullptr));
  out.prefill.assign(pq.size(), 0);
  CUDA_OK(cudaMemcpy(out.prefill.data(), dpout, pq.size() * 2, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaDeviceSynchronize());
  for (void* p : {static_cast<void*>(dk), static_cast<void*>(dv), static_cast<void*>(dslots),
                  static_cast<void*>(dq), static_cast<void*>(dlen), static_cast<void*>(dblocks),
                  static_cast<void*>(dout), ws, static_cast<void*>(dpq),
                  static_cast<void*>(dpout), pws})
    if (p != nullptr) {
      CUDA_OK(cudaFree(p));
    }
  KVC_OK_(kvc_sequence_remove(cache, id));
}

TEST(CudaKvResources, MixedGeometryLayersMatchSingleGeometryCachesBitForBit) {
  if ((kvc_features() & KVC_FEATURE_CUDA_DEVICE) == 0)
    GTEST_SKIP() << "no usable CUDA device (kvc_features() = " << kvc_features() << ")";
  for (uint32_t layer = 0; layer < 2; ++layer) {
    SCOPED_TRACE("layer " + std::to_string(layer));
    kvc_cache_t* mixed = mixed_cache();
    ASSERT_NE(mixed, nullptr);
    kvc_kv_resource_desc_t d = KVC_KV_RESOURCE_DESC_INIT;
    KVC_OK_(kvc_cache_describe_kv_resource(mixed, 1, &d));
    EXPECT_EQ(d.managed, false);  // fp8 dim 64 is not resource 0's geometry
    Result m, s;
    round_trip(mixed, layer, kLayers[layer], m);
    KVC_OK_(kvc_cache_check(mixed));
    kvc_cache_destroy(mixed);
    kvc_cache_t* single = single_cache(kLayers[layer]);
    ASSERT_NE(single, nullptr);
    round_trip(single, 0, kLayers[layer], s);
    kvc_cache_destroy(single);
    EXPECT_EQ(m.kv, s.kv);
    EXPECT_EQ(m.decode, s.decode);
    EXPECT_EQ(m.prefill, s.prefill);
    // Not all zero: the kernels wrote.
    bool any = false;
    for (uint16_t x : m.decode) any |= x != 0;
    EXPECT_TRUE(any);
  }
}

}  // namespace
