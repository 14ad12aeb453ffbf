// kvc_store_kv_strided on cuda:0 against the CPU reference (itself checked
// against kvc_store_kv of the contiguous copy in tests/c): two caches of one
// shape, the same strided sources (a [batch][kv_heads][n][head_dim] slice of
// a longer buffer, a fused projection row, reversed tokens, an origin
// misaligned for 16-byte vectors), pools equal byte for byte. Skips with the
// reason when no CUDA device is usable.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/numeric.h"
#include "kvcache/kvcache.h"

namespace {

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call

size_t elem_size(kvc_dtype_t d) {
  return d == KVC_DTYPE_F32 ? 4 : d == KVC_DTYPE_FP8_E4M3 ? 1 : 2;
}

struct Shape {
  kvc_dtype_t dtype = KVC_DTYPE_BF16;
  kvc_layout_t layout = KVC_LAYOUT_NHD;
  uint32_t kv_heads = 4;
  uint32_t head_dim = 128;
  uint32_t kv_factor = 2;
};

kvc_cache_t* make_cache(const Shape& s, kvc_device_kind_t kind) {
  kvc_config_t* c = nullptr;
  kvc_config_create(&c);
  kvc_config_set_num_layers(c, 2);
  kvc_config_set_kv_heads(c, s.kv_heads);
  kvc_config_set_head_dim(c, s.head_dim);
  kvc_config_set_dtype(c, s.dtype);
  kvc_config_set_layout(c, s.layout);
  kvc_config_set_kv_factor(c, s.kv_factor);
  kvc_config_set_tokens_per_block(c, 16);
  kvc_config_set_max_tokens(c, 1024);
  kvc_config_set_device(c, kind, 0);
  kvc_cache_t* cache = nullptr;
  const kvc_status_t st = kvc_cache_create(c, &cache);
  kvc_config_destroy(c);
  EXPECT_EQ(st, KVC_OK) << kvc_last_error_message();
  return cache;
}

// A source tensor: `elems` elements in one buffer, (0, 0, 0) at element
// `origin`, strides (seq, token, head) in elements.
struct Source {
  size_t elems = 0;
  int64_t origin = 0;
  int64_t stride[3] = {0, 0, 0};
};

class StoreStrided : public ::testing::Test {
 public:
  void SetUp() override {
    if ((kvc_features() & KVC_FEATURE_CUDA_DEVICE) == 0)
      GTEST_SKIP() << "no usable CUDA device (kvc_features() = " << kvc_features() << ")";
  }

  // Stores `batch` x `seq_len` tokens from key/value through strides on
  // both backends and compares the pools.
  void run(const Shape& s, kvc_dtype_t src_dtype, uint32_t batch, uint32_t seq_len,
           const Source& key, const Source& value, const std::string& what) {
    SCOPED_TRACE(what);
    kvc_cache_t* cpu = make_cache(s, KVC_DEVICE_CPU);
    kvc_cache_t* gpu = make_cache(s, KVC_DEVICE_CUDA);
    ASSERT_NE(cpu, nullptr);
    ASSERT_NE(gpu, nullptr);
    kvc_pool_desc_t cp = KVC_POOL_DESC_INIT, gp = KVC_POOL_DESC_INIT;
    ASSERT_EQ(kvc_cache_describe_pool(cpu, 0, &cp), KVC_OK);
    ASSERT_EQ(kvc_cache_describe_pool(gpu, 0, &gp), KVC_OK);
    ASSERT_EQ(cp.bytes, gp.bytes);
    std::memset(cp.base, 0xA5, cp.bytes);
    CUDA_OK(cudaMemset(gp.base, 0xA5, gp.bytes));

    const uint32_t n = batch * seq_len;
    const uint64_t slots = cp.num_blocks * 16;
    std::vector<int64_t> all(slots);
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), rng);
    std::vector<int64_t> slot_mapping(all.begin(), all.begin() + n);
    for (uint32_t i = 2; i < n; i += 9) slot_mapping[i] = -1;

    const size_t es = elem_size(src_dtype);
    std::vector<unsigned char> hk(key.elems * es), hv(value.elems * es);
    std::uniform_real_distribution<float> dist(-600.0f, 600.0f);
    for (std::vector<unsigned char>* h : {&hk, &hv}) {
      if (src_dtype == s.dtype) {
        for (auto& b : *h) b = (unsigned char)rng();  // a byte copy: any bits
      } else {
        for (size_t i = 0; i < h->size() / es; ++i) kvc::store_f32(h->data(), src_dtype, i, dist(rng));
      }
    }
    void *dk = nullptr, *dv = nullptr, *ds = nullptr;
    CUDA_OK(cudaMalloc(&dk, hk.size()));
    CUDA_OK(cudaMalloc(&dv, hv.size()));
    CUDA_OK(cudaMalloc(&ds, n * sizeof(int64_t)));
    CUDA_OK(cudaMemcpy(dk, hk.data(), hk.size(), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(dv, hv.data(), hv.size(), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(ds, slot_mapping.data(), n * sizeof(int64_t), cudaMemcpyHostToDevice));

    kvc_store_strides_t st = KVC_STORE_STRIDES_INIT;
    st.seq_len = seq_len;
    st.key_seq_stride = key.stride[0];
    st.key_token_stride = key.stride[1];
    st.key_head_stride = key.stride[2];
    st.value_seq_stride = value.stride[0];
    st.value_token_stride = value.stride[1];
    st.value_head_stride = value.stride[2];
    kvc_store_args_t a = KVC_STORE_ARGS_INIT;
    a.layer = 1;
    a.num_tokens = n;
    a.src_dtype = src_dtype;
    a.k_scale = 1.5f;
    a.v_scale = 0.25f;
    a.key = hk.data() + key.origin * int64_t(es);
    a.value = s.kv_factor == 2 ? hv.data() + value.origin * int64_t(es) : nullptr;
    a.slot_mapping = slot_mapping.data();
    ASSERT_EQ(kvc_store_kv_strided(cpu, &a, &st, nullptr), KVC_OK) << kvc_last_error_message();
    a.key = static_cast<unsigned char*>(dk) + key.origin * int64_t(es);
    a.value = s.kv_factor == 2 ? static_cast<unsigned char*>(dv) + value.origin * int64_t(es) : nullptr;
    a.slot_mapping = static_cast<int64_t*>(ds);
    ASSERT_EQ(kvc_store_kv_strided(gpu, &a, &st, nullptr), KVC_OK) << kvc_last_error_message();
    kvc_status_t async = -1;
    ASSERT_EQ(kvc_cache_get_async_error(gpu, nullptr, &async), KVC_OK);
    EXPECT_EQ(async, KVC_OK) << kvc_last_error_message();

    std::vector<unsigned char> host(gp.bytes);
    CUDA_OK(cudaMemcpy(host.data(), gp.base, host.size(), cudaMemcpyDeviceToHost));
    const auto* c = static_cast<const unsigned char*>(cp.base);
    const auto diff = std::mismatch(host.begin(), host.end(), c);
    EXPECT_TRUE(diff.first == host.end())
        << "first difference at pool byte " << (diff.first - host.begin()) << " of " << host.size();
    cudaFree(dk);
    cudaFree(dv);
    cudaFree(ds);
    kvc_cache_destroy(cpu);
    kvc_cache_destroy(gpu);
  }

  // [batch][heads][n_alloc][dim], viewed from token `first` on: the layout
  // transformers' K/V have, sliced to one step's tokens.
  static Source bhnd(const Shape& s, uint32_t batch, uint32_t n_alloc, uint32_t first,
                     int64_t shift = 0) {
    Source src;
    src.elems = size_t(batch) * s.kv_heads * n_alloc * s.head_dim + 64;
    src.origin = int64_t(first) * s.head_dim + shift;
    src.stride[0] = int64_t(s.kv_heads) * n_alloc * s.head_dim;
    src.stride[1] = s.head_dim;
    src.stride[2] = int64_t(n_alloc) * s.head_dim;
    return src;
  }

  std::mt19937_64 rng{std::random_device{}()};
};

TEST_F(StoreStrided, BatchHeadsTokensDimMatchesReference) {
  for (kvc_dtype_t d : {KVC_DTYPE_F32, KVC_DTYPE_F16, KVC_DTYPE_BF16, KVC_DTYPE_FP8_E4M3})
    for (kvc_layout_t l : {KVC_LAYOUT_NHD, KVC_LAYOUT_HND}) {
      Shape s;
      s.dtype = d;
      s.layout = l;
      const Source src = bhnd(s, 3, 40, 5);
      run(s, d, 3, 33, src, src, std::string("same dtype ") + std::to_string(d) + " layout " +
                                     std::to_string(l));
    }
}

TEST_F(StoreStrided, QuantizesToFp8AndKvFactor1) {
  Shape s;
  s.dtype = KVC_DTYPE_FP8_E4M3;
  for (kvc_dtype_t src_dtype : {KVC_DTYPE_F32, KVC_DTYPE_F16, KVC_DTYPE_BF16}) {
    const Source src = bhnd(s, 2, 70, 3);
    run(s, src_dtype, 2, 64, src, src, "fp8 from " + std::to_string(src_dtype));
  }
  Shape one;
  one.kv_factor = 1;
  one.layout = KVC_LAYOUT_HND;
  const Source src = bhnd(one, 4, 20, 0);
  run(one, KVC_DTYPE_BF16, 4, 20, src, src, "kv_factor 1");
}

TEST_F(StoreStrided, MisalignedFusedAndReversedSources) {
  Shape s;
  // Origin one element off: 2-byte vectors only.
  const Source odd = bhnd(s, 2, 30, 1, 1);
  run(s, KVC_DTYPE_BF16, 2, 29, odd, odd, "origin shifted by one element");
  // A fused [n][q 8 heads | k 4 | v 4][dim] projection: K and V are views
  // of one buffer with a token stride of 16 heads.
  const uint32_t n = 300, row = 16 * s.head_dim;
  Source k, v;
  k.elems = v.elems = size_t(n) * row;
  k.origin = 8 * int64_t(s.head_dim);
  v.origin = 12 * int64_t(s.head_dim);
  k.stride[1] = v.stride[1] = row;
  k.stride[2] = v.stride[2] = s.head_dim;
  run(s, KVC_DTYPE_BF16, 1, n, k, v, "fused projection rows");
  // Tokens in reverse order (a negative stride), through the fp8 path.
  Shape q;
  q.dtype = KVC_DTYPE_FP8_E4M3;
  Source r = k;
  r.origin = int64_t(n - 1) * row + k.origin;
  r.stride[1] = -int64_t(row);
  run(q, KVC_DTYPE_F16, 1, n, r, v, "reversed tokens, fp8");
}

}  // namespace
