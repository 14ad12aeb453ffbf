// Black-box cases of the cache manager's eviction with exact numbers
// (test_block_manager.cpp has the rest): which cached blocks go first,
// what survives, and a many-block eviction matching one at a time. Every
// case runs the invariant checker after each step.
#include <gtest/gtest.h>

#include <vector>

#include "block_manager_cases.h"
#include "core/cache.h"

namespace kvc {
namespace {

using test::cat;
using test::ManagerTest;
using test::seq;
using test::small_config;
using test::status_of;

// --- Eviction ----------------------------------------------------------------

class EvictionTest : public ManagerTest {
 protected:
  void SetUp() override {
    auto c = small_config(8);
    c.partial_reuse = false;  // tails go back to free: only full blocks are cached
    make(c);
  }
  SequenceOptions prio(uint32_t p) {
    SequenceOptions o;
    o.prompt_priority = o.decode_priority = p;
    return o;
  }
  // A one-block prompt, published with priority p and released.
  void cache_block(uint64_t id, int32_t first, uint32_t p) { cache_prompt(id, seq(first, 4), prio(p)); }
  bool cached(int32_t first) { return probe(cat(seq(first, 4), {-1})) == 4; }
};

TEST_F(EvictionTest, LowestPriorityFirstThenLeastRecentlyReleased) {
  cache_block(1, 100, 50);  // A
  cache_block(2, 200, 20);  // B
  cache_block(3, 300, 35);  // C
  cache_block(4, 400, 20);  // D
  EXPECT_EQ(stats().cached_blocks, 4u);
  // A probe is not a use: B stays the oldest of priority 20.
  EXPECT_TRUE(cached(200));
  // 5 new blocks: 4 free + 1 eviction -> B.
  add(10, seq(1000, 20));
  EXPECT_EQ(stats().evicted_blocks, 1u);
  EXPECT_FALSE(cached(200));
  EXPECT_TRUE(cached(400));
  extend(10, seq(2000, 4));  // -> D (priority 20, released after B)
  EXPECT_FALSE(cached(400));
  EXPECT_TRUE(cached(300));
  extend(10, seq(3000, 4));  // -> C (35)
  EXPECT_FALSE(cached(300));
  EXPECT_TRUE(cached(100));
  extend(10, seq(4000, 4));  // -> A (50)
  EXPECT_FALSE(cached(100));
  EXPECT_EQ(stats().evicted_blocks, 4u);
  EXPECT_EQ(status_of([&] { m().extend(10, seq(0, 1).data(), 1, nullptr); }),
            KVC_ERR_OUT_OF_BLOCKS);
}

TEST_F(EvictionTest, ReuseRefreshesAge) {
  cache_block(1, 100, 35);
  cache_block(2, 200, 35);
  add(3, cat(seq(100, 4), {7}));  // uses block 100 again
  remove(3);
  add(10, seq(1000, 28));  // 7 blocks: 6 free + 1 eviction
  EXPECT_FALSE(cached(200));
  EXPECT_TRUE(cached(100));
}

TEST_F(EvictionTest, OnlyLeavesAreEvicted) {
  // P (priority 20) is older than... no: P is released last but has a child.
  add(1, cat(seq(0, 4), {9}));           // holds P
  add(2, cat(seq(0, 8), {9}), prio(35)); // holds P and Q
  commit(1, 4);
  commit(2, 8);
  remove(2);                             // Q released first (priority 35)
  m().sequence(1);                       // P still in use
  remove(1);                             // P released (priority 35 from seq 1)
  cache_block(3, 500, 35);               // Z, released last
  // Make P the lowest priority: re-release it through a priority-10 user.
  add(4, cat(seq(0, 4), {9}), prio(10));
  commit(4, 4);
  remove(4);
  EXPECT_EQ(stats().cached_blocks, 3u);
  // P has priority 10 but a child: the victim is the oldest leaf, Q.
  add(10, seq(1000, 24));  // 6 blocks: 5 free + 1 eviction
  EXPECT_EQ(probe(cat(seq(0, 8), {9})), 4u);  // Q gone, P still there
  extend(10, seq(2000, 4));  // P is now a leaf of priority 10: evicted before Z
  EXPECT_EQ(probe(cat(seq(0, 4), {9})), 0u);
  EXPECT_TRUE(cached(500));
  extend(10, seq(3000, 4));
  EXPECT_FALSE(cached(500));
}

TEST_F(EvictionTest, FailedAddChangesNothing) {
  cache_block(1, 100, 35);
  cache_block(2, 200, 35);
  add(3, seq(0, 17));  // 5 blocks in use, 1 free, 2 cached
  const CacheStats before = stats();
  std::vector<uint32_t> refs;
  for (uint32_t b = 0; b < 8; ++b) refs.push_back(ref(b));
  // Needs 4 blocks: 1 free + 2 evictable is not enough.
  const auto p = seq(5000, 13);
  EXPECT_EQ(status_of([&] { m().add(4, p.data(), p.size(), {}, nullptr); }), KVC_ERR_OUT_OF_BLOCKS);
  m().check_invariants();
  const CacheStats after = stats();
  EXPECT_EQ(after.free_blocks, before.free_blocks);
  EXPECT_EQ(after.cached_blocks, before.cached_blocks);
  EXPECT_EQ(after.in_use_blocks, before.in_use_blocks);
  EXPECT_EQ(after.evicted_blocks, 0u);
  EXPECT_EQ(after.reused_blocks, before.reused_blocks);
  EXPECT_EQ(after.missed_blocks, before.missed_blocks);
  EXPECT_EQ(after.num_sequences, before.num_sequences);
  for (uint32_t b = 0; b < 8; ++b) EXPECT_EQ(ref(b), refs[b]);
  EXPECT_TRUE(cached(100));
  EXPECT_TRUE(cached(200));
  EXPECT_EQ(m().find_sequence(4), nullptr);
  // A failed add that would reuse a cached block must not take it either.
  const auto q = cat(seq(100, 4), seq(6000, 13));
  EXPECT_EQ(status_of([&] { m().add(5, q.data(), q.size(), {}, nullptr); }), KVC_ERR_OUT_OF_BLOCKS);
  EXPECT_EQ(stats().cached_blocks, 2u);
  EXPECT_EQ(ref(0), refs[0]);
  // Extend too.
  const auto r = seq(0, 16);  // 4 more blocks > 1 free + 2 evictable
  EXPECT_EQ(status_of([&] { m().extend(3, r.data(), r.size(), nullptr); }), KVC_ERR_OUT_OF_BLOCKS);
  EXPECT_EQ(m().sequence(3).length(), 17u);
  m().check_invariants();
}

TEST_F(EvictionTest, PinnedBlocksSurviveRemovalAndEviction) {
  add(1, cat(seq(100, 4), {7}));
  commit(1, 4);
  m().pin(1);
  m().check_invariants();
  remove(1);
  EXPECT_EQ(stats().in_use_blocks, 1u);  // the published block stays held
  EXPECT_EQ(status_of([&] { m().pin(1); }), KVC_ERR_NOT_FOUND);
  const auto big = seq(1000, 29);  // 8 blocks: only 7 exist besides the pinned one
  EXPECT_EQ(status_of([&] { m().add(2, big.data(), big.size(), {}, nullptr); }), KVC_ERR_OUT_OF_BLOCKS);
  add(2, seq(1000, 28));
  EXPECT_TRUE(cached(100));
  remove(2);
  m().unpin(1);
  m().check_invariants();
  EXPECT_EQ(stats().in_use_blocks, 0u);
  EXPECT_EQ(status_of([&] { m().unpin(1); }), KVC_ERR_NOT_FOUND);
  EXPECT_TRUE(cached(100));
}

TEST_F(EvictionTest, ResetReuseRefusedWhileInUse) {
  cache_block(1, 100, 35);
  add(2, seq(0, 3));
  EXPECT_EQ(status_of([&] { m().reset_reuse(); }), KVC_ERR_INVALID_STATE);
  EXPECT_TRUE(cached(100));
  remove(2);
  m().reset_reuse();
  m().check_invariants();
  EXPECT_FALSE(cached(100));
  EXPECT_EQ(stats().cached_blocks, 0u);
  EXPECT_EQ(stats().free_blocks, 8u);
  EXPECT_EQ(stats().evicted_blocks, 0u);
}

// An add that evicts many blocks takes its victims out of the tree in one
// pass (Eviction::alloc_sets_ahead): the same victims, in the same
// order, with the same blocks for the sequence and the same counts as
// decode steps evicting one victim per block (alloc_block).
TEST(EvictionBatch, ManyEvictionsInOneAddMatchOneAtATime) {
  for (const bool two_pools : {false, true}) {
    CacheConfig c = small_config(24);
    c.partial_reuse = false;
    if (two_pools) {  // two groups in two pools
      c.num_layers = 3;
      c.kv_heads = {1, 2, 1};
    }
    auto run = [&](bool at_once) {
      Cache cache(c);
      BlockManager& m = cache.manager();
      auto cache_prompt = [&](uint64_t id, const std::vector<int32_t>& t, uint32_t priority) {
        SequenceOptions o;
        o.prompt_priority = o.decode_priority = priority;
        m.add(id, t.data(), t.size(), o, nullptr);
        m.commit(id, t.size());
        m.remove(id);
      };
      cache_prompt(1, seq(100, 20), 35);  // chain A: 5 blocks
      cache_prompt(2, seq(200, 12), 20);  // chain B: 3 blocks, evicted first
      cache_prompt(3, seq(300, 16), 50);  // chain C: 4 blocks
      cache_prompt(4, cat(seq(100, 8), seq(400, 8)), 10);  // 2 blocks under A's second
      const auto held = seq(500, 7);  // 2 blocks in use
      m.add(5, held.data(), held.size(), {}, nullptr);
      // 8 free: 16 blocks evict 8 leaves, climbing chains: 4's two (priority
      // 10), B (20), then A (35) down to the two blocks 4 shared.
      const auto p = seq(1000, 64);
      if (at_once) {
        m.add(9, p.data(), p.size(), {}, nullptr);
      } else {
        m.add(9, p.data(), 4, {}, nullptr);  // a free block
        const uint64_t id = 9;
        for (size_t t = 4; t < p.size(); ++t) m.extend_batch(&id, &p[t], 1, nullptr);
      }
      m.check_invariants();
      std::vector<uint64_t> r;
      for (const auto& g : m.sequence(9).blocks) r.insert(r.end(), g.begin(), g.end());
      const CacheStats st = m.stats();
      r.insert(r.end(), {st.free_blocks, st.cached_blocks, st.in_use_blocks, st.evicted_blocks,
                         st.tree_nodes, m.policy().size()});
      for (uint32_t g = 0; g < m.num_groups(); ++g) {
        const GroupStats gs = m.group_stats(g);
        r.insert(r.end(), {gs.in_use_blocks, gs.cached_blocks, gs.evicted_blocks});
      }
      for (const auto& t : {seq(100, 21), seq(200, 13), seq(300, 17), cat(seq(100, 8), seq(400, 9))})
        r.push_back(m.probe(t.data(), t.size(), {}));
      return r;
    };
    const std::vector<uint64_t> at_once = run(true);
    EXPECT_EQ(at_once, run(false)) << (two_pools ? "two pools" : "one pool");
    const std::vector<uint64_t> cached(at_once.end() - 4, at_once.end());
    EXPECT_EQ(cached, (std::vector<uint64_t>{8, 0, 16, 8}));
  }
}

}  // namespace
}  // namespace kvc
