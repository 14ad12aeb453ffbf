// Windowed layer groups on a CUDA cache whose two pools (block bytes 2:1)
// share pages of one device allocation: K/V derived from (token, position,
// layer) is stored through kvc_store_kv() at each group's slots on a
// stream, the prompt is committed (the windowed group releases its early
// blocks) and removed, a second sequence reuses it, and every byte of the
// blocks it holds in both groups is read back from device memory and
// compared with what was written. Skips with the reason when no CUDA device
// is usable.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "kvcache/kvcache.h"

namespace {

constexpr uint32_t kT = 16, kDim = 32, kWindow = 32;
constexpr uint32_t kHeads[2] = {2, 1};  // layer 0 full, layer 1 windowed

#define KVC_OK_(call) ASSERT_EQ((call), KVC_OK) << #call << ": " << kvc_last_error_message()
#define CUDA_OK_(call) ASSERT_EQ((call), cudaSuccess) << #call

float value(int32_t token, uint64_t pos, uint32_t layer, uint32_t kv, uint32_t i) {
  uint32_t x = uint32_t(token) * 2654435761u ^ uint32_t(pos) * 40503u ^ layer * 97u ^ kv * 13u ^ i;
  x ^= x >> 15;
  x *= 2246822519u;
  x ^= x >> 13;
  uint32_t bits = 0x3F800000u | (x & 0x7FFFFFu);  // finite, in [1, 2)
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

class CudaWindows : public ::testing::Test {
 protected:
  void SetUp() override {
    if ((kvc_features() & KVC_FEATURE_CUDA_DEVICE) == 0)
      GTEST_SKIP() << "no usable CUDA device (kvc_features() = " << kvc_features() << ")";
    kvc_config_t* c = nullptr;
    KVC_OK_(kvc_config_create(&c));
    KVC_OK_(kvc_config_set_num_layers(c, 2));
    KVC_OK_(kvc_config_set_kv_heads_per_layer(c, kHeads, 2));
    const uint32_t windows[2] = {0, kWindow};
    KVC_OK_(kvc_config_set_attention_windows(c, windows, 2));
    KVC_OK_(kvc_config_set_head_dim(c, kDim));
    KVC_OK_(kvc_config_set_dtype(c, KVC_DTYPE_F32));
    KVC_OK_(kvc_config_set_tokens_per_block(c, kT));
    KVC_OK_(kvc_config_set_max_tokens(c, 32 * kT));
    KVC_OK_(kvc_config_set_device(c, KVC_DEVICE_CUDA, 0));
    const kvc_status_t s = kvc_cache_create(c, &cache_);
    kvc_config_destroy(c);
    KVC_OK_(s);
    CUDA_OK_(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  void TearDown() override {
    kvc_cache_destroy(cache_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  // Stores the new tokens of `id` in layer `layer` (its group: layer).
  void store(uint64_t id, const std::vector<int32_t>& tokens, uint32_t layer) {
    std::vector<int64_t> slots(tokens.size());
    size_t n = 0;
    KVC_OK_(kvc_batch_slot_mapping(cache_, layer, &id, 1, slots.data(), slots.size(), &n, nullptr));
    const uint64_t first = tokens.size() - n;
    const size_t row = size_t(kHeads[layer]) * kDim;
    std::vector<float> key(n * row), val(n * row);
    for (size_t i = 0; i < n; ++i)
      for (size_t e = 0; e < row; ++e) {
        key[i * row + e] = value(tokens[first + i], first + i, layer, 0, uint32_t(e));
        val[i * row + e] = value(tokens[first + i], first + i, layer, 1, uint32_t(e));
      }
    void *dk, *dv, *ds;
    CUDA_OK_(cudaMalloc(&dk, key.size() * 4));
    CUDA_OK_(cudaMalloc(&dv, val.size() * 4));
    CUDA_OK_(cudaMalloc(&ds, n * sizeof(int64_t)));
    CUDA_OK_(cudaMemcpy(dk, key.data(), key.size() * 4, cudaMemcpyHostToDevice));
    CUDA_OK_(cudaMemcpy(dv, val.data(), val.size() * 4, cudaMemcpyHostToDevice));
    CUDA_OK_(cudaMemcpy(ds, slots.data(), n * sizeof(int64_t), cudaMemcpyHostToDevice));
    kvc_store_args_t a = KVC_STORE_ARGS_INIT;
    a.layer = layer;
    a.num_tokens = uint32_t(n);
    a.src_dtype = KVC_DTYPE_F32;
    a.key = dk;
    a.value = dv;
    a.slot_mapping = static_cast<const int64_t*>(ds);
    KVC_OK_(kvc_store_kv(cache_, &a, stream_));
    CUDA_OK_(cudaStreamSynchronize(stream_));
    cudaFree(dk);
    cudaFree(dv);
    cudaFree(ds);
  }

  // Every row of every block `id` holds in layer `layer`, read back from
  // the device through the layer view, against the values written.
  void check(uint64_t id, const std::vector<int32_t>& tokens, uint32_t layer, size_t expect_held) {
    std::vector<int32_t> blocks(64);
    size_t count = 0;
    KVC_OK_(kvc_sequence_block_ids(cache_, id, layer, blocks.data(), blocks.size(), &count));
    kvc_layer_view_t v = KVC_LAYER_VIEW_INIT;
    KVC_OK_(kvc_cache_layer_view(cache_, layer, &v));
    size_t held = 0;
    for (size_t b = 0; b < count; ++b) {
      if (blocks[b] < 0) continue;  // released: wholly before the window
      ++held;
      for (uint32_t kv = 0; kv < 2; ++kv)
        for (uint32_t t = 0; t < kT && b * kT + t < tokens.size(); ++t) {
          const uint64_t pos = b * kT + t;
          std::vector<float> got(size_t(kHeads[layer]) * kDim);
          const auto* src = static_cast<const unsigned char*>(v.base) +
                            uint64_t(blocks[b]) * v.block_stride + kv * v.kv_stride +
                            t * v.token_stride;
          CUDA_OK_(cudaMemcpy(got.data(), src, got.size() * 4, cudaMemcpyDeviceToHost));
          for (size_t e = 0; e < got.size(); ++e)
            ASSERT_EQ(got[e], value(tokens[pos], pos, layer, kv, uint32_t(e)))
                << "layer " << layer << " block " << b << " token " << pos << " kv " << kv;
        }
    }
    EXPECT_EQ(held, expect_held) << "layer " << layer;
  }

  kvc_cache_t* cache_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

TEST_F(CudaWindows, ReusedBlocksOfBothGroupsKeepEveryByte) {
  kvc_pool_desc_t p0 = KVC_POOL_DESC_INIT, p1 = KVC_POOL_DESC_INIT;
  KVC_OK_(kvc_cache_describe_pool(cache_, 0, &p0));
  KVC_OK_(kvc_cache_describe_pool(cache_, 1, &p1));
  EXPECT_EQ(p0.base, p1.base);  // one allocation, carved per pool
  std::vector<int32_t> prompt(128);
  for (int i = 0; i < 128; ++i) prompt[i] = 300 + 7 * i;
  uint64_t cached = 99;
  KVC_OK_(kvc_sequence_add(cache_, 1, prompt.data(), prompt.size(), nullptr, stream_, &cached));
  EXPECT_EQ(cached, 0u);
  store(1, prompt, 0);
  store(1, prompt, 1);
  KVC_OK_(kvc_sequence_commit(cache_, 1, prompt.size()));
  check(1, prompt, 0, 8);
  check(1, prompt, 1, 2);  // a token at 128 sees 97..128: blocks 6 and 7
  KVC_OK_(kvc_sequence_remove(cache_, 1));

  std::vector<int32_t> longer = prompt;
  longer.push_back(9);
  KVC_OK_(kvc_sequence_add(cache_, 2, longer.data(), longer.size(), nullptr, stream_, &cached));
  EXPECT_EQ(cached, 128u);
  // The reused blocks hold the prompt; block 8 is new (nothing written yet).
  check(2, prompt, 0, 9);
  check(2, prompt, 1, 3);
  KVC_OK_(kvc_cache_check(cache_));
}

}  // namespace
