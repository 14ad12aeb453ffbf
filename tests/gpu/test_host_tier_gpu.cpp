// The host tier on a CUDA cache: blocks written in device memory are
// offloaded to pinned host memory by the tier copy kernel when evicted
// (checked bit for bit in host memory), overwritten on the device, then
// onboarded on a hit on the caller's stream and read back on that same
// stream: every byte equal. A second geometry (24-byte blocks) takes the
// kernel's narrow-vector path. Skips with the reason when no CUDA device is
// usable.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

#include "core/cache.h"
#include "kvcache/kvcache.h"

namespace kvc {
namespace {

#define CUDA_OK_(call) ASSERT_EQ((call), cudaSuccess) << #call

uint8_t pattern(int32_t first_token, uint64_t block, uint64_t i) {
  uint64_t x = uint64_t(uint32_t(first_token)) * 0x9E3779B97F4A7C15ull ^ block * 0xBF58476D1CE4E5B9ull ^ i;
  x ^= x >> 31;
  x *= 0x94D049BB133111EBull;
  return uint8_t(x >> 29);
}

struct Geometry {
  uint32_t layers, heads, dim, tokens_per_block;
  kvc_dtype_t dtype;
};

class HostTierGpu : public ::testing::TestWithParam<Geometry> {
 protected:
  void SetUp() override {
    if ((kvc_features() & KVC_FEATURE_CUDA_DEVICE) == 0)
      GTEST_SKIP() << "no usable CUDA device (kvc_features() = " << kvc_features() << ")";
    const Geometry g = GetParam();
    CacheConfig c;
    c.num_layers = g.layers;
    c.kv_heads = {g.heads};
    c.head_dim = g.dim;
    c.dtype = g.dtype;
    c.tokens_per_block = g.tokens_per_block;
    c.device_kind = KVC_DEVICE_CUDA;
    c.max_tokens = 8ull * g.tokens_per_block;
    c.partial_reuse = false;  // only full blocks are cached: exact counts
    cache_ = std::make_unique<Cache>(c);
    c.host_cache_bytes = 16 * cache_->pool(0).block_bytes();
    cache_ = std::make_unique<Cache>(c);
    ASSERT_EQ(cache_->num_pools(), 1u);
    CUDA_OK_(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  void TearDown() override {
    cache_.reset();
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  BlockManager& m() { return cache_->manager(); }
  uint64_t bytes() const { return cache_->pool(0).block_bytes(); }
  std::vector<uint8_t> expected(int32_t first_token, uint64_t b) const {
    std::vector<uint8_t> v(bytes());
    for (uint64_t i = 0; i < v.size(); ++i) v[i] = pattern(first_token, b, i);
    return v;
  }

  std::unique_ptr<Cache> cache_;
  cudaStream_t stream_ = nullptr;
};

TEST_P(HostTierGpu, OffloadThenOnboardKeepsEveryByte) {
  const uint32_t T = cache_->config().tokens_per_block;
  std::vector<int32_t> p(4 * T + 1);
  std::iota(p.begin(), p.end(), 1000);
  m().add(1, p.data(), p.size(), {}, stream_);
  const Sequence& s1 = m().sequence(1);
  for (uint64_t b = 0; b < 4; ++b) {
    const auto v = expected(p[b * T], b);
    CUDA_OK_(cudaMemcpyAsync(cache_->pool(0).block(s1.blocks[0][b]), v.data(), v.size(),
                             cudaMemcpyHostToDevice, stream_));
  }
  CUDA_OK_(cudaStreamSynchronize(stream_));
  m().commit(1, p.size());
  const std::vector<uint32_t> nodes(s1.nodes.begin(), s1.nodes.begin() + 4);
  m().remove(1);

  // Eight new blocks in an eight-block cache: the four cached ones move out.
  std::vector<int32_t> q(8 * T);
  std::iota(q.begin(), q.end(), 50000);
  m().add(2, q.data(), q.size(), {}, stream_);
  CUDA_OK_(cudaStreamSynchronize(stream_));
  EXPECT_EQ(m().stats().host.offloaded_blocks, 4u);
  for (uint64_t b = 0; b < 4; ++b) {
    ASSERT_TRUE(m().in_host_tier(nodes[b]));
    const uint8_t* h = cache_->host_pool(0).block(m().tree().block(nodes[b], 0));
    EXPECT_EQ(std::memcmp(h, expected(p[b * T], b).data(), bytes()), 0) << "offloaded block " << b;
  }
  // The model overwrites every block it was given.
  for (uint32_t blk : m().sequence(2).blocks[0])
    CUDA_OK_(cudaMemsetAsync(cache_->pool(0).block(blk), 0x5A, bytes(), stream_));
  m().remove(2);

  // A hit: onboarded on the stream, read back on the same stream.
  EXPECT_EQ(m().add(3, p.data(), p.size(), {}, stream_), 4u * T);
  const Sequence& s3 = m().sequence(3);
  std::vector<uint8_t> got(4 * bytes());
  for (uint64_t b = 0; b < 4; ++b)
    CUDA_OK_(cudaMemcpyAsync(got.data() + b * bytes(), cache_->pool(0).block(s3.blocks[0][b]),
                             bytes(), cudaMemcpyDeviceToHost, stream_));
  CUDA_OK_(cudaStreamSynchronize(stream_));
  for (uint64_t b = 0; b < 4; ++b)
    EXPECT_EQ(std::memcmp(got.data() + b * bytes(), expected(p[b * T], b).data(), bytes()), 0)
        << "onboarded block " << b;
  EXPECT_EQ(m().stats().host.onboarded_blocks, 4u);
  EXPECT_EQ(cache_->device().async_error(stream_).status, KVC_OK);
  m().check_invariants();
}

// Offload on one stream, then a hit on another: the second call waits for
// the first's copies (the cache orders it after the tier event).
TEST_P(HostTierGpu, AHitOnAnotherStreamSeesTheOffload) {
  const uint32_t T = cache_->config().tokens_per_block;
  cudaStream_t other = nullptr;
  CUDA_OK_(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
  std::vector<int32_t> p(2 * T + 1);
  std::iota(p.begin(), p.end(), 7);
  m().add(1, p.data(), p.size(), {}, stream_);
  for (uint64_t b = 0; b < 2; ++b) {
    const auto v = expected(p[b * T], b);
    CUDA_OK_(cudaMemcpy(cache_->pool(0).block(m().sequence(1).blocks[0][b]), v.data(), v.size(),
                        cudaMemcpyHostToDevice));
  }
  m().commit(1, p.size());
  m().remove(1);
  std::vector<int32_t> q(8 * T);
  std::iota(q.begin(), q.end(), 90000);
  m().add(2, q.data(), q.size(), {}, stream_);  // offloads on stream_
  m().remove(2);
  EXPECT_EQ(m().add(3, p.data(), p.size(), {}, other), 2u * T);  // onboards on `other`
  std::vector<uint8_t> got(bytes());
  for (uint64_t b = 0; b < 2; ++b) {
    CUDA_OK_(cudaMemcpyAsync(got.data(), cache_->pool(0).block(m().sequence(3).blocks[0][b]),
                             bytes(), cudaMemcpyDeviceToHost, other));
    CUDA_OK_(cudaStreamSynchronize(other));
    EXPECT_EQ(std::memcmp(got.data(), expected(p[b * T], b).data(), bytes()), 0) << "block " << b;
  }
  cudaStreamDestroy(other);
  m().check_invariants();
}

// Room made ahead (kvc_cache_make_room) on the caller's stream: the
// offload copies go there, so the model's later writes on that stream into
// the freed blocks come after them; the add then evicts nothing, and a hit
// reads back every byte.
TEST_P(HostTierGpu, RoomMadeAheadOffloadsOnTheStreamBeforeTheBlocksAreReused) {
  const uint32_t T = cache_->config().tokens_per_block;
  std::vector<int32_t> p(4 * T + 1);
  std::iota(p.begin(), p.end(), 3000);
  m().add(1, p.data(), p.size(), {}, stream_);
  for (uint64_t b = 0; b < 4; ++b) {
    const auto v = expected(p[b * T], b);
    CUDA_OK_(cudaMemcpyAsync(cache_->pool(0).block(m().sequence(1).blocks[0][b]), v.data(),
                             v.size(), cudaMemcpyHostToDevice, stream_));
  }
  m().commit(1, p.size());
  m().remove(1);
  EXPECT_EQ(m().make_room(8, stream_), 8u);  // the four cached blocks move out
  EXPECT_EQ(m().stats().host.offloaded_blocks, 4u);
  const uint64_t evicted = m().stats().evicted_blocks;
  std::vector<int32_t> q(8 * T);
  std::iota(q.begin(), q.end(), 70000);
  m().add(2, q.data(), q.size(), {}, stream_);
  EXPECT_EQ(m().stats().evicted_blocks, evicted);  // the add took free blocks
  for (uint32_t blk : m().sequence(2).blocks[0])
    CUDA_OK_(cudaMemsetAsync(cache_->pool(0).block(blk), 0xA5, bytes(), stream_));
  m().remove(2);
  EXPECT_EQ(m().add(3, p.data(), p.size(), {}, stream_), 4u * T);
  std::vector<uint8_t> got(bytes());
  for (uint64_t b = 0; b < 4; ++b) {
    CUDA_OK_(cudaMemcpyAsync(got.data(), cache_->pool(0).block(m().sequence(3).blocks[0][b]),
                             bytes(), cudaMemcpyDeviceToHost, stream_));
    CUDA_OK_(cudaStreamSynchronize(stream_));
    EXPECT_EQ(std::memcmp(got.data(), expected(p[b * T], b).data(), bytes()), 0) << "block " << b;
  }
  EXPECT_EQ(cache_->device().async_error(stream_).status, KVC_OK);
  m().check_invariants();
}

INSTANTIATE_TEST_SUITE_P(Geometries, HostTierGpu,
                         ::testing::Values(Geometry{2, 8, 128, 16, KVC_DTYPE_BF16},  // 128 KiB
                                           Geometry{1, 1, 3, 2, KVC_DTYPE_F16}));     // 24 bytes

}  // namespace
}  // namespace kvc
