// Black-box cases of the cache manager with exact numbers, modelled on
// TensorRT-LLM's kvCacheManagerTest.cpp and vLLM's test_prefix_caching.py.
// Every case runs the invariant checker after each step.
#include <gtest/gtest.h>

#include <memory>
#include <numeric>
#include <vector>

#include "core/block_hash.h"
#include "core/cache.h"
#include "base/error.h"
#include "manager_fixture.h"

namespace kvc {
namespace {

CacheConfig small_config(uint64_t blocks, uint32_t T = 4) {
  CacheConfig c;
  c.num_layers = 2;
  c.kv_heads = {2};
  c.head_dim = 4;
  c.dtype = KVC_DTYPE_F32;
  c.tokens_per_block = T;
  c.max_tokens = blocks * T;
  return c;
}

using test::cat;
using test::seq;
using test::status_of;

class ManagerTest : public test::ManagerFixture {
 protected:
  // Adds, commits everything and removes: the prompt ends up cached.
  void cache_prompt(uint64_t id, const std::vector<int32_t>& t, SequenceOptions o = {}) {
    add(id, t, o);
    commit_all(id);
    remove(id);
  }
  uint32_t block(uint64_t id, uint64_t b) { return m().sequence(id).blocks[0][b]; }
  uint32_t ref(uint32_t blk) { return m().pool(0).info(blk).ref; }
};

// --- Capacity and reference counts with shared prefixes --------------------

TEST_F(ManagerTest, CapacityAndRefCountsWithSharedPrefix) {
  make(small_config(16));
  const auto p = seq(0, 10);  // blocks [0..3] [4..7] [8,9]
  EXPECT_EQ(add(1, p), 0u);
  EXPECT_EQ(stats().in_use_blocks, 3u);
  EXPECT_EQ(stats().free_blocks, 13u);
  commit(1, 10);
  EXPECT_EQ(stats().tree_nodes, 2u);  // two full blocks published

  EXPECT_EQ(add(2, p), 8u);  // both full blocks shared; last token recomputed
  EXPECT_EQ(stats().in_use_blocks, 4u);
  EXPECT_EQ(block(2, 0), block(1, 0));
  EXPECT_EQ(block(2, 1), block(1, 1));
  EXPECT_NE(block(2, 2), block(1, 2));
  EXPECT_EQ(ref(block(1, 0)), 2u);
  EXPECT_EQ(ref(block(1, 1)), 2u);
  EXPECT_EQ(ref(block(1, 2)), 1u);
  EXPECT_EQ(stats().reused_blocks, 2u);
  EXPECT_EQ(stats().missed_blocks, 3u + 1u);

  const uint32_t tail1 = block(1, 2);
  remove(1);  // its committed tail [8,9] is published as a partial block
  EXPECT_EQ(stats().in_use_blocks, 3u);
  EXPECT_EQ(stats().cached_blocks, 1u);
  EXPECT_EQ(stats().free_blocks, 12u);
  EXPECT_EQ(ref(block(2, 0)), 1u);
  EXPECT_EQ(m().pool(0).info(tail1).ref, 0u);
  remove(2);
  EXPECT_EQ(stats().in_use_blocks, 0u);
  EXPECT_EQ(stats().cached_blocks, 3u);
  EXPECT_EQ(stats().free_blocks, 13u);
}

TEST_F(ManagerTest, UncommittedBlocksAreNotReusable) {
  make(small_config(16));
  const auto p = seq(0, 9);
  add(1, p);
  EXPECT_EQ(probe(p), 0u);
  commit(1, 3);  // less than a block
  EXPECT_EQ(probe(p), 0u);
  commit(1, 4);
  EXPECT_EQ(probe(p), 4u);
  EXPECT_EQ(status_of([&] { m().commit(1, 10); }), KVC_ERR_INVALID_ARGUMENT);
}

// --- Last prompt token, partial reuse, copy on partial reuse ----------------

TEST_F(ManagerTest, LastPromptTokenIsRecomputedWithoutPartialReuse) {
  auto c = small_config(16);
  c.partial_reuse = false;
  make(c);
  const auto p = seq(0, 8);  // exactly two blocks
  cache_prompt(1, p);
  EXPECT_EQ(probe(p), 4u);  // the second block holds the last token
  EXPECT_EQ(add(2, p), 4u);
  EXPECT_EQ(probe(cat(p, {99})), 8u);
}

TEST_F(ManagerTest, LastPromptTokenIsRecomputedWithPartialReuse) {
  make(small_config(16));
  const auto p = seq(0, 8);
  cache_prompt(1, p);
  EXPECT_EQ(probe(p), 7u);  // 3 rows of the second block are copied
  const uint64_t before = stats().free_blocks;
  EXPECT_EQ(add(2, p), 7u);
  EXPECT_EQ(stats().free_blocks, before - 1);  // the copy
  EXPECT_EQ(stats().cached_blocks, 1u);        // the matched second block, untouched
}

TEST_F(ManagerTest, PartialReuseOfKTokensWithCopy) {
  make(small_config(16));
  cache_prompt(1, seq(0, 8));
  // [0..3] full match, then [4,5] of [4,5,6,7] match token by token.
  const auto p = cat(seq(0, 6), {100, 101, 102});
  EXPECT_EQ(probe(p), 6u);
  EXPECT_EQ(add(2, p), 6u);
  EXPECT_EQ(m().sequence(2).cached, 6u);
  // The copy is a new private block; the cached one stays in the tree.
  EXPECT_EQ(m().pool(0).info(block(2, 1)).node, kNoNode);
  EXPECT_EQ(stats().tree_nodes, 2u);
}

TEST_F(ManagerTest, PartialReuseDisabledReusesFullBlocksOnly) {
  auto c = small_config(16);
  c.partial_reuse = false;
  make(c);
  cache_prompt(1, seq(0, 8));
  EXPECT_EQ(add(2, cat(seq(0, 6), {100, 101, 102})), 4u);
}

TEST_F(ManagerTest, PartialReuseInPlaceWhenCopyIsOff) {
  auto c = small_config(16);
  c.copy_on_partial_reuse = false;
  make(c);
  add(1, seq(0, 8));
  const uint32_t second = block(1, 1);
  commit(1, 8);
  remove(1);
  const auto p = cat(seq(0, 6), {100, 101, 102});
  EXPECT_EQ(probe(p), 6u);
  const uint64_t free_before = stats().free_blocks;
  EXPECT_EQ(add(2, p), 6u);
  EXPECT_EQ(block(2, 1), second);               // taken over in place
  EXPECT_EQ(stats().tree_nodes, 1u);            // and out of the tree
  EXPECT_EQ(stats().free_blocks, free_before - 1);  // only the third block is new
  // While sequence 2 uses it, a third prompt cannot take it in place.
  EXPECT_EQ(add(3, p), 4u);
}

TEST_F(ManagerTest, PartialInPlaceRefusedWhenBlockInUse) {
  auto c = small_config(16);
  c.copy_on_partial_reuse = false;
  make(c);
  add(1, seq(0, 8));
  commit(1, 8);  // [4..7] published and still in use by sequence 1
  EXPECT_EQ(add(2, cat(seq(0, 6), {100})), 4u);
}

// --- Keys: position, salt, LoRA, extra keys ---------------------------------

TEST_F(ManagerTest, IdenticalTokensAtDifferentPositionsHaveDifferentKeys) {
  make(small_config(16));
  const std::vector<int32_t> a{1, 2, 3, 4, 1, 2, 3, 4, 9};
  cache_prompt(1, a);
  EXPECT_EQ(stats().tree_nodes, 3u);  // two equal-token full blocks + the tail
  EXPECT_EQ(probe({5, 5, 5, 5, 1, 2, 3, 4, 9}), 0u);
  EXPECT_EQ(probe({1, 2, 3, 4, 1, 2, 3, 4, 7}), 8u);
  EXPECT_EQ(probe({1, 2, 3, 4, 7, 7, 7, 7, 7}), 4u);
}

TEST_F(ManagerTest, SaltIsolation) {
  auto c = small_config(32);
  c.partial_reuse = false;
  make(c);
  const auto p = seq(0, 9);
  SequenceOptions a;
  a.has_salt = true;
  a.salt = "tenant-a";
  SequenceOptions b = a;
  b.salt = "tenant-b";
  SequenceOptions empty;
  empty.has_salt = true;
  SequenceOptions none;
  cache_prompt(1, p, a);
  EXPECT_EQ(probe(p, a), 8u);
  EXPECT_EQ(probe(p, b), 0u);
  EXPECT_EQ(probe(p, none), 0u);
  EXPECT_EQ(probe(p, empty), 0u);
  cache_prompt(2, p, none);
  EXPECT_EQ(probe(p, none), 8u);
  EXPECT_EQ(probe(p, empty), 0u);  // absent salt != empty salt
  cache_prompt(3, p, empty);
  EXPECT_EQ(probe(p, empty), 8u);
  EXPECT_EQ(add(4, p, a), 8u);
  EXPECT_EQ(add(5, p, b), 0u);
}

TEST_F(ManagerTest, LoraAbsentDiffersFromLoraZeroAndFromSalt) {
  auto c = small_config(32);
  c.partial_reuse = false;
  make(c);
  const auto p = seq(0, 9);
  SequenceOptions none;
  SequenceOptions lora0;
  lora0.has_lora = true;
  SequenceOptions lora7 = lora0;
  lora7.lora_id = 7;
  SequenceOptions salt7;  // the 8 bytes of LoRA id 7 as a salt
  salt7.has_salt = true;
  salt7.salt = std::string("\x07\0\0\0\0\0\0\0", 8);
  cache_prompt(1, p, none);
  EXPECT_EQ(probe(p, lora0), 0u);
  cache_prompt(2, p, lora7);
  EXPECT_EQ(probe(p, lora7), 8u);
  EXPECT_EQ(probe(p, lora0), 0u);
  EXPECT_EQ(probe(p, salt7), 0u);
}

TEST_F(ManagerTest, ExtraKeysOnlyAffectTheBlocksTheyCover) {
  auto c = small_config(32);
  c.partial_reuse = false;
  make(c);
  const auto p = seq(0, 13);
  SequenceOptions img1;
  img1.extra_keys.push_back(ExtraKey{5, 2, "image-1"});  // tokens 5,6: block 1
  SequenceOptions img2 = img1;
  img2.extra_keys[0].data = "image-2";
  cache_prompt(1, p, img1);
  EXPECT_EQ(probe(p, img1), 12u);
  EXPECT_EQ(probe(p, img2), 4u);  // block 0 has no image: shared
  EXPECT_EQ(probe(p, {}), 4u);
}

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

// --- Sequences: rewind, fork, duplicates, errors ---------------------------

TEST_F(ManagerTest, RewindFreesBlocks) {
  make(small_config(16));
  add(1, seq(0, 10));
  extend(1, seq(10, 3));  // 13 tokens, 4 blocks
  EXPECT_EQ(m().sequence(1).num_blocks(), 4u);
  EXPECT_EQ(stats().free_blocks, 12u);
  m().rewind(1, 5);  // 8 tokens, 2 blocks
  m().check_invariants();
  EXPECT_EQ(m().sequence(1).num_blocks(), 2u);
  EXPECT_EQ(stats().free_blocks, 14u);
  EXPECT_EQ(status_of([&] { m().rewind(1, 9); }), KVC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(m().sequence(1).length(), 8u);
  EXPECT_EQ(m().blocks_needed(1, 1), 1u);
  EXPECT_EQ(m().blocks_needed(1, 8), 2u);
  EXPECT_EQ(m().blocks_needed(1, 9), 3u);
}

TEST_F(ManagerTest, RewindIntoPublishedBlockCopiesBeforeWriting) {
  make(small_config(16));
  add(1, seq(0, 8));
  commit(1, 8);  // both blocks published
  add(2, cat(seq(0, 8), {50}));
  EXPECT_EQ(block(2, 1), block(1, 1));
  m().rewind(1, 2);  // the tail is the shared, published block
  m().check_invariants();
  EXPECT_EQ(m().blocks_needed(1, 1), 1u);  // the copy
  extend(1, {60});
  EXPECT_NE(block(1, 1), block(2, 1));
  EXPECT_EQ(probe(cat(seq(0, 8), {1})), 8u);  // the published block is intact
}

TEST_F(ManagerTest, ForkSharesEverythingAndCopiesTheTailOnWrite) {
  make(small_config(16));
  add(1, seq(0, 6));  // blocks [0..3] [4,5]
  const uint64_t free0 = stats().free_blocks;
  m().fork(1, 2);
  m().check_invariants();
  EXPECT_EQ(stats().free_blocks, free0);  // no new block
  EXPECT_EQ(block(2, 0), block(1, 0));
  EXPECT_EQ(block(2, 1), block(1, 1));
  EXPECT_EQ(ref(block(1, 1)), 2u);
  EXPECT_EQ(m().blocks_needed(2, 1), 1u);
  extend(2, {7});
  EXPECT_NE(block(2, 1), block(1, 1));
  EXPECT_EQ(ref(block(1, 1)), 1u);
  EXPECT_EQ(stats().free_blocks, free0 - 1);
  extend(1, {8});  // now alone on its tail: written in place
  EXPECT_EQ(stats().free_blocks, free0 - 1);
  EXPECT_EQ(status_of([&] { m().fork(1, 2); }), KVC_ERR_ALREADY_EXISTS);
  EXPECT_EQ(status_of([&] { m().fork(3, 4); }), KVC_ERR_NOT_FOUND);
}

TEST_F(ManagerTest, BlocksSharedWithAForkArePublishedOnceHeldAlone) {
  make(small_config(16));
  add(1, seq(0, 9));
  m().fork(1, 2);  // before anything is committed: every block is shared
  commit(1, 9);
  EXPECT_EQ(stats().tree_nodes, 0u);  // a sibling holds them: not yet
  EXPECT_EQ(m().sequence(1).published, 0u);
  remove(2);
  commit(1, 9);  // the same count again: now held alone, published
  EXPECT_EQ(stats().tree_nodes, 2u);
  EXPECT_EQ(probe(seq(0, 9)), 8u);
  m().pin(1);
  remove(1);
  EXPECT_EQ(stats().in_use_blocks, 2u);  // the pinned published blocks
  m().unpin(1);
  m().check_invariants();
}

// Commit's lean run (a new node under the one just made, block after
// block) stops at the first block the sequence does not hold alone, and
// publishes the rest once it does; with one group and with two.
TEST_F(ManagerTest, ACommitRunStopsAtABlockSharedWithAForkAndGoesOnLater) {
  for (const bool two_groups : {false, true}) {
    CacheConfig c = small_config(32);
    if (two_groups) {
      c.num_layers = 4;
      c.kv_heads = {2, 4, 2, 4};
    }
    make(c);
    add(1, seq(0, 17));  // blocks 0-3 full, 4 holds token 16
    commit(1, 4);        // block 0 (under the root)
    EXPECT_EQ(m().sequence(1).published, 1u);
    m().fork(1, 2);  // blocks 1-4 shared
    commit(1, 12);
    EXPECT_EQ(m().sequence(1).published, 1u);  // block 1 shared: the run stops there
    EXPECT_EQ(stats().tree_nodes, 1u);
    remove(2);
    commit(1, 16);  // blocks 1-3, a run of new nodes
    EXPECT_EQ(m().sequence(1).published, 4u);
    EXPECT_EQ(stats().tree_nodes, 4u);
    for (uint64_t b = 1; b < 4; ++b)
      EXPECT_EQ(m().tree().node(m().sequence(1).nodes[b]).parent, m().sequence(1).nodes[b - 1]);
    remove(1);
    EXPECT_EQ(add(3, seq(0, 17)), 16u);
    remove(3);
  }
}

TEST_F(ManagerTest, DuplicateBlockIsNotCachedTwice) {
  make(small_config(16));
  const auto p = seq(0, 9);
  add(1, p);
  add(2, p);  // nothing cached yet: both compute
  EXPECT_EQ(stats().in_use_blocks, 6u);
  commit(1, 9);
  commit(2, 9);  // same keys: sequence 2 keeps its own copies
  EXPECT_EQ(stats().tree_nodes, 2u);
  EXPECT_NE(block(2, 0), block(1, 0));
  EXPECT_EQ(m().sequence(2).nodes[0], m().sequence(1).nodes[0]);
  remove(1);  // tail [8] published as a partial block, now cached
  EXPECT_EQ(stats().cached_blocks, 1u);  // the anchors of sequence 2 hold the others
  EXPECT_EQ(stats().in_use_blocks, 3u + 2u);
  remove(2);  // its own copies return to free; its tail key exists already
  EXPECT_EQ(stats().in_use_blocks, 0u);
  EXPECT_EQ(stats().cached_blocks, 3u);
  EXPECT_EQ(stats().free_blocks, 13u);
}

TEST_F(ManagerTest, ArgumentErrors) {
  make(small_config(16));
  const auto p = seq(0, 5);
  EXPECT_EQ(status_of([&] { m().add(1, p.data(), 0, {}, nullptr); }), KVC_ERR_INVALID_ARGUMENT);
  add(1, p);
  EXPECT_EQ(status_of([&] { m().add(1, p.data(), p.size(), {}, nullptr); }), KVC_ERR_ALREADY_EXISTS);
  SequenceOptions bad;
  bad.prompt_priority = 101;
  EXPECT_EQ(status_of([&] { m().add(2, p.data(), p.size(), bad, nullptr); }), KVC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(status_of([&] { m().extend(9, p.data(), 1, nullptr); }), KVC_ERR_NOT_FOUND);
  EXPECT_EQ(status_of([&] { m().commit(9, 1); }), KVC_ERR_NOT_FOUND);
  EXPECT_EQ(status_of([&] { m().rewind(9, 1); }), KVC_ERR_NOT_FOUND);
  EXPECT_EQ(status_of([&] { m().remove(9); }), KVC_ERR_NOT_FOUND);
  EXPECT_EQ(status_of([&] { m().extend(1, p.data(), kMaxSequenceTokens, nullptr); }),
            KVC_ERR_INVALID_ARGUMENT);
  const uint64_t ids[2] = {1, 1};
  const int32_t toks[2] = {1, 2};
  EXPECT_EQ(status_of([&] { m().extend_batch(ids, toks, 2, nullptr); }), KVC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(m().sequence(1).length(), 5u);
  m().check_invariants();
}

TEST_F(ManagerTest, DecodeBatchAllOrNothing) {
  make(small_config(4));
  add(1, seq(0, 4));
  add(2, seq(10, 3));
  add(3, seq(20, 4));  // 3 blocks in use, 1 free
  const uint64_t ids[3] = {1, 2, 3};
  const int32_t toks[3] = {100, 101, 102};
  // Sequences 1 and 3 each need a new block: 2 > 1 free.
  EXPECT_EQ(status_of([&] { m().extend_batch(ids, toks, 3, nullptr); }), KVC_ERR_OUT_OF_BLOCKS);
  EXPECT_EQ(m().sequence(2).length(), 3u);
  m().extend_batch(ids, toks, 2, nullptr);
  m().check_invariants();
  EXPECT_EQ(m().sequence(1).length(), 5u);
  EXPECT_EQ(m().sequence(2).length(), 4u);
  EXPECT_EQ(stats().free_blocks, 0u);
}

TEST_F(ManagerTest, ManyGroupsHoldOneBlockEach) {
  CacheConfig c = small_config(16);
  c.num_layers = 4;
  c.kv_heads = {2, 4, 2, 4};  // two groups, two pools
  make(c);
  EXPECT_EQ(m().num_groups(), 2u);
  cache_prompt(1, seq(0, 9));
  EXPECT_EQ(add(2, seq(0, 9)), 8u);
  // Block bytes 1:2 share 24 pages of the larger block (page_arena.h).
  ASSERT_NE(m().arena(), nullptr);
  EXPECT_EQ(m().arena()->num_pages(), 24u);
  EXPECT_EQ(stats().num_blocks, m().pool(0).capacity() + m().pool(1).capacity() +
                                    m().arena()->num_free());
  EXPECT_EQ(stats().in_use_blocks, 6u);
  EXPECT_EQ(stats().cached_blocks, 2u);  // the two groups' blocks of tail [8]
}

TEST(BlockHash, ChainsAndTagsInputs) {
  const int32_t t[4] = {1, 2, 3, 4};
  if (bucket_hash_bits() == 64) {
    EXPECT_NE(hash_block(0, 0, 0, t, 4), hash_block(1, 0, 0, t, 4));
    EXPECT_NE(hash_block(0, 0, 0, t, 4), hash_block(0, 1, 0, t, 4));
    EXPECT_NE(hash_block(0, 0, 0, t, 4), hash_block(0, 0, 0, t, 3));
  }
  EXPECT_EQ(hash_block(5, 6, 7, t, 4), hash_block(5, 6, 7, t, 4));
  if (bucket_hash_bits() == 8) {
    EXPECT_LT(hash_block(5, 6, 7, t, 4), 256u);
  }
}

}  // namespace
}  // namespace kvc
