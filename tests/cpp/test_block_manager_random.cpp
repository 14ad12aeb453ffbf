// Randomized operations on the cache manager with a fixed seed. After every
// operation the invariant checker runs; after every failed operation the
// whole state (every block's ref count and tree node, the counts, every
// sequence) must equal the state before it; a probe must predict the next
// add exactly and change nothing. With events on, a router's index fed only
// by the drained events must equal the snapshot after every operation, and
// a failed operation emits nothing. The driver is random_manager_ops.h;
// here, the configurations it runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <vector>

#include "core/cache.h"
#include "base/error.h"
#include "event_shadow.h"
#include "random_manager_ops.h"

namespace kvc {
namespace {

using test::RandomOps;

CacheConfig base(uint64_t blocks) {
  CacheConfig c;
  c.num_layers = 2;
  c.kv_heads = {1};
  c.head_dim = 2;
  c.dtype = KVC_DTYPE_F32;
  c.tokens_per_block = 4;
  c.max_tokens = blocks * 4;
  return c;
}

TEST(RandomOps, HundredThousandOperationsKeepEveryInvariant) {
  RandomOps r(base(48), 20261122);
  r.run(100000);
  EXPECT_GT(r.successes, 50000u);
  EXPECT_GT(r.failures, 1000u);  // out of blocks, bad arguments: exercised
}

TEST(RandomOps, TwoGroupsSharingOnePool) {
  CacheConfig c = base(40);
  c.windows = {0, 64};  // equal block bytes: one pool, two groups
  RandomOps r(c, 7);
  r.run(20000);
}

TEST(RandomOps, TwoGroupsInTwoPools) {
  CacheConfig c = base(40);
  c.num_layers = 3;
  c.kv_heads = {1, 2, 1};
  RandomOps r(c, 8);
  r.run(20000);
}

TEST(RandomOps, CopyOnPartialReuseOff) {
  CacheConfig c = base(40);
  c.copy_on_partial_reuse = false;
  RandomOps r(c, 9);
  r.run(20000);
}

TEST(RandomOps, PartialReuseOff) {
  CacheConfig c = base(40);
  c.partial_reuse = false;
  RandomOps r(c, 10);
  r.run(20000);
}

TEST(RandomOps, RetentionOnTheManualClock) {
  CacheConfig c = base(40);
  c.manual_clock = true;
  RandomOps r(c, 12);
  r.run(30000);
  EXPECT_GT(r.successes, 15000u);
  EXPECT_GT(r.max_expiries, 3u);
}

TEST(RandomOps, RetentionWithTwoGroupsInTwoPools) {
  CacheConfig c = base(40);
  c.num_layers = 3;
  c.kv_heads = {1, 2, 1};
  c.manual_clock = true;
  RandomOps r(c, 13);
  r.run(10000);
}

// Windows of 2 and 3 blocks (4-token blocks) against prompts of up to 49
// tokens: blocks leave the window, windowed slots are evicted from
// interior nodes, reuse stops where a window lacks a block, rewinds past a
// released block are refused.
TEST(RandomOps, FullAndWindowedGroupsSharingOnePool) {
  CacheConfig c = base(40);
  c.num_layers = 3;
  c.windows = {0, 8, 12};
  RandomOps r(c, 21);
  r.run(30000);
  EXPECT_GT(r.successes, 15000u);
  for (uint32_t g : {1u, 2u}) {
    EXPECT_GT(r.groups[g].released_blocks, 1000u) << g;
    EXPECT_GT(r.groups[g].evicted_blocks, 1000u) << g;
    EXPECT_LT(r.groups[g].reused_blocks, r.groups[0].reused_blocks) << g;
  }
  EXPECT_EQ(r.groups[0].released_blocks, 0u);
}

TEST(RandomOps, FullAndWindowedGroupsInTwoPools) {
  CacheConfig c = base(40);
  c.windows = {0, 8};
  c.kv_heads = {1, 2};
  c.manual_clock = true;
  RandomOps r(c, 22);
  r.run(20000);
}

TEST(RandomOps, WindowedGroupsOnly) {
  CacheConfig c = base(40);
  c.windows = {8, 12};
  RandomOps r(c, 23);
  r.run(30000);
  EXPECT_GT(r.successes, 15000u);
  for (uint32_t g : {0u, 1u}) {
    EXPECT_GT(r.groups[g].released_blocks, 1000u) << g;
    EXPECT_GT(r.groups[g].reused_blocks, 300u) << g;
    EXPECT_GT(r.groups[g].evicted_blocks, 1000u) << g;
  }
}

TEST(RandomOps, WindowedGroupsOnlyCopyOnPartialReuseOff) {
  CacheConfig c = base(40);
  c.windows = {8};
  c.copy_on_partial_reuse = false;
  c.manual_clock = true;
  RandomOps r(c, 24);
  r.run(20000);
}

// The host tier under every operation (pins, forks, rewinds, resets,
// retention expiries in both tiers); bytes are checked in test_host_tier_random.
TEST(RandomOps, HostTierWithRetention) {
  CacheConfig c = base(40);
  c.host_cache_bytes = 12 * 128;  // 12 block sets of 128 bytes
  c.manual_clock = true;
  RandomOps r(c, 14);
  r.run(20000);
  EXPECT_GT(r.m().stats().host.offloaded_blocks, 1000u);
  EXPECT_GT(r.m().stats().host.onboarded_blocks, 100u);
}

TEST(RandomOps, HostTierTwoGroupsMinPriority80) {
  CacheConfig c = base(40);
  c.num_layers = 3;
  c.kv_heads = {1, 2, 1};
  c.host_cache_bytes = 8 * 256;  // 8 sets of two 128-byte blocks
  c.secondary_offload_min_priority = 80;
  RandomOps r(c, 15);
  r.run(10000);
  EXPECT_GT(r.m().stats().host.offloaded_blocks, 100u);
}

// Tiny pools where nearly every call evicts, one full and one windowed
// layer (window 9, blocks of 4), calls focused on fork families: forks of
// forks, pins, rewinds into published blocks and removals interleave on the
// same blocks, with and without a host tier, and windowed only. The
// defects the C API fuzzer found (a windowed block shared with a pin
// published into a new node; an onboard short of primary blocks) live here.
TEST(RandomOps, TinyPoolWindowFamilies) {
  CacheConfig c = base(10);
  c.windows = {0, 9};
  RandomOps r(c, 31);
  r.focus_on_families();
  r.run(30000);
  EXPECT_GT(r.successes, 15000u);
  EXPECT_GT(r.groups[1].evicted_blocks, 1000u);
}

TEST(RandomOps, TinyPoolWindowFamiliesHostTier) {
  CacheConfig c = base(10);
  c.windows = {0, 9};
  c.host_cache_bytes = 6 * 128;  // 6 sets of two 64-byte blocks
  c.manual_clock = true;
  RandomOps r(c, 32);
  r.focus_on_families();
  r.run(30000);
  // One shared pool: windowed slots are mostly evicted before their node,
  // so few offloaded prefixes stay reusable (onboards: the next test).
  EXPECT_GT(r.m().stats().host.offloaded_blocks, 1000u);
}

TEST(RandomOps, TinyPoolWindowFamiliesSharedPoolHostTier) {
  CacheConfig c = base(10);
  c.num_layers = 3;
  c.windows = {0, 9, 0};  // the full layers form one group: block bytes 2:1, two pools
  c.host_cache_bytes = 6 * 192;
  RandomOps r(c, 33);
  r.focus_on_families();
  r.run(20000);
  EXPECT_GT(r.m().stats().host.onboarded_blocks, 100u);
}

TEST(RandomOps, TinyPoolWindowedOnlyFamilies) {
  CacheConfig c = base(10);
  c.windows = {9};
  RandomOps r(c, 34);
  r.focus_on_families();
  r.run(20000);
  EXPECT_GT(r.groups[0].evicted_blocks, 1000u);
}

TEST(RandomOps, BlockReuseOff) {
  CacheConfig c = base(40);
  c.block_reuse = false;
  RandomOps r(c, 11);
  r.run(10000);
}

// Events on: the shadow index fed by events equals the snapshot after every
// operation, across windows, host tiers, retention expiry, forks, rewinds,
// resets and refusals; small rings force LOST and resyncs.
void expect_events_seen(const RandomOps& r, bool lost) {
  EXPECT_GT(r.shadow.kinds[KVC_EVENT_STORED], 1000u);
  EXPECT_GT(r.shadow.kinds[KVC_EVENT_REMOVED], 1000u);
  EXPECT_GT(r.shadow.kinds[KVC_EVENT_CLEARED], 0u);
  if (lost) EXPECT_GT(r.shadow.resyncs, 10u);
  else EXPECT_EQ(r.shadow.resyncs, 0u);
}

TEST(RandomOps, EventsMirrorTheCacheWithRetention) {
  CacheConfig c = base(40);
  c.manual_clock = true;
  c.event_buffer_size = 4096;
  RandomOps r(c, 41);
  r.run(15000);
  expect_events_seen(r, false);
  EXPECT_GT(r.shadow.kinds[KVC_EVENT_PRIORITY_CHANGED], 100u);
}

TEST(RandomOps, EventsMirrorWindowsInOnePool) {
  CacheConfig c = base(40);
  c.num_layers = 3;
  c.windows = {0, 8, 12};
  c.event_buffer_size = 4096;
  RandomOps r(c, 42);
  r.run(15000);
  expect_events_seen(r, false);
}

TEST(RandomOps, EventsMirrorWindowedOnly) {
  CacheConfig c = base(40);
  c.windows = {8, 12};
  c.event_buffer_size = 4096;
  RandomOps r(c, 43);
  r.run(15000);
  expect_events_seen(r, false);
}

TEST(RandomOps, EventsMirrorTheHostTier) {
  CacheConfig c = base(40);
  c.host_cache_bytes = 12 * 128;
  c.manual_clock = true;
  c.event_buffer_size = 4096;
  RandomOps r(c, 44);
  r.run(15000);
  expect_events_seen(r, false);
  EXPECT_GT(r.shadow.kinds[KVC_EVENT_TIER_CHANGED], 1000u);
}

TEST(RandomOps, EventsMirrorTinyPoolFamiliesHostTierWindows) {
  CacheConfig c = base(10);
  c.num_layers = 3;
  c.windows = {0, 9, 0};
  c.host_cache_bytes = 6 * 192;
  c.manual_clock = true;
  c.event_buffer_size = 4096;
  RandomOps r(c, 45);
  r.focus_on_families();
  r.run(15000);
  EXPECT_GT(r.shadow.kinds[KVC_EVENT_TIER_CHANGED], 500u);
}

TEST(RandomOps, EventsLostInASmallRingThenResync) {
  CacheConfig c = base(40);
  c.windows = {0, 8};
  c.host_cache_bytes = 8 * 128;
  c.event_buffer_size = 3;
  RandomOps r(c, 46);
  r.run(15000);
  expect_events_seen(r, true);
  EXPECT_GT(r.shadow.lost, 100u);
}

// kvc_cache_resize among every other operation: grows and shrinks between a
// tenth and twice the pools at creation. After each one the checker runs,
// a refused one (a block in use past the new end) changes nothing, the
// pools never move, and with events on the router's index equals the
// snapshot (the evictions a shrink makes are reported).
// Most shrinks are refused: the free list is a stack, so sequences hold
// blocks anywhere in the pool.
void expect_resized(const RandomOps& r) {
  EXPECT_GT(r.resizes, 10u);
  EXPECT_GT(r.refused_resizes, 20u);
  EXPECT_LT(r.min_blocks, r.max_blocks);
}

TEST(RandomResize, OnePool) {
  CacheConfig c = base(40);
  c.max_primary_bytes = 80 * 128;
  RandomOps r(c, 51);
  r.resize_between(4 * 128, 80 * 128);
  r.run(20000);
  expect_resized(r);
}

TEST(RandomResize, TwoGroupsInTwoPoolsWithEvents) {
  CacheConfig c = base(40);
  c.num_layers = 3;
  c.kv_heads = {1, 2, 1};
  c.max_primary_bytes = 80 * 256;
  c.event_buffer_size = 4096;
  c.manual_clock = true;
  RandomOps r(c, 52);
  r.resize_between(4 * 256, 80 * 256);
  r.run(15000);
  expect_resized(r);
}

TEST(RandomResize, WindowsInOnePoolWithEvents) {
  CacheConfig c = base(40);
  c.num_layers = 3;
  c.windows = {0, 8, 12};
  c.max_primary_bytes = 80 * 192;
  c.event_buffer_size = 4096;
  RandomOps r(c, 53);
  r.resize_between(4 * 192, 80 * 192);
  r.run(15000);
  expect_resized(r);
}

TEST(RandomResize, PagesSharedBetweenPools) {
  CacheConfig c = base(40);
  c.num_layers = 3;
  c.windows = {0, 9, 0};  // block bytes 2:1, two pools sharing pages
  c.max_primary_bytes = 80 * 192;
  c.event_buffer_size = 4096;
  RandomOps r(c, 54);
  r.resize_between(4 * 192, 80 * 192);
  r.run(15000);
  ASSERT_NE(r.m().arena(), nullptr);
  expect_resized(r);
}

TEST(RandomResize, WindowedOnly) {
  CacheConfig c = base(40);
  c.windows = {8, 12};
  c.max_primary_bytes = 80 * 128;
  RandomOps r(c, 55);
  r.resize_between(4 * 128, 80 * 128);
  r.run(15000);
  expect_resized(r);
}

TEST(RandomResize, HostTierWithRetention) {
  CacheConfig c = base(40);
  c.host_cache_bytes = 12 * 128;
  c.manual_clock = true;
  c.max_primary_bytes = 80 * 128;
  c.event_buffer_size = 4096;
  RandomOps r(c, 56);
  r.resize_between(4 * 128, 80 * 128);
  r.run(15000);
  expect_resized(r);
}

}  // namespace
}  // namespace kvc
