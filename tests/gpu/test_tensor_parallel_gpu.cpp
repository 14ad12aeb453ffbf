// Tensor parallelism on 2 and 4 GPUs (kvc_config_set_ranks with CUDA
// ordinals 0..ranks-1): each rank's pools live on its own device, store_kv
// runs on the rank's device with the rank's heads, and every rank's bytes are
// read back bit for bit through reuse with copy on partial reuse, fork, and
// offload and onboard through the host tier. Shapes: 4 kv heads split over 2
// and over 4 ranks, and 2 kv heads replicated over 4 ranks. Black box through
// the C API. A shape skips, printing why, with fewer CUDA devices than ranks.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "kvcache/kvcache.h"

namespace {

constexpr uint32_t kLayers = 2, kDim = 8, kT = 4, kMaxRanks = 4;

struct Shape {
  uint32_t ranks;
  uint32_t heads;
};

#define KVC_OK_(call) ASSERT_EQ((call), KVC_OK) << #call << ": " << kvc_last_error_message()
#define CUDA_OK_(call) ASSERT_EQ((call), cudaSuccess) << #call

uint16_t elem(int32_t token, uint64_t pos, uint32_t layer, uint32_t kv, uint32_t h, uint32_t d) {
  uint32_t x = uint32_t(token) * 2654435761u ^ uint32_t(pos) * 40503u ^ layer * 97u ^ kv * 13u ^
               h * 7u ^ d;
  x ^= x >> 15;
  x *= 2246822519u;
  x ^= x >> 13;
  return uint16_t(0x3C00u | (x & 0x3FFu));
}

class TensorParallelGpu : public ::testing::TestWithParam<Shape> {
 protected:
  const uint32_t kRanks = GetParam().ranks;
  const uint32_t kHeads = GetParam().heads;
  // Heads each rank holds: its share, or one replicated head.
  const uint32_t kPerRank = kHeads >= kRanks ? kHeads / kRanks : 1;

  void SetUp() override {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
    if (n < int(kRanks))
      GTEST_SKIP() << "tensor parallelism over " << kRanks << " ranks needs " << kRanks
                   << " CUDA devices, found " << n;
  }
  void TearDown() override { kvc_cache_destroy(cache_); }

  void open(uint64_t max_tokens, uint64_t host_bytes) {
    kvc_config_t* c = nullptr;
    KVC_OK_(kvc_config_create(&c));
    KVC_OK_(kvc_config_set_num_layers(c, kLayers));
    KVC_OK_(kvc_config_set_kv_heads(c, kHeads));
    KVC_OK_(kvc_config_set_head_dim(c, kDim));
    KVC_OK_(kvc_config_set_dtype(c, KVC_DTYPE_F16));
    KVC_OK_(kvc_config_set_tokens_per_block(c, kT));
    KVC_OK_(kvc_config_set_max_tokens(c, max_tokens));
    KVC_OK_(kvc_config_set_host_cache_bytes(c, host_bytes));
    const int32_t ordinals[kMaxRanks] = {0, 1, 2, 3};
    KVC_OK_(kvc_config_set_ranks(c, KVC_DEVICE_CUDA, ordinals, kRanks));
    KVC_OK_(kvc_cache_create(c, &cache_));
    kvc_config_destroy(c);
    for (uint32_t r = 0; r < kRanks; ++r)
      for (uint32_t l = 0; l < kLayers; ++l) {
        kvc_layer_view_init(&views_[r][l]);
        KVC_OK_(kvc_cache_layer_view_rank(cache_, r, l, &views_[r][l]));
        ASSERT_EQ(views_[r][l].kv_heads, kPerRank);
        // Split: rank r holds heads [r * per, (r + 1) * per); replicated:
        // head r / (ranks / heads).
        const uint32_t first = kHeads >= kRanks ? r * kPerRank : r / (kRanks / kHeads);
        ASSERT_EQ(views_[r][l].first_kv_head, first) << "rank " << r;
        cudaPointerAttributes at{};
        CUDA_OK_(cudaPointerGetAttributes(&at, views_[r][l].base));
        ASSERT_EQ(at.device, int(r)) << "rank " << r << "'s pool is on device " << at.device;
      }
  }

  // Writes the tokens added to `id` since the last call, on every rank from
  // that rank's device memory.
  void write_new(uint64_t id, const std::vector<int32_t>& all) {
    std::vector<int64_t> slots(all.size() + 1);
    size_t n = 0;
    KVC_OK_(kvc_batch_slot_mapping(cache_, 0, &id, 1, slots.data(), slots.size(), &n, nullptr));
    kvc_sequence_desc_t sd = KVC_SEQUENCE_DESC_INIT;
    KVC_OK_(kvc_sequence_describe(cache_, id, &sd));
    const uint64_t first = sd.num_tokens - n;
    if (n == 0) return;
    for (uint32_t r = 0; r < kRanks; ++r) {
      CUDA_OK_(cudaSetDevice(int(r)));
      const uint32_t per = views_[r][0].kv_heads;
      void *dk = nullptr, *dv = nullptr, *ds = nullptr;
      CUDA_OK_(cudaMalloc(&dk, n * per * kDim * 2));
      CUDA_OK_(cudaMalloc(&dv, n * per * kDim * 2));
      CUDA_OK_(cudaMalloc(&ds, n * sizeof(int64_t)));
      CUDA_OK_(cudaMemcpy(ds, slots.data(), n * sizeof(int64_t), cudaMemcpyHostToDevice));
      for (uint32_t l = 0; l < kLayers; ++l) {
        std::vector<uint16_t> k(n * per * kDim), v(n * per * kDim);
        for (size_t i = 0; i < n; ++i)
          for (uint32_t h = 0; h < per; ++h)
            for (uint32_t d = 0; d < kDim; ++d) {
              const uint64_t pos = first + i;
              const uint32_t mh = views_[r][l].first_kv_head + h;
              k[(i * per + h) * kDim + d] = elem(all[pos], pos, l, 0, mh, d);
              v[(i * per + h) * kDim + d] = elem(all[pos], pos, l, 1, mh, d);
            }
        CUDA_OK_(cudaMemcpy(dk, k.data(), k.size() * 2, cudaMemcpyHostToDevice));
        CUDA_OK_(cudaMemcpy(dv, v.data(), v.size() * 2, cudaMemcpyHostToDevice));
        kvc_store_args_t a;
        kvc_store_args_init(&a);
        a.layer = l;
        a.rank = r;
        a.num_tokens = uint32_t(n);
        a.src_dtype = KVC_DTYPE_F16;
        a.key = dk;
        a.value = dv;
        a.slot_mapping = static_cast<const int64_t*>(ds);
        KVC_OK_(kvc_store_kv(cache_, &a, nullptr));
        CUDA_OK_(cudaSetDevice(int(r)));
        CUDA_OK_(cudaDeviceSynchronize());
      }
      cudaFree(dk);
      cudaFree(dv);
      cudaFree(ds);
    }
    kvc_status_t async = KVC_ERR_INTERNAL;
    KVC_OK_(kvc_cache_get_async_error(cache_, nullptr, &async));
    ASSERT_EQ(async, KVC_OK) << kvc_last_error_message();
  }

  // Every token of `id` holds its bytes on every rank.
  void check(uint64_t id, const std::vector<int32_t>& tokens) {
    kvc_sequence_desc_t sd = KVC_SEQUENCE_DESC_INIT;
    KVC_OK_(kvc_sequence_describe(cache_, id, &sd));
    std::vector<int32_t> blocks(tokens.size() / kT + 2);
    size_t nb = 0;
    KVC_OK_(kvc_sequence_block_ids(cache_, id, 0, blocks.data(), blocks.size(), &nb));
    for (uint32_t r = 0; r < kRanks; ++r) {
      CUDA_OK_(cudaSetDevice(int(r)));
      CUDA_OK_(cudaDeviceSynchronize());
      for (uint32_t l = 0; l < kLayers; ++l) {
        const kvc_layer_view_t& v = views_[r][l];
        std::vector<unsigned char> host(v.num_blocks * v.block_stride);
        // The layer's slabs start at v.base; read whole blocks from there.
        CUDA_OK_(cudaMemcpy(host.data(), v.base, host.size() - (l * v.kv_stride * 2),
                            cudaMemcpyDeviceToHost));
        for (uint64_t pos = 0; pos < sd.num_tokens; ++pos)
          for (uint32_t kv = 0; kv < 2; ++kv)
            for (uint32_t h = 0; h < v.kv_heads; ++h)
              for (uint32_t d = 0; d < kDim; ++d) {
                uint16_t have;
                std::memcpy(&have,
                            host.data() + uint64_t(blocks[pos / kT]) * v.block_stride +
                                kv * v.kv_stride + (pos % kT) * v.token_stride +
                                h * v.head_stride + d * v.elem_size,
                            2);
                ASSERT_EQ(have, elem(tokens[pos], pos, l, kv, v.first_kv_head + h, d))
                    << "rank " << r << " seq " << id << " token " << pos << " layer " << l;
              }
      }
    }
  }

  kvc_cache_t* cache_ = nullptr;
  kvc_layer_view_t views_[kMaxRanks][kLayers];
};

TEST_P(TensorParallelGpu, ReuseForkBitForBit) {
  open(32 * kT, 0);
  std::vector<int32_t> p1(10);
  for (int i = 0; i < 10; ++i) p1[i] = 1000 + i;
  uint64_t cached = 99;
  KVC_OK_(kvc_sequence_add(cache_, 1, p1.data(), 10, nullptr, nullptr, &cached));
  write_new(1, p1);
  KVC_OK_(kvc_sequence_commit(cache_, 1, 10));
  check(1, p1);
  KVC_OK_(kvc_sequence_remove(cache_, 1));
  std::vector<int32_t> p2 = {1000, 1001, 1002, 1003, 1004, 1005, 7, 8, 9};
  KVC_OK_(kvc_sequence_add(cache_, 2, p2.data(), 9, nullptr, nullptr, &cached));
  ASSERT_EQ(cached, 6u);  // the partial block copied on both devices
  write_new(2, p2);
  KVC_OK_(kvc_sequence_commit(cache_, 2, 9));
  check(2, p2);
  KVC_OK_(kvc_sequence_fork(cache_, 2, 4));
  std::vector<int32_t> p4 = p2;
  p4.push_back(4242);
  KVC_OK_(kvc_sequence_extend(cache_, 4, &p4[9], 1, nullptr));
  write_new(4, p4);
  check(4, p4);
  check(2, p2);
  KVC_OK_(kvc_cache_check(cache_));
}

TEST_P(TensorParallelGpu, OffloadOnboardBitForBit) {
  const uint64_t set_bytes = uint64_t(kLayers) * 2 * kT * kPerRank * kDim * 2;
  open(4 * kT, 4 * set_bytes);
  std::vector<int32_t> p1 = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  uint64_t cached = 0;
  KVC_OK_(kvc_sequence_add(cache_, 1, p1.data(), 9, nullptr, nullptr, &cached));
  write_new(1, p1);
  KVC_OK_(kvc_sequence_commit(cache_, 1, 9));
  KVC_OK_(kvc_sequence_remove(cache_, 1));
  std::vector<int32_t> p2(13);
  for (int i = 0; i < 13; ++i) p2[i] = 500 + i;
  KVC_OK_(kvc_sequence_add(cache_, 2, p2.data(), 13, nullptr, nullptr, &cached));
  write_new(2, p2);  // overwrites sequence 1's device blocks on both ranks
  check(2, p2);
  kvc_cache_stats_t s = KVC_CACHE_STATS_INIT;
  KVC_OK_(kvc_cache_get_stats(cache_, &s));
  ASSERT_EQ(s.offloaded_blocks, 3u);
  KVC_OK_(kvc_sequence_remove(cache_, 2));
  KVC_OK_(kvc_sequence_add(cache_, 3, p1.data(), 9, nullptr, nullptr, &cached));
  ASSERT_EQ(cached, 8u);
  write_new(3, p1);
  check(3, p1);  // onboarded on both devices
  KVC_OK_(kvc_cache_check(cache_));
}

TEST_P(TensorParallelGpu, MissingDeviceRefused) {
  int n = 0;
  cudaGetDeviceCount(&n);
  kvc_config_t* c = nullptr;
  KVC_OK_(kvc_config_create(&c));
  KVC_OK_(kvc_config_set_num_layers(c, kLayers));
  KVC_OK_(kvc_config_set_kv_heads(c, kHeads));
  KVC_OK_(kvc_config_set_head_dim(c, kDim));
  KVC_OK_(kvc_config_set_max_tokens(c, 64));
  const int32_t ordinals[2] = {0, n};  // one past the last device
  KVC_OK_(kvc_config_set_ranks(c, KVC_DEVICE_CUDA, ordinals, 2));
  kvc_cache_t* cache = nullptr;
  EXPECT_NE(kvc_cache_create(c, &cache), KVC_OK);
  EXPECT_EQ(cache, nullptr);
  EXPECT_NE(std::string(kvc_last_error_message()).find(std::to_string(n)), std::string::npos)
      << kvc_last_error_message();
  kvc_config_destroy(c);
}

INSTANTIATE_TEST_SUITE_P(Shapes, TensorParallelGpu,
                         ::testing::Values(Shape{2, 4}, Shape{4, 4}, Shape{4, 2}),
                         [](const ::testing::TestParamInfo<Shape>& i) {
                           return std::to_string(i.param.ranks) + "ranks" +
                                  std::to_string(i.param.heads) + "heads";
                         });

}  // namespace
