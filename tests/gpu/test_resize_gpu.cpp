// kvc_cache_resize on CUDA: the pools live in a reserved virtual address
// range (the driver's virtual memory API), so a grow or shrink keeps the
// pool's base, the layer views and the block ids. A CUDA graph that stores
// K/V and runs decode attention, captured before a grow, replayed after it
// (and after a shrink back) writes the same bytes and gives the same output.
// Skips with the reason when no CUDA device is usable.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kvcache/kvcache.h"

namespace {

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call
#define KVC_OK_(call) ASSERT_EQ((call), KVC_OK) << #call << ": " << kvc_last_error_message()

constexpr uint32_t kLayers = 2, kHeads = 2, kQHeads = 4, kDim = 128, kT = 16, kTokens = 100;
constexpr uint64_t kBlockBytes = uint64_t(kLayers) * 2 * kT * kHeads * kDim * 2;  // bf16

std::vector<uint8_t> read(const void* dev, uint64_t bytes) {
  std::vector<uint8_t> v(bytes);
  EXPECT_EQ(cudaMemcpy(v.data(), dev, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  return v;
}

TEST(CudaResize, AGraphCapturedBeforeAGrowReplaysTheSameBytesAfterIt) {
  if ((kvc_features() & KVC_FEATURE_CUDA_DEVICE) == 0)
    GTEST_SKIP() << "no usable CUDA device (kvc_features() = " << kvc_features() << ")";
  kvc_config_t* cfg = nullptr;
  KVC_OK_(kvc_config_create(&cfg));
  KVC_OK_(kvc_config_set_num_layers(cfg, kLayers));
  KVC_OK_(kvc_config_set_kv_heads(cfg, kHeads));
  KVC_OK_(kvc_config_set_head_dim(cfg, kDim));
  KVC_OK_(kvc_config_set_dtype(cfg, KVC_DTYPE_BF16));
  KVC_OK_(kvc_config_set_tokens_per_block(cfg, kT));
  KVC_OK_(kvc_config_set_device(cfg, KVC_DEVICE_CUDA, 0));
  KVC_OK_(kvc_config_set_primary_bytes(cfg, 64 * kBlockBytes));
  KVC_OK_(kvc_config_set_max_primary_bytes(cfg, 16384 * kBlockBytes));  // 4 GiB
  kvc_cache_t* cache = nullptr;
  ASSERT_EQ(kvc_cache_create(cfg, &cache), KVC_OK) << kvc_last_error_message();
  kvc_config_destroy(cfg);

  std::vector<int32_t> tokens(kTokens);
  for (uint32_t i = 0; i < kTokens; ++i) tokens[i] = int32_t(i * 7 + 3);
  const uint64_t id = 1;
  uint64_t cached = 0;
  KVC_OK_(kvc_sequence_add(cache, id, tokens.data(), kTokens, nullptr, nullptr, &cached));
  std::vector<int64_t> slots(kTokens);
  size_t n_slots = 0;
  int32_t new_tokens = 0;
  KVC_OK_(kvc_batch_slot_mapping(cache, 0, &id, 1, slots.data(), slots.size(), &n_slots,
                                 &new_tokens));
  ASSERT_EQ(n_slots, kTokens);
  const size_t max_blocks = (kTokens + kT - 1) / kT;
  std::vector<int32_t> table(max_blocks);
  size_t needed = 0;
  KVC_OK_(kvc_batch_block_table(cache, 0, &id, 1, table.data(), max_blocks, -1, &needed));
  const int32_t len = int32_t(kTokens);

  // Inputs on the device.
  std::mt19937 rng(7);
  std::vector<uint16_t> kv(uint64_t(kTokens) * kHeads * kDim * 2), q(kQHeads * kDim);
  for (auto& x : kv) x = uint16_t(0x3C00 + (rng() % 512) - 256);  // bf16 around 1
  for (auto& x : q) x = uint16_t(0x3C00 + (rng() % 512) - 256);
  const uint64_t half = kv.size() / 2 * sizeof(uint16_t);
  void *d_kv = nullptr, *d_q = nullptr, *d_out = nullptr, *d_slots = nullptr, *d_table = nullptr,
       *d_len = nullptr, *d_ws = nullptr;
  CUDA_OK(cudaMalloc(&d_kv, 2 * half));
  CUDA_OK(cudaMalloc(&d_q, q.size() * 2));
  CUDA_OK(cudaMalloc(&d_out, q.size() * 2));
  CUDA_OK(cudaMalloc(&d_slots, slots.size() * 8));
  CUDA_OK(cudaMalloc(&d_table, table.size() * 4));
  CUDA_OK(cudaMalloc(&d_len, 4));
  CUDA_OK(cudaMemcpy(d_kv, kv.data(), 2 * half, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(d_q, q.data(), q.size() * 2, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(d_slots, slots.data(), slots.size() * 8, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(d_table, table.data(), table.size() * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(d_len, &len, 4, cudaMemcpyHostToDevice));
  kvc_decode_args_t dec = KVC_DECODE_ARGS_INIT;
  dec.layer = 1;
  dec.batch = 1;
  dec.q_heads = kQHeads;
  dec.q_dtype = KVC_DTYPE_BF16;
  dec.query = d_q;
  dec.out = d_out;
  dec.seq_lens = static_cast<const int32_t*>(d_len);
  dec.block_table = static_cast<const int32_t*>(d_table);
  dec.table_stride = uint32_t(max_blocks);
  dec.max_seq_len = kTokens;
  uint64_t ws = 0;
  KVC_OK_(kvc_decode_workspace_size(cache, &dec, &ws));
  CUDA_OK(cudaMalloc(&d_ws, ws + 1));
  dec.workspace = d_ws;
  dec.workspace_bytes = ws;

  kvc_pool_desc_t pool = KVC_POOL_DESC_INIT;
  KVC_OK_(kvc_cache_describe_pool(cache, 0, &pool));
  kvc_layer_view_t view = KVC_LAYER_VIEW_INIT;
  KVC_OK_(kvc_cache_layer_view(cache, 1, &view));

  // Capture: store K/V of both layers, then decode layer 1.
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraph_t graph = nullptr;
  CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  for (uint32_t layer = 0; layer < kLayers; ++layer) {
    kvc_store_args_t st = KVC_STORE_ARGS_INIT;
    st.layer = layer;
    st.num_tokens = kTokens;
    st.src_dtype = KVC_DTYPE_BF16;
    st.key = d_kv;
    st.value = static_cast<const char*>(d_kv) + half;
    st.slot_mapping = static_cast<const int64_t*>(d_slots);
    KVC_OK_(kvc_store_kv(cache, &st, stream));
  }
  KVC_OK_(kvc_decode_attention(cache, &dec, stream));
  CUDA_OK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec = nullptr;
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));

  auto replay = [&](std::vector<uint8_t>* out, std::vector<uint8_t>* kv_bytes) {
    // Clear what the graph writes, so the replay must write it again.
    ASSERT_EQ(cudaMemset(pool.base, 0, 64 * kBlockBytes), cudaSuccess);
    ASSERT_EQ(cudaMemset(d_out, 0, q.size() * 2), cudaSuccess);
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    *out = read(d_out, q.size() * 2);
    *kv_bytes = read(pool.base, 64 * kBlockBytes);
  };
  std::vector<uint8_t> out0, kv0;
  replay(&out0, &kv0);

  // Grow to 4 GiB: same base, same view, same ids; the new memory is usable.
  KVC_OK_(kvc_cache_resize(cache, 16384 * kBlockBytes));
  kvc_pool_desc_t grown = KVC_POOL_DESC_INIT;
  KVC_OK_(kvc_cache_describe_pool(cache, 0, &grown));
  EXPECT_EQ(grown.base, pool.base);
  EXPECT_EQ(grown.num_blocks, 16384u);
  kvc_layer_view_t view2 = KVC_LAYER_VIEW_INIT;
  KVC_OK_(kvc_cache_layer_view(cache, 1, &view2));
  EXPECT_EQ(view2.base, view.base);
  CUDA_OK(cudaMemset(grown.base, 0x5A, grown.bytes));  // the whole pool is mapped
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<int32_t> table2(max_blocks);
  KVC_OK_(kvc_batch_block_table(cache, 0, &id, 1, table2.data(), max_blocks, -1, &needed));
  EXPECT_EQ(table2, table);

  std::vector<uint8_t> out1, kv1;
  replay(&out1, &kv1);
  EXPECT_EQ(out1, out0);
  EXPECT_EQ(kv1, kv0);

  // Shrink back to 64 blocks: the sequence's blocks lie below the end.
  KVC_OK_(kvc_cache_resize(cache, 64 * kBlockBytes));
  kvc_pool_desc_t shrunk = KVC_POOL_DESC_INIT;
  KVC_OK_(kvc_cache_describe_pool(cache, 0, &shrunk));
  EXPECT_EQ(shrunk.base, pool.base);
  EXPECT_EQ(shrunk.num_blocks, 64u);
  std::vector<uint8_t> out2, kv2;
  replay(&out2, &kv2);
  EXPECT_EQ(out2, out0);
  EXPECT_EQ(kv2, kv0);

  // A shrink below the sequence's blocks is refused, naming one.
  EXPECT_EQ(kvc_cache_resize(cache, 2 * kBlockBytes), KVC_ERR_OUT_OF_BLOCKS);
  EXPECT_NE(std::strstr(kvc_last_error_message(), "is in use"), nullptr)
      << kvc_last_error_message();

  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
  for (void* p : {d_kv, d_q, d_out, d_slots, d_table, d_len, d_ws}) cudaFree(p);
  kvc_cache_destroy(cache);
}

// A shrink keeps the cached blocks that lie past the new end by copying
// them below it (on the device) and evicts the oldest instead: the blocks
// a later prompt reuses hold the bytes written before, bit for bit.
TEST(CudaResize, AShrinkMovesTheCachedTailOnTheDeviceBitForBit) {
  if ((kvc_features() & KVC_FEATURE_CUDA_DEVICE) == 0)
    GTEST_SKIP() << "no usable CUDA device (kvc_features() = " << kvc_features() << ")";
  kvc_config_t* cfg = nullptr;
  KVC_OK_(kvc_config_create(&cfg));
  KVC_OK_(kvc_config_set_num_layers(cfg, kLayers));
  KVC_OK_(kvc_config_set_kv_heads(cfg, kHeads));
  KVC_OK_(kvc_config_set_head_dim(cfg, kDim));
  KVC_OK_(kvc_config_set_dtype(cfg, KVC_DTYPE_BF16));
  KVC_OK_(kvc_config_set_tokens_per_block(cfg, kT));
  KVC_OK_(kvc_config_set_device(cfg, KVC_DEVICE_CUDA, 0));
  KVC_OK_(kvc_config_set_primary_bytes(cfg, 16 * kBlockBytes));
  kvc_cache_t* cache = nullptr;
  ASSERT_EQ(kvc_cache_create(cfg, &cache), KVC_OK) << kvc_last_error_message();
  kvc_config_destroy(cfg);
  kvc_pool_desc_t pool = KVC_POOL_DESC_INIT;
  KVC_OK_(kvc_cache_describe_pool(cache, 0, &pool));
  ASSERT_EQ(pool.block_bytes, kBlockBytes);
  ASSERT_EQ(pool.num_blocks, 16u);
  auto* base = static_cast<uint8_t*>(pool.base);

  // Three prompts of 4 blocks: A cached (oldest), B in use, C cached. Each
  // block is filled with random bytes straight into the pool.
  std::mt19937 rng(11);
  auto prompt = [](int32_t first) {
    std::vector<int32_t> t(4 * kT);
    for (uint32_t i = 0; i < t.size(); ++i) t[i] = first + int32_t(i);
    return t;
  };
  auto block_ids = [&](uint64_t id) {
    std::vector<int32_t> ids(8);
    size_t n = 0;
    EXPECT_EQ(kvc_sequence_block_ids(cache, id, 0, ids.data(), ids.size(), &n), KVC_OK);
    ids.resize(n);
    return ids;
  };
  std::vector<std::vector<uint8_t>> written(3);
  for (uint64_t id = 1; id <= 3; ++id) {
    const std::vector<int32_t> t = prompt(int32_t(id * 1000));
    uint64_t cached = 0;
    KVC_OK_(kvc_sequence_add(cache, id, t.data(), t.size(), nullptr, nullptr, &cached));
    std::vector<uint8_t>& w = written[id - 1];
    w.resize(4 * kBlockBytes);
    for (auto& b : w) b = uint8_t(rng());
    const std::vector<int32_t> ids = block_ids(id);
    ASSERT_EQ(ids.size(), 4u);
    for (size_t i = 0; i < 4; ++i)
      CUDA_OK(cudaMemcpy(base + uint64_t(ids[i]) * kBlockBytes, w.data() + i * kBlockBytes,
                         kBlockBytes, cudaMemcpyHostToDevice));
    KVC_OK_(kvc_sequence_commit(cache, id, t.size()));
    if (id != 2) {
      KVC_OK_(kvc_sequence_remove(cache, id));
    }
  }
  const std::vector<int32_t> held = block_ids(2);

  // 8 blocks: B (4 in use) and 4 cached: A's go, C's move below the end.
  KVC_OK_(kvc_cache_resize(cache, 8 * kBlockBytes));
  kvc_cache_stats_t st = KVC_CACHE_STATS_INIT;
  KVC_OK_(kvc_cache_get_stats(cache, &st));
  EXPECT_EQ(st.num_blocks, 8u);
  EXPECT_EQ(st.cached_blocks, 4u);
  EXPECT_EQ(st.in_use_blocks, 4u);
  KVC_OK_(kvc_cache_check(cache));
  KVC_OK_(kvc_cache_describe_pool(cache, 0, &pool));
  EXPECT_EQ(pool.base, base);
  EXPECT_EQ(block_ids(2), held);

  // C comes back from the blocks it moved to, with its bytes; B kept its own.
  const std::vector<int32_t> c = prompt(3000);
  std::vector<int32_t> c_more = c;
  c_more.push_back(7);
  KVC_OK_(kvc_sequence_remove(cache, 2));
  uint64_t cached = 0;
  KVC_OK_(kvc_sequence_add(cache, 4, c_more.data(), c_more.size(), nullptr, nullptr, &cached));
  EXPECT_EQ(cached, c.size());
  const std::vector<int32_t> ids = block_ids(4);
  ASSERT_EQ(ids.size(), 5u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_LT(ids[i], 8);
    const std::vector<uint8_t> got = read(base + uint64_t(ids[i]) * kBlockBytes, kBlockBytes);
    EXPECT_EQ(std::memcmp(got.data(), written[2].data() + i * kBlockBytes, kBlockBytes), 0)
        << "block " << i << " of C (id " << ids[i] << ")";
  }
  for (size_t i = 0; i < 4; ++i) {
    const std::vector<uint8_t> got = read(base + uint64_t(held[i]) * kBlockBytes, kBlockBytes);
    if (std::find(ids.begin(), ids.end(), held[i]) == ids.end()) {
      EXPECT_EQ(std::memcmp(got.data(), written[1].data() + i * kBlockBytes, kBlockBytes), 0)
          << "block " << i << " of B (id " << held[i] << ")";
    }
  }
  kvc_cache_destroy(cache);
}

// A growth the device cannot back (more than it has) is refused with
// nothing changed.
TEST(CudaResize, AGrowBeyondTheDevicesMemoryChangesNothing) {
  if ((kvc_features() & KVC_FEATURE_CUDA_DEVICE) == 0)
    GTEST_SKIP() << "no usable CUDA device (kvc_features() = " << kvc_features() << ")";
  size_t free = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free, &total), cudaSuccess);
  kvc_config_t* cfg = nullptr;
  KVC_OK_(kvc_config_create(&cfg));
  KVC_OK_(kvc_config_set_num_layers(cfg, kLayers));
  KVC_OK_(kvc_config_set_kv_heads(cfg, kHeads));
  KVC_OK_(kvc_config_set_head_dim(cfg, kDim));
  KVC_OK_(kvc_config_set_device(cfg, KVC_DEVICE_CUDA, 0));
  KVC_OK_(kvc_config_set_primary_bytes(cfg, 64 * kBlockBytes));
  KVC_OK_(kvc_config_set_max_primary_bytes(cfg, 2 * uint64_t(total)));
  kvc_cache_t* cache = nullptr;
  ASSERT_EQ(kvc_cache_create(cfg, &cache), KVC_OK) << kvc_last_error_message();
  kvc_config_destroy(cfg);
  EXPECT_EQ(kvc_cache_resize(cache, uint64_t(total) + 64 * kBlockBytes), KVC_ERR_OUT_OF_MEMORY);
  EXPECT_NE(std::strstr(kvc_last_error_message(), "cuMemCreate"), nullptr)
      << kvc_last_error_message();
  kvc_cache_desc_t d = KVC_CACHE_DESC_INIT;
  KVC_OK_(kvc_cache_describe(cache, &d));
  EXPECT_EQ(d.num_blocks, 64u);
  size_t free2 = 0;
  ASSERT_EQ(cudaMemGetInfo(&free2, &total), cudaSuccess);
  EXPECT_GE(free2 + (64 << 20), free - 64 * kBlockBytes - (4 << 20));  // nothing kept backed
  KVC_OK_(kvc_cache_resize(cache, 128 * kBlockBytes));  // a growth that fits goes through
  KVC_OK_(kvc_cache_describe(cache, &d));
  EXPECT_EQ(d.num_blocks, 128u);
  kvc_cache_destroy(cache);
}

}  // namespace
