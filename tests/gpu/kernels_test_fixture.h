// The fixture of the CUDA kernel tests (test_kernels_gpu.cpp: decode;
// test_store_kv_gpu.cpp: store and block copies): the same cache on the CPU
// and on cuda:0, fed the same random inputs. A named namespace, not an
// anonymous one: GoogleTest requires one fixture type per test suite across
// translation units.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/numeric.h"
#include "cuda/cuda_kernels.h"
#include "kvcache/kvcache.h"

namespace kvc_kernels_test {
#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call

struct DeviceBuffer {
  void* ptr = nullptr;
  size_t bytes = 0;
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t n) : bytes(n) {
    if (n != 0 && cudaMalloc(&ptr, n) != cudaSuccess) ptr = nullptr;
  }
  DeviceBuffer(const void* host, size_t n) : DeviceBuffer(n) {
    if (ptr != nullptr) cudaMemcpy(ptr, host, n, cudaMemcpyHostToDevice);
  }
  ~DeviceBuffer() { cudaFree(ptr); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  template <class T>
  T* as() const { return static_cast<T*>(ptr); }
};

inline size_t elem_size(kvc_dtype_t d) {
  return d == KVC_DTYPE_F32 ? 4 : d == KVC_DTYPE_FP8_E4M3 ? 1 : 2;
}

inline const char* dtype_str(kvc_dtype_t d) {
  switch (d) {
    case KVC_DTYPE_F32: return "f32";
    case KVC_DTYPE_F16: return "f16";
    case KVC_DTYPE_BF16: return "bf16";
    default: return "fp8";
  }
}

struct Shape {
  kvc_dtype_t dtype = KVC_DTYPE_BF16;
  kvc_layout_t layout = KVC_LAYOUT_NHD;
  uint32_t layers = 2;
  uint32_t kv_heads = 2;
  uint32_t head_dim = 128;
  uint32_t tokens_per_block = 16;
  uint32_t kv_factor = 2;
  std::vector<uint32_t> windows;
  uint64_t max_tokens = 4096;

  std::string str() const {
    return std::string(dtype_str(dtype)) + (layout == KVC_LAYOUT_NHD ? " NHD" : " HND") +
           " heads " + std::to_string(kv_heads) + " dim " + std::to_string(head_dim) + " T " +
           std::to_string(tokens_per_block) + " kvf " + std::to_string(kv_factor);
  }
};

// The same cache on both backends; the GPU pool has the CPU pool's geometry.
struct CachePair {
  kvc_cache_t* cpu = nullptr;
  kvc_cache_t* gpu = nullptr;
  kvc_pool_desc_t cpu_pool = KVC_POOL_DESC_INIT;
  kvc_pool_desc_t gpu_pool = KVC_POOL_DESC_INIT;
  cudaStream_t stream = nullptr;
  ~CachePair() {
    kvc_cache_destroy(cpu);
    kvc_cache_destroy(gpu);
    if (stream != nullptr) cudaStreamDestroy(stream);
  }
};

inline kvc_cache_t* make_cache(const Shape& s, kvc_device_kind_t kind) {
  kvc_config_t* c = nullptr;
  kvc_config_create(&c);
  kvc_config_set_num_layers(c, s.layers);
  kvc_config_set_kv_heads(c, s.kv_heads);
  kvc_config_set_head_dim(c, s.head_dim);
  kvc_config_set_dtype(c, s.dtype);
  kvc_config_set_layout(c, s.layout);
  kvc_config_set_kv_factor(c, s.kv_factor);
  kvc_config_set_tokens_per_block(c, s.tokens_per_block);
  kvc_config_set_max_tokens(c, s.max_tokens);
  if (!s.windows.empty()) kvc_config_set_attention_windows(c, s.windows.data(), s.windows.size());
  kvc_config_set_device(c, kind, 0);
  kvc_cache_t* cache = nullptr;
  const kvc_status_t st = kvc_cache_create(c, &cache);
  kvc_config_destroy(c);
  EXPECT_EQ(st, KVC_OK) << kvc_last_error_message();
  return cache;
}

class Kernels : public ::testing::Test {
 public:
  void SetUp() override {
    if ((kvc_features() & KVC_FEATURE_CUDA_DEVICE) == 0)
      GTEST_SKIP() << "no usable CUDA device (kvc_features() = " << kvc_features() << ")";
  }

  void make_pair(const Shape& s, CachePair& p) {
    p.cpu = make_cache(s, KVC_DEVICE_CPU);
    p.gpu = make_cache(s, KVC_DEVICE_CUDA);
    ASSERT_NE(p.cpu, nullptr);
    ASSERT_NE(p.gpu, nullptr);
    ASSERT_EQ(kvc_cache_describe_pool(p.cpu, 0, &p.cpu_pool), KVC_OK);
    ASSERT_EQ(kvc_cache_describe_pool(p.gpu, 0, &p.gpu_pool), KVC_OK);
    ASSERT_EQ(p.cpu_pool.bytes, p.gpu_pool.bytes);
    CUDA_OK(cudaStreamCreateWithFlags(&p.stream, cudaStreamNonBlocking));
  }

  // The GPU pool equals the CPU pool byte for byte.
  void expect_pools_equal(const CachePair& p, const std::string& what) {
    std::vector<unsigned char> host(p.gpu_pool.bytes);
    CUDA_OK(cudaStreamSynchronize(p.stream));
    CUDA_OK(cudaMemcpy(host.data(), p.gpu_pool.base, host.size(), cudaMemcpyDeviceToHost));
    const auto* cpu = static_cast<const unsigned char*>(p.cpu_pool.base);
    const auto diff = std::mismatch(host.begin(), host.end(), cpu);
    ASSERT_TRUE(diff.first == host.end())
        << what << ": first difference at pool byte " << (diff.first - host.begin()) << " of "
        << host.size() << ": gpu " << int(*diff.first) << ", cpu " << int(*diff.second);
  }

  void expect_no_async_error(kvc_cache_t* cache, cudaStream_t stream) {
    kvc_status_t async = -1;
    ASSERT_EQ(kvc_cache_get_async_error(cache, stream, &async), KVC_OK) << kvc_last_error_message();
    EXPECT_EQ(async, KVC_OK) << kvc_last_error_message();
  }

  std::mt19937_64 rng{std::random_device{}()};
};

// Random values of `dtype` in [-range, range] (finite; fp8 never NaN).
inline std::vector<unsigned char> random_values(std::mt19937_64& rng, kvc_dtype_t dtype, size_t n,
                                         float range) {
  std::uniform_real_distribution<float> dist(-range, range);
  std::vector<unsigned char> out(n * elem_size(dtype));
  for (size_t i = 0; i < n; ++i) kvc::store_f32(out.data(), dtype, i, dist(rng));
  return out;
}


}  // namespace kvc_kernels_test
