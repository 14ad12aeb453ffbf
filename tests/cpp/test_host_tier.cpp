// The secondary (host) tier with exact numbers: which blocks are offloaded,
// dropped or evicted from the host tier for a scripted sequence of adds and
// removes; offload then onboard round trips with the KV bytes checked bit
// for bit; failed copies; the host tier's own LRU. Every step runs the
// invariant checker (both tiers).
#include <gtest/gtest.h>

#include <memory>
#include <numeric>
#include <vector>

#include "core/cache.h"
#include "base/error.h"
#include "kv_content.h"
#include "manager_fixture.h"
#include "tier_script.h"

namespace kvc {
namespace {

using test::seq;
using test::status_of;
using test::tier_config;
constexpr uint64_t kSetBytes = test::kTierSetBytes;

class HostTierTest : public ::testing::Test, protected test::TierScript {};

TEST_F(HostTierTest, SizedFromHostCacheBytesLikeThePrimaryPools) {
  make(tier_config(4, 3));
  EXPECT_EQ(cache_->host_plan().blocks_per_group, 3u);
  EXPECT_EQ(cache_->host_plan().total_bytes, 3 * kSetBytes);
  EXPECT_EQ(stats().host_blocks, 3u);
  EXPECT_EQ(stats().host_free_blocks, 3u);
  // Less than one block set of host memory: no host tier.
  CacheConfig c = tier_config(4, 0);
  c.host_cache_bytes = kSetBytes - 1;
  make(c);
  EXPECT_FALSE(m().host_tier().enabled());
  EXPECT_EQ(stats().host_blocks, 0u);
}

// The scripted sequence: 4 primary blocks, 3 host blocks, prompts of two
// full blocks plus one token (the tail is recomputed, never published).
TEST_F(HostTierTest, ScriptedVictimsAndTiers) {
  make(tier_config(4, 3));
  const auto A = seq(0, 9), B = seq(100, 9), C = seq(200, 9), D = seq(300, 13);

  const auto a = cache_prompt(1, A);  // a0 a1 cached at 35; 2 blocks free
  EXPECT_EQ(tiers(a, A), "PP");

  // B (priority 10) needs 3 blocks, 2 are free: the LRU leaf a1 (35 >= 35)
  // is offloaded; a0, whose only child is now in the host tier, is a leaf.
  const auto b = cache_prompt(2, B, 10);
  EXPECT_EQ(tiers(a, A), "PH");
  EXPECT_EQ(tiers(b, B), "PP");
  EXPECT_EQ(stats().host.offloaded_blocks, 1u);
  EXPECT_EQ(stats().evicted_blocks, 0u);
  EXPECT_EQ(stats().host.offloaded_bytes, kSetBytes);

  // C (priority 80) needs 3, 1 is free: b1 then b0 go first (priority 10),
  // and are dropped: below secondary_offload_min_priority.
  const auto c = cache_prompt(3, C, 80);
  EXPECT_EQ(tiers(b, B), "--");
  EXPECT_EQ(tiers(a, A), "PH");
  EXPECT_EQ(tiers(c, C), "PP");
  EXPECT_EQ(stats().host.offloaded_blocks, 1u);
  EXPECT_EQ(stats().evicted_blocks, 2u);

  // D needs 4, 1 is free: a0 (35) then c1, c0 (80) are offloaded. The host
  // tier has room for two of them; for c0 its LRU leaf a1 (priority 35,
  // lower than c1's 80) leaves the tree.
  add(4, D);
  EXPECT_EQ(tiers(a, A), "H-");
  EXPECT_EQ(tiers(c, C), "HH");
  EXPECT_EQ(stats().host.offloaded_blocks, 4u);
  EXPECT_EQ(stats().evicted_blocks, 3u);
  EXPECT_EQ(stats().host_free_blocks, 0u);
  EXPECT_EQ(stats().host_cached_blocks, 3u);
  EXPECT_EQ(stats().free_blocks, 0u);
  remove(4);  // nothing committed: its blocks go back to the free list

  // C again: both blocks are onboarded into fresh primary blocks, bytes
  // equal (add() checks every reused row), a0 stays in the host tier.
  EXPECT_EQ(m().probe(C.data(), C.size(), {}), 8u);
  EXPECT_EQ(add(5, C), 8u);
  EXPECT_EQ(tiers(c, C), "PP");
  EXPECT_EQ(tiers(a, A), "H-");
  EXPECT_EQ(stats().host.onboarded_blocks, 2u);
  EXPECT_EQ(stats().host.onboarded_bytes, 2 * kSetBytes);
  EXPECT_EQ(stats().host_free_blocks, 2u);
  EXPECT_EQ(m().sequence(5).blocks[0][0], m().tree().block(c[0], 0));
  EXPECT_EQ(stats().reused_blocks, 2u);
}

TEST_F(HostTierTest, RoundTripKeepsEveryByteInTwoPools) {
  CacheConfig c = tier_config(0, 0);
  c.num_layers = 3;
  c.kv_heads = {1, 2, 2};  // groups of 128 and 512 block bytes: two pools
  c.max_tokens = 6 * 4;
  c.host_cache_bytes = 1 << 20;
  c.layout = KVC_LAYOUT_HND;
  make(c);
  ASSERT_EQ(cache_->num_pools(), 2u);
  const auto P = seq(1000, 17);  // 4 full blocks
  const auto nodes = cache_prompt(1, P);
  add(2, seq(5000, 24));  // takes all 6 blocks: the 4 cached ones are offloaded
  EXPECT_EQ(tiers(nodes, P), "HHHH");
  EXPECT_EQ(stats().host.offloaded_blocks, 4u);
  EXPECT_EQ(faults_.copies, 2u);  // one batch per pool
  remove(2);
  EXPECT_EQ(add(3, P), 16u);  // checks the 16 onboarded rows in both groups
  EXPECT_EQ(tiers(nodes, P), "PPPP");
  EXPECT_EQ(faults_.copies, 4u);
}

TEST_F(HostTierTest, OffloadedChildrenDoNotPinTheirParent) {
  make(tier_config(4, 8));
  const auto A = seq(0, 13);  // a0 a1 a2
  const auto a = cache_prompt(1, A);
  add(2, seq(100, 9));  // 3 blocks, 1 free: a2 then a1 are offloaded
  EXPECT_EQ(tiers(a, A), "PHH");
  remove(2);
  add(3, seq(200, 13));  // 4 blocks: a0 is a leaf now (children offloaded)
  EXPECT_EQ(tiers(a, A), "HHH");
  EXPECT_EQ(stats().evicted_blocks, 0u);
  remove(3);
  EXPECT_EQ(add(4, A), 12u);
  EXPECT_EQ(tiers(a, A), "PPP");
}

TEST_F(HostTierTest, PrimaryParentWithHostAndPrimaryChildren) {
  make(tier_config(5, 8));
  const auto A = seq(0, 9);                  // a0 a1
  const auto X = {0, 1, 2, 3, 50, 51, 52, 53, 54};  // a0 x1
  const auto a = cache_prompt(1, A);
  add(2, seq(100, 17));  // 5 blocks, 3 free: a1 then a0 offloaded
  EXPECT_EQ(tiers(a, A), "HH");
  remove(2);
  // Reusing a0 alone onboards it; its new child x1 is computed and
  // published in primary memory next to its offloaded sibling a1.
  const std::vector<int32_t> xv(X);
  const auto x = cache_prompt(3, xv);
  EXPECT_EQ(tiers(a, A), "PH");
  EXPECT_EQ(x[0], a[0]);
  EXPECT_EQ(tiers(x, xv), "PP");
  EXPECT_EQ(m().tree().node(a[0]).num_children, 2u);
  // a0 is not a leaf for primary eviction while x1 is in primary memory:
  // x1 goes first, then a0.
  add(4, seq(300, 17));
  EXPECT_EQ(tiers(x, xv), "HH");
  EXPECT_EQ(tiers(a, A), "HH");
  remove(4);
  // Both continuations of the host parent a0 are still reusable.
  EXPECT_EQ(add(5, A), 8u);
  EXPECT_EQ(add(6, xv), 8u);
}

// A host-tier parent whose key a running sequence also computed takes that
// sequence's blocks when it commits (no copy) and gets a primary child.
TEST_F(HostTierTest, CommitAdoptsAHostParentAndPublishesAPrimaryChild) {
  make(tier_config(6, 8));
  const auto A = seq(0, 9);                                  // a0 a1
  const std::vector<int32_t> Y = {0, 1, 2, 3, 70, 71, 72, 73, 74};  // a0 y1
  add(9, Y);  // computes its own a0 and y1 before A is cached
  const auto a = cache_prompt(1, A);
  add(2, seq(100, 9));  // 3 blocks, 1 free: a1 then a0 are offloaded
  EXPECT_EQ(tiers(a, A), "HH");
  const uint64_t copies = faults_.copies;
  commit_all(9);  // finds a0 in the host tier: adopts Y's block, publishes y1 under it
  EXPECT_EQ(faults_.copies, copies);
  EXPECT_EQ(tiers(a, A), "PH");
  EXPECT_EQ(m().sequence(9).nodes[0], a[0]);
  EXPECT_EQ(m().sequence(9).blocks[0][0], m().tree().block(a[0], 0));
  EXPECT_EQ(m().tree().node(m().sequence(9).nodes[1]).parent, a[0]);
  remove(9);
  remove(2);
  EXPECT_EQ(add(3, A), 8u);  // a1 onboarded under the adopted a0
  EXPECT_EQ(add(4, Y), 8u);
}

TEST_F(HostTierTest, HostTierEvictsByPriorityThenAge) {
  make(tier_config(2, 2));
  const auto A = seq(0, 5), B = seq(100, 5), C = seq(200, 5), D = seq(300, 5);
  // Two primary blocks, one block per prompt plus its recomputed tail.
  const auto a = cache_prompt(1, A, 90);
  const auto b = cache_prompt(2, B, 50);  // a0 offloaded
  EXPECT_EQ(tiers(a, A), "H");
  const auto c = cache_prompt(3, C, 50);  // b0 offloaded: the host tier is full
  EXPECT_EQ(tiers(b, B), "H");
  const auto d = cache_prompt(4, D, 50);  // c0 offloaded: b0 (50) leaves before a0 (90)
  EXPECT_EQ(tiers(b, B), "-");
  EXPECT_EQ(tiers(a, A), "H");
  EXPECT_EQ(tiers(c, C), "H");
  EXPECT_EQ(tiers(d, D), "P");
  add(5, seq(400, 8));  // d0 offloaded: c0 (50, older than d0) leaves
  EXPECT_EQ(tiers(c, C), "-");
  EXPECT_EQ(tiers(a, A), "H");
  EXPECT_EQ(tiers(d, D), "H");
  EXPECT_EQ(stats().evicted_blocks, 2u);
  EXPECT_EQ(stats().host.offloaded_blocks, 4u);
}

TEST_F(HostTierTest, ResetReuseEmptiesBothTiers) {
  make(tier_config(3, 4));
  cache_prompt(1, seq(0, 9));
  add(2, seq(100, 9));
  remove(2);
  EXPECT_GT(stats().host_cached_blocks, 0u);
  m().reset_reuse();
  check();
  EXPECT_EQ(stats().tree_nodes, 0u);
  EXPECT_EQ(stats().host_free_blocks, 4u);
  EXPECT_EQ(stats().free_blocks, 3u);
}

TEST_F(HostTierTest, MinPriorityZeroOffloadsEverything) {
  CacheConfig c = tier_config(3, 4);
  c.secondary_offload_min_priority = 0;
  make(c);
  const auto A = seq(0, 9);
  const auto a = cache_prompt(1, A, 0);
  add(2, seq(100, 9));
  EXPECT_EQ(tiers(a, A), "HH");
  c.secondary_offload_min_priority = 100;
  make(c);
  const auto a2 = cache_prompt(1, A, 90);
  add(2, seq(100, 9));
  EXPECT_EQ(tiers(a2, A), "--");
  EXPECT_EQ(stats().host.offloaded_blocks, 0u);
}

// --- Failed copies ----------------------------------------------------------

TEST_F(HostTierTest, FailedOffloadLeavesTheBlocksInPrimaryMemory) {
  make(tier_config(4, 4));
  const auto A = seq(0, 9);
  const auto a = cache_prompt(1, A);
  const auto before = stats();
  faults_.fail_copy(1);
  const std::vector<int32_t> B = seq(100, 13);
  EXPECT_EQ(status_of([&] { m().add(2, B.data(), B.size(), {}, nullptr); }), KVC_ERR_DEVICE);
  check();  // no tree entry points at the scribbled destinations
  EXPECT_EQ(tiers(a, A), "PP");
  EXPECT_EQ(stats().host_free_blocks, before.host_free_blocks);
  EXPECT_EQ(stats().free_blocks, before.free_blocks);
  EXPECT_EQ(stats().cached_blocks, before.cached_blocks);
  EXPECT_EQ(stats().host.offloaded_blocks, 0u);
  EXPECT_EQ(stats().num_sequences, 0u);
  // The copy works the next time.
  add(2, B);
  EXPECT_EQ(tiers(a, A), "HH");
}

TEST_F(HostTierTest, FailedOnboardLeavesTheBlocksInTheHostTier) {
  make(tier_config(4, 4));
  const auto A = seq(0, 9);
  const auto a = cache_prompt(1, A);
  add(2, seq(100, 13));
  remove(2);
  EXPECT_EQ(tiers(a, A), "HH");
  const auto before = stats();
  faults_.fail_copy(1);
  EXPECT_EQ(status_of([&] { m().add(3, A.data(), A.size(), {}, nullptr); }), KVC_ERR_DEVICE);
  check();
  EXPECT_EQ(tiers(a, A), "HH");
  EXPECT_EQ(stats().free_blocks, before.free_blocks);
  EXPECT_EQ(stats().host_cached_blocks, before.host_cached_blocks);
  EXPECT_EQ(stats().host.onboarded_blocks, 0u);
  EXPECT_EQ(add(3, A), 8u);
  EXPECT_EQ(tiers(a, A), "PP");
}

TEST_F(HostTierTest, FailedOnboardAfterOffloadsKeepsTheOffloads) {
  make(tier_config(3, 4));
  const auto A = seq(0, 9), B = seq(100, 9);
  const auto a = cache_prompt(1, A);
  const auto b = cache_prompt(2, B);  // a1 then a0 offloaded
  EXPECT_EQ(tiers(a, A), "HH");
  // A again: b1, b0 make room (offload batch), then a0, a1 come back
  // (onboard batch), which fails.
  faults_.fail_copy(2);
  EXPECT_EQ(status_of([&] { m().add(3, A.data(), A.size(), {}, nullptr); }), KVC_ERR_DEVICE);
  check();
  EXPECT_EQ(tiers(a, A), "HH");  // still in the host tier, intact
  EXPECT_EQ(tiers(b, B), "HH");  // the offloads stand
  EXPECT_EQ(stats().free_blocks, 3u);
  EXPECT_EQ(stats().num_sequences, 0u);
  EXPECT_EQ(add(3, A), 8u);
  EXPECT_EQ(tiers(a, A), "PP");
}

}  // namespace
}  // namespace kvc
