// The disk tier on a CUDA cache: the store chain moves records between
// device pools and the disk through pinned staging blocks (copy_tier), the
// path the CPU tests reach only with set_direct_access(false). Blocks
// written in device memory leave primary for the disk, the device blocks
// are overwritten, and a later add loads them back on the caller's stream:
// every byte equal. A second cache on the same directory (a restart) loads
// them too. Two geometries: 128 KiB blocks and 24-byte ones (the copy
// kernel's narrow path). Skips with the reason when no CUDA device is usable.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <numeric>
#include <string>
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

class DiskTierGpu : public ::testing::TestWithParam<Geometry> {
 protected:
  void SetUp() override {
    if ((kvc_features() & KVC_FEATURE_CUDA_DEVICE) == 0)
      GTEST_SKIP() << "no usable CUDA device (kvc_features() = " << kvc_features() << ")";
    char tmpl[] = "/tmp/kvc-disk-gpu-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    const Geometry g = GetParam();
    config_.num_layers = g.layers;
    config_.kv_heads = {g.heads};
    config_.head_dim = g.dim;
    config_.dtype = g.dtype;
    config_.tokens_per_block = g.tokens_per_block;
    config_.device_kind = KVC_DEVICE_CUDA;
    config_.max_tokens = 8ull * g.tokens_per_block;
    config_.partial_reuse = false;  // only full blocks are cached: exact counts
    config_.stores.disk_dir = dir_;
    config_.stores.disk_bytes = 64 * store_record_layout(config_, group_layers(config_)).record_bytes();
    cache_ = std::make_unique<Cache>(config_);
    ASSERT_NE(cache_->manager().stores(), nullptr);
    CUDA_OK_(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  void TearDown() override {
    cache_.reset();
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  BlockManager& m() { return cache_->manager(); }
  uint64_t bytes() const { return cache_->pool(0).block_bytes(); }
  std::vector<uint8_t> expected(int32_t first_token, uint64_t b) const {
    std::vector<uint8_t> v(bytes());
    for (uint64_t i = 0; i < v.size(); ++i) v[i] = pattern(first_token, b, i);
    return v;
  }
  // Adds t, writes each full block's pattern on the device, commits and
  // removes: its full blocks end up cached with their pattern.
  void cache_written(uint64_t id, const std::vector<int32_t>& t) {
    const uint32_t T = config_.tokens_per_block;
    m().add(id, t.data(), t.size(), {}, stream_);
    const Sequence& s = m().sequence(id);
    for (uint64_t b = 0; b < t.size() / T; ++b) {
      const auto v = expected(t[b * T], b);
      CUDA_OK_(cudaMemcpyAsync(cache_->pool(0).block(s.blocks[0][b]), v.data(), v.size(),
                               cudaMemcpyHostToDevice, stream_));
    }
    CUDA_OK_(cudaStreamSynchronize(stream_));
    m().commit(id, t.size());
    m().remove(id);
    m().check_invariants();
  }
  // Caches p's 4 full blocks with their pattern written on the device, then
  // pushes them out of primary (8 new blocks in an 8-block cache) and
  // overwrites every device block: only the disk holds p's KV.
  void cache_on_disk(const std::vector<int32_t>& p) {
    const uint32_t T = config_.tokens_per_block;
    cache_written(1, p);
    std::vector<int32_t> q(8 * T);
    std::iota(q.begin(), q.end(), 50000);
    m().add(2, q.data(), q.size(), {}, stream_);
    for (uint32_t blk : m().sequence(2).blocks[0])
      CUDA_OK_(cudaMemsetAsync(cache_->pool(0).block(blk), 0x5A, bytes(), stream_));
    CUDA_OK_(cudaStreamSynchronize(stream_));
    m().remove(2);
    m().stores()->flush();
    m().check_invariants();
  }
  // Adds p again: its 4 blocks load from the disk; reads them back on the
  // same stream and compares every byte.
  void expect_loaded(uint64_t id, const std::vector<int32_t>& p) {
    const uint32_t T = config_.tokens_per_block;
    EXPECT_EQ(m().add(id, p.data(), p.size(), {}, stream_), 4u * T);
    expect_blocks(id, p, 4, stream_);
    EXPECT_EQ(m().stores()->reports().at(0).onboarded_blocks, 4u);
    EXPECT_EQ(cache_->device().async_error(stream_).status, KVC_OK);
    m().check_invariants();
  }

  // Reads the first n blocks of sequence id back on `stream` and compares
  // each with prompt t's pattern.
  void expect_blocks(uint64_t id, const std::vector<int32_t>& t, uint64_t n, cudaStream_t stream) {
    const uint32_t T = config_.tokens_per_block;
    const Sequence& s = m().sequence(id);
    std::vector<uint8_t> got(bytes());
    for (uint64_t b = 0; b < n; ++b) {
      CUDA_OK_(cudaMemcpyAsync(got.data(), cache_->pool(0).block(s.blocks[0][b]), bytes(),
                               cudaMemcpyDeviceToHost, stream));
      CUDA_OK_(cudaStreamSynchronize(stream));
      EXPECT_EQ(std::memcmp(got.data(), expected(t[b * T], b).data(), bytes()), 0)
          << "block " << b << " of sequence " << id;
    }
  }

  std::string dir_;
  CacheConfig config_;
  std::unique_ptr<Cache> cache_;
  cudaStream_t stream_ = nullptr;
};

TEST_P(DiskTierGpu, DeviceBlocksGoToDiskAndComeBackBitForBit) {
  std::vector<int32_t> p(4 * config_.tokens_per_block + 1);
  std::iota(p.begin(), p.end(), 1000);
  cache_on_disk(p);
  expect_loaded(3, p);
}

// The offers' pinned staging (four slots) and the worker are made when the
// cache is created, not by the first add that evicts (pinning 8 MiB takes
// milliseconds); the commits' keys come from the record writer (keys only).
TEST_P(DiskTierGpu, OfferStagingIsMadeAtCreate) {
  StoreChain& chain = *m().stores();
  EXPECT_EQ(chain.offer_slots_staged(), 4u);
  EXPECT_TRUE(chain.offers_at_eviction());
  EXPECT_TRUE(chain.keys_at_commit());
  std::vector<int32_t> p(4 * config_.tokens_per_block + 1);
  std::iota(p.begin(), p.end(), 3000);
  cache_on_disk(p);
  EXPECT_EQ(chain.offer_slots_staged(), 4u);
  expect_loaded(3, p);
}

TEST_P(DiskTierGpu, ANewCacheOnTheDirectoryLoadsThemOntoTheDevice) {
  std::vector<int32_t> p(4 * config_.tokens_per_block + 1);
  std::iota(p.begin(), p.end(), 7000);
  cache_on_disk(p);
  cache_.reset();  // the destructor drains the queue; the records stay
  cache_ = std::make_unique<Cache>(config_);
  expect_loaded(1, p);
}

// The add that loads p from the disk evicts 5 cached blocks (r's 4 and
// one of u's; their offers deferred, StoreChain::flush_offers) and loads
// p's records into them on a non-blocking stream: r's blocks are copied
// out before, so r comes back from the disk with its own bytes.
TEST_P(DiskTierGpu, AnAddsOffersAreCopiedOutBeforeItsLoadsOverwriteThem) {
  const uint32_t T = config_.tokens_per_block;
  std::vector<int32_t> p(4 * T + 1), r(4 * T), u(4 * T);
  std::iota(p.begin(), p.end(), 3000);
  std::iota(r.begin(), r.end(), 60000);
  std::iota(u.begin(), u.end(), 70000);
  cache_on_disk(p);  // the 8 device blocks free again
  cache_written(10, r);
  cache_written(11, u);  // 8 cached blocks with their pattern
  expect_loaded(3, p);
  m().remove(3);
  m().stores()->flush();  // r's records sealed and put (the offer worker's, after add 3)
  EXPECT_EQ(m().add(4, r.data(), r.size(), {}, stream_), 3u * T);  // r's first 3 from the disk
  expect_blocks(4, r, 3, stream_);
  EXPECT_EQ(m().stores()->reports().at(0).onboarded_blocks, 4u + 3u);
  EXPECT_EQ(cache_->device().async_error(stream_).status, KVC_OK);
  m().check_invariants();
}

// An add's offers are copied out on its stream and sealed by the offer
// worker after the call returns (StoreChain::put_slot): the caller's
// kernels that overwrite the evicted blocks right after the add, on the
// same stream, come after the copies, so the records hold the old bytes.
TEST_P(DiskTierGpu, OffersInFlightKeepTheBytesTheCallersNextKernelsOverwrite) {
  const uint32_t T = config_.tokens_per_block;
  std::vector<int32_t> r(4 * T), u(4 * T), q(8 * T);
  std::iota(r.begin(), r.end(), 64000);
  std::iota(u.begin(), u.end(), 65000);
  std::iota(q.begin(), q.end(), 66000);
  cache_written(1, r);
  cache_written(2, u);  // 8 cached blocks with their pattern
  m().add(3, q.data(), q.size(), {}, stream_);  // evicts all 8: offers out
  for (uint32_t blk : m().sequence(3).blocks[0])  // no wait in between
    CUDA_OK_(cudaMemsetAsync(cache_->pool(0).block(blk), 0x5A, bytes(), stream_));
  m().remove(3);
  m().stores()->flush();
  EXPECT_EQ(m().stores()->reports().at(0).offered_blocks, 8u);
  // r's first 3 blocks load from the disk onto another stream.
  cudaStream_t other = nullptr;
  CUDA_OK_(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
  EXPECT_EQ(m().add(4, r.data(), r.size(), {}, other), 3u * T);
  expect_blocks(4, r, 3, other);
  EXPECT_EQ(cache_->device().async_error(other).status, KVC_OK);
  m().remove(4);
  m().check_invariants();
  CUDA_OK_(cudaStreamDestroy(other));
}

// Room made ahead (kvc_cache_make_room) on the caller's stream: the offers
// of the 8 evicted blocks are copied out there, before the caller's next
// kernels on that stream overwrite the freed blocks; the add that follows
// evicts nothing, and r comes back from the disk bit for bit.
TEST_P(DiskTierGpu, RoomMadeAheadOffersOnTheStreamBeforeTheBlocksAreReused) {
  const uint32_t T = config_.tokens_per_block;
  std::vector<int32_t> r(4 * T), u(4 * T), q(8 * T);
  std::iota(r.begin(), r.end(), 67000);
  std::iota(u.begin(), u.end(), 68000);
  std::iota(q.begin(), q.end(), 69000);
  cache_written(1, r);
  cache_written(2, u);  // 8 cached blocks with their pattern
  EXPECT_EQ(m().make_room(8, stream_), 8u);  // evicts all 8: offers out
  const uint64_t evicted = m().stats().evicted_blocks;
  m().add(3, q.data(), q.size(), {}, stream_);
  EXPECT_EQ(m().stats().evicted_blocks, evicted);
  for (uint32_t blk : m().sequence(3).blocks[0])  // no wait in between
    CUDA_OK_(cudaMemsetAsync(cache_->pool(0).block(blk), 0x5A, bytes(), stream_));
  m().remove(3);
  m().stores()->flush();
  EXPECT_EQ(m().stores()->reports().at(0).offered_blocks, 8u);
  EXPECT_EQ(m().add(4, r.data(), r.size(), {}, stream_), 3u * T);  // r's first 3 from the disk
  expect_blocks(4, r, 3, stream_);
  EXPECT_EQ(cache_->device().async_error(stream_).status, KVC_OK);
  m().check_invariants();
}

// Primary -> host -> disk on the device: p is pushed to the host tier, then
// out of it to the disk (host nodes offered with one device wait for a
// call's victims, StoreChain::host_blocks_written); it loads back from the
// disk with every byte.
TEST_P(DiskTierGpu, BlocksPassTheHostTierOnTheirWayToTheDisk) {
  const uint32_t T = config_.tokens_per_block;
  const uint64_t set_bytes = bytes();
  cache_.reset();
  config_.host_cache_bytes = 4 * set_bytes;  // 4 block sets
  cache_ = std::make_unique<Cache>(config_);
  std::vector<int32_t> p(4 * T + 1), r(4 * T), u(4 * T), w(4 * T);
  std::iota(p.begin(), p.end(), 4000);
  std::iota(r.begin(), r.end(), 61000);
  std::iota(u.begin(), u.end(), 62000);
  std::iota(w.begin(), w.end(), 63000);
  cache_written(1, p);
  cache_written(2, r);  // 8 blocks cached
  cache_written(3, u);  // p's 4 to the host tier
  cache_written(4, w);  // r's 4 to the host tier, p's 4 out of it to the disk
  m().stores()->flush();
  EXPECT_EQ(m().stores()->reports().at(0).io.blocks, 4u);
  expect_loaded(5, p);
}

INSTANTIATE_TEST_SUITE_P(Geometries, DiskTierGpu,
                         ::testing::Values(Geometry{2, 8, 128, 16, KVC_DTYPE_BF16},  // 128 KiB
                                           Geometry{1, 1, 3, 2, KVC_DTYPE_F16}));     // 24 bytes

}  // namespace
}  // namespace kvc
