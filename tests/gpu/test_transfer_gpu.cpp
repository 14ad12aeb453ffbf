// Block export/import (kvcache/transfer.h) between two CUDA caches on one
// device: the prefill cache exports a committed prompt, the decode cache
// verifies the key blob against its own tokens, reserves blocks, and the
// "transport" (device-to-device cudaMemcpy between the two pools) writes
// them; after complete, an add of the same prompt on the decode cache
// reuses every block, and its bytes are the prefill cache's, bit for bit.
// Skips with the reason when no CUDA device is usable.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kvcache/kvcache.h"

namespace {

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call
#define KVC_OK_(call) ASSERT_EQ((call), KVC_OK) << #call << ": " << kvc_last_error_message()

constexpr uint32_t kLayers = 2, kHeads = 2, kDim = 128, kT = 16, kBlocks = 8;
constexpr uint64_t kBlockBytes = uint64_t(kLayers) * 2 * kT * kHeads * kDim * 2;  // bf16

kvc_cache_t* cuda_cache(uint64_t blocks) {
  kvc_config_t* cfg = nullptr;
  if (kvc_config_create(&cfg) != KVC_OK) return nullptr;
  kvc_config_set_num_layers(cfg, kLayers);
  kvc_config_set_kv_heads(cfg, kHeads);
  kvc_config_set_head_dim(cfg, kDim);
  kvc_config_set_dtype(cfg, KVC_DTYPE_BF16);
  kvc_config_set_tokens_per_block(cfg, kT);
  kvc_config_set_device(cfg, KVC_DEVICE_CUDA, 0);
  kvc_config_set_primary_bytes(cfg, blocks * kBlockBytes);
  kvc_cache_t* cache = nullptr;
  const kvc_status_t s = kvc_cache_create(cfg, &cache);
  kvc_config_destroy(cfg);
  EXPECT_EQ(s, KVC_OK) << kvc_last_error_message();
  return cache;
}

uint8_t* pool_base(kvc_cache_t* cache) {
  kvc_pool_desc_t pool = KVC_POOL_DESC_INIT;
  EXPECT_EQ(kvc_cache_describe_pool(cache, 0, &pool), KVC_OK);
  EXPECT_EQ(pool.block_bytes, kBlockBytes);
  return static_cast<uint8_t*>(pool.base);
}

std::vector<int32_t> seq_ids(kvc_cache_t* cache, uint64_t id) {
  std::vector<int32_t> ids(kBlocks + 2);
  size_t n = 0;
  EXPECT_EQ(kvc_sequence_block_ids(cache, id, 0, ids.data(), ids.size(), &n), KVC_OK);
  ids.resize(n);
  return ids;
}

TEST(CudaTransfer, ExportedBlocksCopiedDeviceToDeviceAreReusedBitForBit) {
  if ((kvc_features() & KVC_FEATURE_CUDA_DEVICE) == 0)
    GTEST_SKIP() << "no usable CUDA device (kvc_features() = " << kvc_features() << ")";
  kvc_cache_t* prefill = cuda_cache(32);
  kvc_cache_t* decode = cuda_cache(32);
  ASSERT_NE(prefill, nullptr);
  ASSERT_NE(decode, nullptr);
  uint8_t* src = pool_base(prefill);
  uint8_t* dst = pool_base(decode);

  // The prefill side: 8 full blocks and one token, random bytes per block.
  std::vector<int32_t> prompt(kBlocks * kT + 1);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = int32_t(5000 + i * 3);
  uint64_t cached = 0;
  KVC_OK_(kvc_sequence_add(prefill, 1, prompt.data(), prompt.size(), nullptr, nullptr, &cached));
  const std::vector<int32_t> ids = seq_ids(prefill, 1);
  ASSERT_EQ(ids.size(), kBlocks + 1);
  std::mt19937 rng(23);
  std::vector<uint8_t> written(kBlocks * kBlockBytes);
  for (auto& b : written) b = uint8_t(rng());
  for (uint32_t i = 0; i < kBlocks; ++i)
    CUDA_OK(cudaMemcpy(src + uint64_t(ids[i]) * kBlockBytes, written.data() + i * kBlockBytes,
                       kBlockBytes, cudaMemcpyHostToDevice));
  KVC_OK_(kvc_sequence_commit(prefill, 1, prompt.size()));
  kvc_export_t* exp = nullptr;
  KVC_OK_(kvc_cache_export_sequence(prefill, 1, 0, &exp));
  KVC_OK_(kvc_sequence_remove(prefill, 1));  // the export still holds the blocks
  kvc_transfer_desc_t ed = KVC_TRANSFER_DESC_INIT;
  KVC_OK_(kvc_export_describe(exp, &ed));
  ASSERT_EQ(ed.num_blocks, kBlocks);
  std::vector<int32_t> from(kBlocks);
  size_t n = 0;
  KVC_OK_(kvc_export_block_ids(exp, 0, from.data(), from.size(), &n));
  ASSERT_EQ(n, kBlocks);
  std::string keys(ed.keys_bytes, '\0');
  size_t size = 0;
  KVC_OK_(kvc_export_keys(exp, &keys[0], keys.size(), &size));

  // A receiver whose prompt differs in one token is refused, nothing changed.
  std::vector<int32_t> other = prompt;
  other[3 * kT + 2] += 1;
  kvc_import_t* bad = nullptr;
  EXPECT_EQ(kvc_cache_import_begin(decode, 9, other.data(), other.size(), nullptr, keys.data(),
                                   keys.size(), &bad),
            KVC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bad, nullptr);
  EXPECT_NE(std::strstr(kvc_last_error_message(), "block 3"), nullptr) << kvc_last_error_message();

  // The decode side: import, copy device to device, complete.
  kvc_import_t* imp = nullptr;
  KVC_OK_(kvc_cache_import_begin(decode, 1, prompt.data(), prompt.size(), nullptr, keys.data(),
                                 keys.size(), &imp));
  kvc_transfer_desc_t id = KVC_TRANSFER_DESC_INIT;
  KVC_OK_(kvc_import_describe(imp, &id));
  ASSERT_EQ(id.first_block, 0u);
  ASSERT_EQ(id.num_blocks, kBlocks);
  std::vector<int32_t> to(kBlocks);
  KVC_OK_(kvc_import_block_ids(imp, 0, to.data(), to.size(), &n));
  ASSERT_EQ(n, kBlocks);
  CUDA_OK(cudaDeviceSynchronize());  // import_begin's device work (default stream)
  for (uint32_t i = 0; i < kBlocks; ++i)
    CUDA_OK(cudaMemcpy(dst + uint64_t(to[i]) * kBlockBytes, src + uint64_t(from[i]) * kBlockBytes,
                       kBlockBytes, cudaMemcpyDeviceToDevice));
  KVC_OK_(kvc_import_complete(imp, kBlocks));
  kvc_import_destroy(imp);
  kvc_export_release(exp);
  KVC_OK_(kvc_sequence_remove(decode, 1));
  KVC_OK_(kvc_cache_check(decode));
  KVC_OK_(kvc_cache_check(prefill));

  // Any add of the prompt on the decode cache reuses the imported blocks.
  KVC_OK_(kvc_sequence_add(decode, 2, prompt.data(), prompt.size(), nullptr, nullptr, &cached));
  EXPECT_EQ(cached, uint64_t(kBlocks) * kT);
  const std::vector<int32_t> got_ids = seq_ids(decode, 2);
  ASSERT_EQ(got_ids.size(), kBlocks + 1);
  std::vector<uint8_t> got(kBlockBytes);
  for (uint32_t i = 0; i < kBlocks; ++i) {
    CUDA_OK(cudaMemcpy(got.data(), dst + uint64_t(got_ids[i]) * kBlockBytes, kBlockBytes,
                       cudaMemcpyDeviceToHost));
    EXPECT_EQ(std::memcmp(got.data(), written.data() + i * kBlockBytes, kBlockBytes), 0)
        << "block " << i << " (id " << got_ids[i] << ")";
  }
  kvc_cache_destroy(decode);
  kvc_cache_destroy(prefill);
}

}  // namespace
