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
#include "block_manager_cases.h"
#include "manager_fixture.h"

namespace kvc {
namespace {

using test::cat;
using test::ManagerTest;
using test::seq;
using test::small_config;
using test::status_of;

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

// --- Token buffers --------------------------------------------------------

// A sequence whose tokens outgrow their buffer takes a removed sequence's
// larger buffer (memory an earlier prompt touched) instead of a new one,
// and its tokens are the same.
TEST_F(ManagerTest, ATokenBufferThatIsOutgrownTakesASparesLargerOne) {
  make(small_config(4096));
  add(1, seq(0, 8));
  add(2, seq(100000, 3000));
  const int32_t* big = m().sequence(2).tokens.data();
  remove(1);
  remove(2);
  add(3, seq(200000, 8));  // the smallest spare that holds it: sequence 1's buffer
  ASSERT_NE(m().sequence(3).tokens.data(), big);
  const std::vector<int32_t> more = seq(300000, 2000);
  extend(3, more);
  const Sequence& s = m().sequence(3);
  EXPECT_EQ(s.tokens.data(), big);
  EXPECT_EQ(s.length(), 2008u);
  const std::vector<int32_t> want = cat(seq(200000, 8), more);
  for (uint64_t p = s.token_base; p < s.length(); ++p) ASSERT_EQ(*s.token_at(p), want[p]) << p;
}

}  // namespace
}  // namespace kvc
