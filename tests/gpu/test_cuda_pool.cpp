// The CUDA backend's pool: created once with cudaMalloc on the chosen
// device, sized by the least of free-memory fraction, max_tokens and
// primary_bytes. Skips with the reason when no CUDA device is usable.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <string>

#include "kvcache/kvcache.h"

namespace {

class CudaPool : public ::testing::Test {
 protected:
  void SetUp() override {
    if ((kvc_features() & KVC_FEATURE_CUDA_DEVICE) == 0) {
      GTEST_SKIP() << "no usable CUDA device (kvc_features() = " << kvc_features() << ")";
    }
    ASSERT_EQ(kvc_config_create(&cfg_), KVC_OK);
    ASSERT_EQ(kvc_config_set_num_layers(cfg_, 32), KVC_OK);
    ASSERT_EQ(kvc_config_set_kv_heads(cfg_, 8), KVC_OK);
    ASSERT_EQ(kvc_config_set_head_dim(cfg_, 128), KVC_OK);
    ASSERT_EQ(kvc_config_set_device(cfg_, KVC_DEVICE_CUDA, 0), KVC_OK);
  }
  void TearDown() override { kvc_config_destroy(cfg_); }

  kvc_cache_desc_t create_and_describe() {
    kvc_cache_t* cache = nullptr;
    kvc_cache_desc_t d = KVC_CACHE_DESC_INIT;
    EXPECT_EQ(kvc_cache_create(cfg_, &cache), KVC_OK) << kvc_last_error_message();
    if (cache == nullptr) return d;
    EXPECT_EQ(kvc_cache_describe(cache, &d), KVC_OK);
    kvc_pool_desc_t p = KVC_POOL_DESC_INIT;
    EXPECT_EQ(kvc_cache_describe_pool(cache, 0, &p), KVC_OK);
    cudaPointerAttributes attr{};
    EXPECT_EQ(cudaPointerGetAttributes(&attr, p.base), cudaSuccess);
    EXPECT_EQ(attr.type, cudaMemoryTypeDevice);
    EXPECT_EQ(attr.device, 0);
    // The whole pool is addressable device memory.
    EXPECT_EQ(cudaMemset(p.base, 0x5A, p.bytes), cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    kvc_cache_destroy(cache);
    return d;
  }

  kvc_config_t* cfg_ = nullptr;
};

constexpr uint64_t kBlockBytes = 32ull * 2 * 16 * 8 * 128 * 2;

TEST_F(CudaPool, FractionOfFreeMemoryBoundsThePool) {
  ASSERT_EQ(kvc_config_set_free_gpu_memory_fraction(cfg_, 0.25), KVC_OK);
  const kvc_cache_desc_t d = create_and_describe();
  EXPECT_EQ(d.device_kind, KVC_DEVICE_CUDA);
  ASSERT_GT(d.device_free_bytes, 0u);
  EXPECT_GE(d.device_total_bytes, d.device_free_bytes);
  EXPECT_EQ(d.num_blocks, uint64_t(double(d.device_free_bytes) * 0.25) / kBlockBytes);
  EXPECT_EQ(d.primary_bytes, d.num_blocks * kBlockBytes);
}

TEST_F(CudaPool, MaxTokensWinsWhenSmaller) {
  ASSERT_EQ(kvc_config_set_max_tokens(cfg_, 1000), KVC_OK);  // 63 blocks
  const kvc_cache_desc_t d = create_and_describe();
  EXPECT_EQ(d.num_blocks, 63u);
  EXPECT_EQ(d.token_capacity, 63u * 16);
}

TEST_F(CudaPool, PrimaryBytesWinsWhenSmaller) {
  ASSERT_EQ(kvc_config_set_max_tokens(cfg_, 1u << 20), KVC_OK);
  ASSERT_EQ(kvc_config_set_primary_bytes(cfg_, 10 * kBlockBytes + 1), KVC_OK);
  const kvc_cache_desc_t d = create_and_describe();
  EXPECT_EQ(d.num_blocks, 10u);
}

TEST_F(CudaPool, MissingOrdinalIsADeviceError) {
  int n = 0;
  ASSERT_EQ(cudaGetDeviceCount(&n), cudaSuccess);
  ASSERT_EQ(kvc_config_set_device(cfg_, KVC_DEVICE_CUDA, n), KVC_OK);
  ASSERT_EQ(kvc_config_set_max_tokens(cfg_, 1000), KVC_OK);
  kvc_cache_t* cache = nullptr;
  EXPECT_EQ(kvc_cache_create(cfg_, &cache), KVC_ERR_DEVICE);
  EXPECT_EQ(cache, nullptr);
  EXPECT_NE(std::string(kvc_last_error_message()).find("CUDA device(s) are present"),
            std::string::npos)
      << kvc_last_error_message();
}

}  // namespace
