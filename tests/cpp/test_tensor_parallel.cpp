// Tensor parallelism in the core (rank_pools.h): failures on one rank leave
// every rank as it was. Creating a cache of 2 or 4 ranks whose k-th
// allocation (on any rank) fails throws and releases everything; a resize
// whose growth cannot be backed on rank 1 changes no rank; an offload copy
// that fails on rank 1 leaves the blocks in primary memory, as on one rank.
#include <gtest/gtest.h>

#include "backend/cpu_device.h"
#include "base/error.h"
#include "core/cache.h"
#include "kv_content.h"
#include "manager_fixture.h"

namespace kvc {
namespace {

using test::FaultPlan;
using test::seq;
using test::status_of;

CacheConfig config(uint32_t ranks, uint64_t host_bytes) {
  CacheConfig c;
  c.num_layers = 2;
  c.kv_heads = {4};
  c.head_dim = 4;
  c.dtype = KVC_DTYPE_F32;
  c.tokens_per_block = 4;
  c.max_tokens = 4 * 4;
  c.host_cache_bytes = host_bytes;
  c.partial_reuse = false;
  for (uint32_t r = 0; r < ranks; ++r) c.rank_ordinals.push_back(int32_t(r));
  return c;
}

// One CPU device per rank; `hooks[r]` (may be null) is rank r's fault hook.
std::unique_ptr<Cache> cache_on(const CacheConfig& c, const std::vector<FaultPlan*>& hooks) {
  std::vector<std::unique_ptr<Device>> devices;
  for (uint32_t r = 0; r < c.num_ranks(); ++r) {
    auto d = std::make_unique<CpuDevice>();
    if (r < hooks.size() && hooks[r] != nullptr) d->set_fault_hook(hooks[r]);
    devices.push_back(std::move(d));
  }
  return std::make_unique<Cache>(c, std::move(devices));
}

// Bytes of one block set of one rank (2 layers, K and V, 4 tokens, the
// rank's heads, dim 4, f32).
uint64_t set_bytes(uint32_t ranks) { return 2 * 2 * 4 * (4 / ranks) * 4 * 4; }

TEST(TensorParallel, EveryAllocationOfEveryRankCanFailAtCreation) {
  for (uint32_t ranks : {2u, 4u}) {
    const CacheConfig c = config(ranks, 4 * set_bytes(ranks));
    FaultPlan ok;
    {
      auto cache = cache_on(c, std::vector<FaultPlan*>(ranks, &ok));
      EXPECT_EQ(cache->num_ranks(), ranks);
    }
    EXPECT_EQ(ok.live, 0);
    ASSERT_GE(ok.allocations, 2u * ranks);  // a pool and a host pool per rank
    for (uint64_t k = 1; k <= ok.allocations; ++k) {
      FaultPlan plan;
      plan.fail_allocation(uint32_t(k));
      EXPECT_EQ(status_of([&] { cache_on(c, std::vector<FaultPlan*>(ranks, &plan)); }),
                KVC_ERR_OUT_OF_MEMORY)
          << ranks << " ranks, allocation " << k;
      EXPECT_EQ(plan.live, 0) << ranks << " ranks, allocation " << k << " leaked";
    }
  }
}

TEST(TensorParallel, AResizeThatRankOneCannotBackChangesNoRank) {
  CacheConfig c = config(2, 0);
  c.max_tokens = 0;
  // A page of the CPU device is 4096 bytes: 4, then 16 blocks of one page.
  c.primary_bytes = 16 * 1024;
  c.max_primary_bytes = 64 * 1024;
  c.kv_heads = {16};
  c.head_dim = 8;  // 2 layers x 2 x 4 tokens x 8 heads x 8 x 4 bytes = 4 KiB per rank and block
  FaultPlan rank1;
  auto cache = cache_on(c, {nullptr, &rank1});
  const uint64_t before = cache->pool(0, 0).num_blocks();
  ASSERT_EQ(cache->pool(0, 1).num_blocks(), before);
  const auto p = seq(0, 9);
  uint64_t cached = 0;
  Refusal refusal;
  ASSERT_TRUE(cache->add(1, p.data(), p.size(), {}, nullptr, &cached, &refusal));
  rank1.fail_allocation(1);
  EXPECT_EQ(status_of([&] { cache->resize(64 * 1024); }), KVC_ERR_OUT_OF_MEMORY);
  for (uint32_t r = 0; r < 2; ++r) EXPECT_EQ(cache->pool(0, r).num_blocks(), before) << r;
  EXPECT_EQ(cache->plan().total_bytes, 16u * 1024);
  cache->check_invariants();
  cache->resize(64 * 1024);
  for (uint32_t r = 0; r < 2; ++r) EXPECT_EQ(cache->pool(0, r).num_blocks(), 4 * before) << r;
  cache->check_invariants();
}

TEST(TensorParallel, AnOffloadThatFailsOnRankOneLeavesTheBlocksInPrimaryMemory) {
  FaultPlan rank1;
  auto cache = cache_on(config(2, 4 * set_bytes(2)), {nullptr, &rank1});
  BlockManager& m = cache->manager();
  const auto a = seq(0, 9);
  m.add(1, a.data(), a.size(), {}, nullptr);
  m.commit(1, a.size());
  m.remove(1);
  const CacheStats before = m.stats();
  rank1.fail_copy(1);
  const auto b = seq(100, 13);
  EXPECT_EQ(status_of([&] { m.add(2, b.data(), b.size(), {}, nullptr); }), KVC_ERR_DEVICE);
  m.check_invariants();
  cache->check_invariants();
  EXPECT_EQ(m.stats().free_blocks, before.free_blocks);
  EXPECT_EQ(m.stats().cached_blocks, before.cached_blocks);
  EXPECT_EQ(m.stats().host.offloaded_blocks, 0u);
  EXPECT_EQ(m.stats().num_sequences, 0u);
  // The copy works the next time, on both ranks.
  m.add(2, b.data(), b.size(), {}, nullptr);
  EXPECT_EQ(m.stats().host.offloaded_blocks, 2u);
  m.check_invariants();
}

TEST(TensorParallel, DevicesMustMatchTheRanks) {
  std::vector<std::unique_ptr<Device>> one;
  one.push_back(std::make_unique<CpuDevice>());
  EXPECT_EQ(status_of([&] { Cache(config(2, 0), std::move(one)); }), KVC_ERR_INVALID_ARGUMENT);
}

}  // namespace
}  // namespace kvc
