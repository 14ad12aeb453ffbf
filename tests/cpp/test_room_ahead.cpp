// kvc_cache_make_room (BlockManager::make_room): evictions made ahead of
// the call that needs the room. The same victims and fates as that call
// would have had (compared with a twin cache that lets the add evict), the
// add then evicts nothing, blocks in use never go, the KV of offloaded and
// onboarded blocks bit for bit (add() checks every reused row). Every step
// runs the invariant checker.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "core/cache.h"
#include "kv_content.h"
#include "manager_fixture.h"
#include "tier_script.h"

namespace kvc {
namespace {

using test::check_sequence;
using test::seq;
using test::tier_config;

// A cache made at once, with the scripted calls of the host tier's tests
// and kvc_cache_make_room's.
struct Script : test::TierScript {
  explicit Script(const CacheConfig& c) { make(c); }
  uint64_t make_room(uint64_t sets) {
    const uint64_t free = m().make_room(sets, nullptr);
    check();
    EXPECT_EQ(free, m().stats().free_blocks);  // one group: a set is a block
    return free;
  }
};

// The host tier's scripted case: D's add needs 4 blocks with 1 free. One
// cache lets the add evict, the other makes the room first: the same
// blocks are offloaded, dropped and evicted from the host tier, and the
// add of the second evicts nothing more.
TEST(RoomAheadTest, TheSameMovesAsTheAddThatNeedsTheRoom) {
  Script plain(tier_config(4, 3)), ahead(tier_config(4, 3));
  const auto A = seq(0, 9), B = seq(100, 9), C = seq(200, 9), D = seq(300, 13);
  std::vector<uint32_t> a[2], b[2], c[2];
  Script* both[2] = {&plain, &ahead};
  for (int k = 0; k < 2; ++k) {
    a[k] = both[k]->cache_prompt(1, A);
    b[k] = both[k]->cache_prompt(2, B, 10);
    c[k] = both[k]->cache_prompt(3, C, 80);
  }
  ASSERT_EQ(ahead.tiers(a[1], A), "PH");
  ASSERT_EQ(ahead.m().stats().free_blocks, 1u);

  EXPECT_EQ(ahead.make_room(4), 4u);
  const CacheStats before_add = ahead.m().stats();
  EXPECT_EQ(ahead.tiers(a[1], A), "H-");
  EXPECT_EQ(ahead.tiers(c[1], C), "HH");
  EXPECT_EQ(before_add.host.offloaded_blocks, 4u);
  EXPECT_EQ(before_add.evicted_blocks, 3u);

  plain.add(4, D);
  ahead.add(4, D);
  const CacheStats p = plain.m().stats(), q = ahead.m().stats();
  EXPECT_EQ(plain.tiers(a[0], A), ahead.tiers(a[1], A));
  EXPECT_EQ(plain.tiers(b[0], B), ahead.tiers(b[1], B));
  EXPECT_EQ(plain.tiers(c[0], C), ahead.tiers(c[1], C));
  EXPECT_EQ(p.host.offloaded_blocks, q.host.offloaded_blocks);
  EXPECT_EQ(p.evicted_blocks, q.evicted_blocks);
  EXPECT_EQ(q.evicted_blocks, before_add.evicted_blocks);  // the add evicted nothing
  EXPECT_EQ(q.host.offloaded_blocks, before_add.host.offloaded_blocks);
  EXPECT_EQ(p.host_cached_blocks, q.host_cached_blocks);
  EXPECT_EQ(p.free_blocks, q.free_blocks);

  // The offloaded blocks come back bit for bit (add() checks every row).
  ahead.m().remove(4);
  EXPECT_EQ(ahead.add(5, C), 8u);
  EXPECT_EQ(ahead.tiers(c[1], C), "PP");
  EXPECT_EQ(ahead.m().stats().host.onboarded_blocks, 2u);
}

// Two pools of different block bytes carving one arena's pages (no host
// tier): room made ahead moves idle pages as the add would, and evicts the
// same blocks.
TEST(RoomAheadTest, PoolsSharingPagesEvictWhatTheAddWould) {
  CacheConfig c = tier_config(0, 0);
  c.num_layers = 3;
  c.kv_heads = {1, 2, 2};  // groups of 128 and 512 block bytes: two pools
  c.max_tokens = 12 * 4;
  Script plain(c), ahead(c);
  ASSERT_EQ(ahead.cache_->num_pools(), 2u);
  const auto A = seq(0, 17), B = seq(100, 13), D = seq(300, 29);
  std::vector<uint32_t> a[2], b[2];
  Script* both[2] = {&plain, &ahead};
  for (int k = 0; k < 2; ++k) {
    a[k] = both[k]->cache_prompt(1, A);
    b[k] = both[k]->cache_prompt(2, B);
  }
  ahead.m().make_room(8, nullptr);  // D's 7 full blocks and its tail
  ahead.check();
  const CacheStats before_add = ahead.m().stats();
  plain.add(4, D);
  ahead.add(4, D);
  EXPECT_EQ(ahead.m().stats().evicted_blocks, before_add.evicted_blocks);  // none by the add
  EXPECT_EQ(plain.m().stats().evicted_blocks, ahead.m().stats().evicted_blocks);
  EXPECT_EQ(plain.tiers(a[0], A), ahead.tiers(a[1], A));
  EXPECT_EQ(plain.tiers(b[0], B), ahead.tiers(b[1], B));
}

TEST(RoomAheadTest, EnoughFreeOrZeroChangesNothing) {
  Script s(tier_config(8, 4));
  const auto A = seq(0, 13);  // 3 full blocks cached, 5 free
  const auto a = s.cache_prompt(1, A);
  const CacheStats before = s.m().stats();
  EXPECT_EQ(s.make_room(0), 5u);
  EXPECT_EQ(s.make_room(5), 5u);
  EXPECT_EQ(s.tiers(a, A), "PPP");
  EXPECT_EQ(s.m().stats().evicted_blocks, before.evicted_blocks);
  EXPECT_EQ(s.m().stats().host.offloaded_blocks, 0u);
}

// Without a host tier the victims are dropped, leaves first; blocks in use
// never go, and asking for more than the cached blocks can free frees
// every one of them, without an error.
TEST(RoomAheadTest, WithoutAHostTierDropsLeavesFirstAndNeverABlockInUse) {
  Script s(tier_config(8, 0));
  const auto A = seq(0, 13), B = seq(100, 9);
  const auto a = s.cache_prompt(1, A);  // 3 cached
  s.add(2, B);                          // 3 in use (2 full + 1 partial)
  ASSERT_EQ(s.m().stats().free_blocks, 2u);
  EXPECT_EQ(s.make_room(3), 3u);
  EXPECT_EQ(s.tiers(a, A), "PP-");  // the leaf first
  EXPECT_EQ(s.m().stats().evicted_blocks, 1u);
  EXPECT_EQ(s.make_room(100), 5u);  // every cached block, none in use
  EXPECT_EQ(s.tiers(a, A), "---");
  EXPECT_EQ(s.m().stats().evicted_blocks, 3u);
  EXPECT_EQ(s.m().sequence(2).length(), 9u);
  // The sequence's own blocks are intact (its KV rows check).
  EXPECT_EQ(check_sequence(*s.cache_, s.m().sequence(2), 0, s.m().sequence(2).length()), "");
  // A prompt that would have reused A computes it again.
  EXPECT_EQ(s.add(3, A), 0u);
}

// A full host tier makes room in itself by its own LRU (host nodes without
// children, oldest first), as an add's offloads do; the blocks offloaded
// ahead come back bit for bit.
TEST(RoomAheadTest, AFullHostTierEvictsItsOwnLruToTakeTheOffloads) {
  Script s(tier_config(6, 2));
  const auto A = seq(0, 9), B = seq(100, 9);
  const auto a = s.cache_prompt(1, A);
  const auto b = s.cache_prompt(2, B);
  ASSERT_EQ(s.tiers(a, A) + s.tiers(b, B), "PPPP");
  ASSERT_EQ(s.m().stats().free_blocks, 2u);
  EXPECT_EQ(s.make_room(3), 3u);  // A's leaf
  EXPECT_EQ(s.tiers(a, A) + s.tiers(b, B), "PHPP");
  EXPECT_EQ(s.make_room(4), 4u);  // A's root, a leaf once its child left
  EXPECT_EQ(s.tiers(a, A) + s.tiers(b, B), "HHPP");
  EXPECT_EQ(s.make_room(5), 5u);  // B's leaf; the host tier drops A's leaf
  EXPECT_EQ(s.tiers(a, A) + s.tiers(b, B), "H-PH");
  EXPECT_EQ(s.make_room(6), 6u);  // B's root; the host tier drops A's root
  EXPECT_EQ(s.tiers(a, A) + s.tiers(b, B), "--HH");
  EXPECT_EQ(s.m().stats().host.offloaded_blocks, 4u);
  EXPECT_EQ(s.m().stats().evicted_blocks, 2u);
  EXPECT_EQ(s.add(3, B), 8u);  // onboarded, every row checked
  EXPECT_EQ(s.tiers(b, B), "PP");
}

}  // namespace
}  // namespace kvc
