// State snapshots (kvcache/state.h) on a CUDA cache: a Nemotron-H-like
// hybrid (one attention layer; Mamba-2 SSM and conv state, bf16 conv, f32
// SSM) whose state slots live in device memory. Random bytes written into
// a sequence's slots (cudaMemcpy) are published on a caller's stream at a
// block boundary; a fork copies them; a new prompt with that prefix reuses
// it and its slots hold exactly the published bytes (read back after a
// stream sync); a rewind restores them after drafts overwrote the slots;
// a second publish at another boundary and an evicting publish shorten or
// lengthen the reuse as on the CPU; with a host tier, a snapshot pushed
// out of the device pool goes to host memory and a reuse copies it back
// into the new sequence's slots. Skips with the reason when no CUDA
// device is usable.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "kvcache/kvcache.h"

namespace {

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call
#define KVC_OK_(call) ASSERT_EQ((call), KVC_OK) << #call << ": " << kvc_last_error_message()

constexpr uint32_t kT = 16;
constexpr uint32_t kResources = 2;

kvc_cache_t* hybrid_cache(uint32_t snapshots, uint64_t host_bytes = 0) {
  kvc_config_t* cfg = nullptr;
  if (kvc_config_create(&cfg) != KVC_OK) return nullptr;
  kvc_config_set_num_layers(cfg, 1);
  kvc_config_set_kv_heads(cfg, 8);
  kvc_config_set_head_dim(cfg, 128);
  kvc_config_set_dtype(cfg, KVC_DTYPE_BF16);
  kvc_config_set_tokens_per_block(cfg, kT);
  kvc_config_set_device(cfg, KVC_DEVICE_CUDA, 0);
  kvc_config_set_primary_bytes(cfg, 256ull << 20);
  uint32_t index = 0;
  // Mamba-2: 16 heads of 64, d_state 128, n_groups 8: conv_dim 16*64 + 2*8*128.
  kvc_config_add_ssm_state(cfg, 16, 64, 128, KVC_DTYPE_F32, &index);
  kvc_config_add_conv_state(cfg, 16 * 64 + 2 * 8 * 128, 4, KVC_DTYPE_BF16, &index);
  kvc_config_set_max_state_slots(cfg, 8);
  kvc_config_set_max_state_snapshots(cfg, snapshots);
  if (host_bytes > 0) {
    kvc_config_set_host_cache_bytes(cfg, host_bytes);
    kvc_config_set_secondary_offload_min_priority(cfg, 35);
  }
  kvc_cache_t* cache = nullptr;
  const kvc_status_t s = kvc_cache_create(cfg, &cache);
  kvc_config_destroy(cfg);
  EXPECT_EQ(s, KVC_OK) << kvc_last_error_message();
  return cache;
}

// Device address of resource r's slot of sequence id, and its bytes.
struct SlotRef {
  uint8_t* at = nullptr;
  uint64_t bytes = 0;
};

std::vector<SlotRef> slots_of(kvc_cache_t* cache, uint64_t id) {
  int32_t slots[kResources];
  EXPECT_EQ(kvc_batch_state_slots(cache, &id, 1, KVC_STATE_ALL, slots), KVC_OK);
  std::vector<SlotRef> out;
  for (uint32_t r = 0; r < kResources; ++r) {
    kvc_resource_desc_t d = KVC_RESOURCE_DESC_INIT;
    EXPECT_EQ(kvc_cache_describe_resource(cache, r, &d), KVC_OK);
    out.push_back(
        {static_cast<uint8_t*>(d.base) + uint64_t(slots[r]) * d.slot_stride, d.slot_bytes});
  }
  return out;
}

// Random bytes for every slot of id (seeded), written with cudaMemcpy.
std::vector<std::vector<uint8_t>> write_state(kvc_cache_t* cache, uint64_t id, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::vector<uint8_t>> bytes;
  for (const SlotRef& s : slots_of(cache, id)) {
    std::vector<uint8_t> b(s.bytes);
    for (auto& v : b) v = uint8_t(rng());
    EXPECT_EQ(cudaMemcpy(s.at, b.data(), b.size(), cudaMemcpyHostToDevice), cudaSuccess);
    bytes.push_back(std::move(b));
  }
  return bytes;
}

std::vector<std::vector<uint8_t>> read_state(kvc_cache_t* cache, uint64_t id) {
  std::vector<std::vector<uint8_t>> bytes;
  for (const SlotRef& s : slots_of(cache, id)) {
    std::vector<uint8_t> b(s.bytes);
    EXPECT_EQ(cudaMemcpy(b.data(), s.at, b.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    bytes.push_back(std::move(b));
  }
  return bytes;
}

TEST(CudaStateSnapshots, PublishReuseForkAndRewindAreBitForBit) {
  if ((kvc_features() & KVC_FEATURE_CUDA_DEVICE) == 0)
    GTEST_SKIP() << "no usable CUDA device (kvc_features() = " << kvc_features() << ")";
  kvc_cache_t* cache = hybrid_cache(4);
  ASSERT_NE(cache, nullptr);
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  std::vector<int32_t> prompt(5 * kT + 3);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = int32_t(700 + i);
  uint64_t cached = 9;
  KVC_OK_(kvc_sequence_add(cache, 1, prompt.data(), 4 * kT + 2, nullptr, stream, &cached));
  EXPECT_EQ(cached, 0u);
  // The chunk ending at 2T, then the one ending at 4T: publish after each.
  const auto at2 = write_state(cache, 1, 2);
  KVC_OK_(kvc_sequence_commit(cache, 1, 2 * kT));
  KVC_OK_(kvc_sequence_publish_state(cache, 1, 2 * kT, stream));
  const auto at4 = write_state(cache, 1, 4);
  KVC_OK_(kvc_sequence_commit(cache, 1, 4 * kT));
  KVC_OK_(kvc_sequence_publish_state(cache, 1, 4 * kT, stream));
  CUDA_OK(cudaStreamSynchronize(stream));

  // Fork: the child's slots equal the parent's (device-to-device copy).
  KVC_OK_(kvc_sequence_fork(cache, 1, 2));
  CUDA_OK(cudaDeviceSynchronize());
  EXPECT_EQ(read_state(cache, 2), at4);

  // Drafts overwrite the state; the rewind to 4T restores it.
  KVC_OK_(kvc_sequence_extend(cache, 1, prompt.data() + 4 * kT + 2, 1, stream));
  write_state(cache, 1, 99);
  EXPECT_EQ(kvc_sequence_rewind(cache, 1, 2), KVC_ERR_INVALID_STATE);
  KVC_OK_(kvc_sequence_rewind(cache, 1, 3));
  CUDA_OK(cudaDeviceSynchronize());
  EXPECT_EQ(read_state(cache, 1), at4);

  // A new prompt with the whole prefix reuses 4T and gets the bytes at 4T
  // (copied on the add's stream); one diverging in block 3 gets those at 2T.
  KVC_OK_(kvc_sequence_remove(cache, 1));
  KVC_OK_(kvc_sequence_remove(cache, 2));
  KVC_OK_(kvc_sequence_add(cache, 3, prompt.data(), prompt.size(), nullptr, stream, &cached));
  EXPECT_EQ(cached, 4u * kT);
  CUDA_OK(cudaStreamSynchronize(stream));
  EXPECT_EQ(read_state(cache, 3), at4);
  std::vector<int32_t> other(prompt.begin(), prompt.begin() + 4 * kT);
  other[3 * kT + 1] = -7;
  KVC_OK_(kvc_sequence_add(cache, 4, other.data(), other.size(), nullptr, stream, &cached));
  EXPECT_EQ(cached, 2u * kT);
  CUDA_OK(cudaStreamSynchronize(stream));
  EXPECT_EQ(read_state(cache, 4), at2);

  kvc_snapshot_stats_t s = KVC_SNAPSHOT_STATS_INIT;
  KVC_OK_(kvc_cache_get_snapshot_stats(cache, &s));
  EXPECT_EQ(s.published, 2u);
  EXPECT_EQ(s.hits, 2u);
  EXPECT_EQ(s.restores, 1u);
  EXPECT_EQ(s.bytes_per_snapshot, 16u * 64 * 128 * 4 + (16u * 64 + 2 * 8 * 128) * 4 * 2);
  KVC_OK_(kvc_cache_check(cache));
  CUDA_OK(cudaStreamDestroy(stream));
  kvc_cache_destroy(cache);
}

TEST(CudaStateSnapshots, AnEvictedSnapshotShortensTheReuse) {
  if ((kvc_features() & KVC_FEATURE_CUDA_DEVICE) == 0)
    GTEST_SKIP() << "no usable CUDA device (kvc_features() = " << kvc_features() << ")";
  kvc_cache_t* cache = hybrid_cache(1);
  ASSERT_NE(cache, nullptr);
  std::vector<int32_t> a(3 * kT), b(3 * kT);
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = int32_t(10 + i);
    b[i] = int32_t(9000 + i);
  }
  uint64_t cached = 0;
  KVC_OK_(kvc_sequence_add(cache, 1, a.data(), a.size(), nullptr, nullptr, &cached));
  const auto at2 = write_state(cache, 1, 2);
  KVC_OK_(kvc_sequence_commit(cache, 1, 2 * kT));
  KVC_OK_(kvc_sequence_publish_state(cache, 1, 2 * kT, nullptr));
  KVC_OK_(kvc_sequence_add(cache, 2, b.data(), b.size(), nullptr, nullptr, &cached));
  write_state(cache, 2, 5);
  KVC_OK_(kvc_sequence_commit(cache, 2, kT));
  KVC_OK_(kvc_sequence_publish_state(cache, 2, kT, nullptr));  // evicts a's
  kvc_snapshot_stats_t s = KVC_SNAPSHOT_STATS_INIT;
  KVC_OK_(kvc_cache_get_snapshot_stats(cache, &s));
  EXPECT_EQ(s.evicted, 1u);
  KVC_OK_(kvc_sequence_add(cache, 3, a.data(), a.size(), nullptr, nullptr, &cached));
  EXPECT_EQ(cached, 0u);
  KVC_OK_(kvc_cache_check(cache));
  kvc_cache_destroy(cache);
  (void)at2;
}

TEST(CudaStateSnapshots, AHostTierSnapshotRestoresBitForBit) {
  if ((kvc_features() & KVC_FEATURE_CUDA_DEVICE) == 0)
    GTEST_SKIP() << "no usable CUDA device (kvc_features() = " << kvc_features() << ")";
  // One device snapshot slot; a quarter of the host tier holds host ones.
  kvc_cache_t* cache = hybrid_cache(1, 64ull << 20);
  ASSERT_NE(cache, nullptr);
  kvc_snapshot_stats_t s = KVC_SNAPSHOT_STATS_INIT;
  KVC_OK_(kvc_cache_get_snapshot_stats(cache, &s));
  ASSERT_GE(s.host_num_slots, 1u);
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::vector<int32_t> a(3 * kT), b(3 * kT);
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = int32_t(10 + i);
    b[i] = int32_t(9000 + i);
  }
  uint64_t cached = 0;
  KVC_OK_(kvc_sequence_add(cache, 1, a.data(), a.size(), nullptr, stream, &cached));
  const auto at2 = write_state(cache, 1, 2);
  KVC_OK_(kvc_sequence_commit(cache, 1, 2 * kT));
  KVC_OK_(kvc_sequence_publish_state(cache, 1, 2 * kT, stream));
  KVC_OK_(kvc_sequence_add(cache, 2, b.data(), b.size(), nullptr, stream, &cached));
  const auto b1 = write_state(cache, 2, 5);
  KVC_OK_(kvc_sequence_commit(cache, 2, kT));
  // The device pool is full: a's snapshot moves to the host pool.
  KVC_OK_(kvc_sequence_publish_state(cache, 2, kT, stream));
  KVC_OK_(kvc_cache_get_snapshot_stats(cache, &s));
  EXPECT_EQ(s.offloaded, 1u);
  EXPECT_EQ(s.host_slots_used, 1u);
  EXPECT_EQ(s.evicted, 0u);
  KVC_OK_(kvc_sequence_remove(cache, 1));
  KVC_OK_(kvc_sequence_remove(cache, 2));
  // Reusing a's prefix copies the host snapshot into the new slots on the
  // add's stream; b's prefix still comes from the device pool.
  KVC_OK_(kvc_sequence_add(cache, 3, a.data(), a.size(), nullptr, stream, &cached));
  EXPECT_EQ(cached, 2u * kT);
  CUDA_OK(cudaStreamSynchronize(stream));
  EXPECT_EQ(read_state(cache, 3), at2);
  KVC_OK_(kvc_sequence_add(cache, 4, b.data(), b.size(), nullptr, stream, &cached));
  EXPECT_EQ(cached, 1u * kT);
  CUDA_OK(cudaStreamSynchronize(stream));
  EXPECT_EQ(read_state(cache, 4), b1);
  KVC_OK_(kvc_cache_get_snapshot_stats(cache, &s));
  EXPECT_GE(s.onboarded, 1u);
  EXPECT_EQ(s.hits, 2u);
  KVC_OK_(kvc_cache_check(cache));
  CUDA_OK(cudaStreamDestroy(stream));
  kvc_cache_destroy(cache);
}

}  // namespace
