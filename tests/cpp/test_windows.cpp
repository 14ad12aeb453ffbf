// Sliding-window layer groups with exact numbers: a windowed group holds at
// most ceil(W/T) + 1 blocks, releases the rest to the tree, and a hybrid
// model (full + windowed groups) reuses the longest prefix every group
// accepts. The invariant checker runs after every step, and reused
// windowed blocks are compared byte for byte with what was written.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "core/batch_tables.h"
#include "core/cache.h"
#include "base/error.h"
#include "manager_fixture.h"

namespace kvc {
namespace {

constexpr uint32_t kT = 16;  // tokens per block
constexpr uint32_t kW = 32;  // the windowed layer's window: 2 blocks

std::vector<int32_t> tokens(int32_t from, int32_t n) { return test::seq(from, n); }

// Layer 0 full attention, layer 1 a 32-token window: equal block bytes, so
// two groups drawing from one pool of 2 * blocks_per_group blocks.
CacheConfig hybrid(uint64_t blocks_per_group) {
  CacheConfig c;
  c.num_layers = 2;
  c.kv_heads = {2};
  c.head_dim = 4;
  c.dtype = KVC_DTYPE_F32;
  c.tokens_per_block = kT;
  c.windows = {0, kW};
  c.max_tokens = blocks_per_group * kT;
  return c;
}

class WindowTest : public test::ManagerFixture {
 protected:
  uint64_t probe(const std::vector<int32_t>& t) { return ManagerFixture::probe(t); }
  void extend(uint64_t id, int32_t token) { ManagerFixture::extend(id, {token}); }
  // Blocks group g of sequence id holds (positions before its window are
  // kNoBlock).
  uint64_t held(uint64_t id, uint32_t g) {
    uint64_t n = 0;
    for (uint32_t b : m().sequence(id).blocks[g]) n += b != kNoBlock ? 1 : 0;
    return n;
  }
  GroupStats group(uint32_t g) { return m().group_stats(g); }
};

TEST_F(WindowTest, GroupsAndPools) {
  make(hybrid(8));
  ASSERT_EQ(m().num_groups(), 2u);
  EXPECT_EQ(m().window(0), 0u);
  EXPECT_EQ(m().window(1), kW);
  EXPECT_EQ(m().num_pools(), 1u);  // equal block bytes: one pool, shared
  EXPECT_EQ(m().pool(0).capacity(), 16u);
}

TEST_F(WindowTest, WindowedGroupHoldsAtMostCeilWOverTPlusOneBlocks) {
  make(hybrid(64));
  add(1, tokens(0, 20));
  commit_all(1);
  for (int32_t t = 20; t < 400; ++t) {
    extend(1, t);
    EXPECT_LE(held(1, 1), kW / kT + 1) << "length " << t + 1;
    commit_all(1);
    EXPECT_LE(held(1, 1), kW / kT + 1) << "length " << t + 1;
    EXPECT_EQ(held(1, 0), (uint64_t(t) + 1 + kT - 1) / kT);  // the full group keeps all
  }
  // 400 tokens = 25 blocks: the window [368, 400) covers blocks 23 and 24;
  // a query at 400 needs keys from 369 on, so 22 blocks were released.
  EXPECT_EQ(held(1, 1), 2u);
  EXPECT_EQ(group(1).released_blocks, 23u);
  EXPECT_EQ(group(0).released_blocks, 0u);
  EXPECT_EQ(group(0).in_use_blocks, 25u);
  EXPECT_EQ(group(1).in_use_blocks, 2u);
  // Published blocks the window let go stay cached in the tree.
  EXPECT_EQ(group(1).cached_blocks, 23u);
  EXPECT_EQ(m().stats().free_blocks, 128u - 25u - 25u);
}

TEST_F(WindowTest, UnpublishedBlocksLeavingTheWindowAreFreed) {
  CacheConfig c = hybrid(64);
  c.block_reuse = false;
  make(c);
  add(1, tokens(0, 100));
  EXPECT_EQ(held(1, 1), 7u);  // the whole prompt until it is computed
  commit_all(1);
  // A token at 100 attends to [69, 100]: blocks 4..6 stay.
  EXPECT_EQ(held(1, 1), 3u);
  EXPECT_EQ(group(1).cached_blocks, 0u);
  EXPECT_EQ(m().stats().free_blocks, 128u - 7u - 3u);
}

// The hybrid hit length: a 128-token prompt (8 blocks) cached, then probed
// with one more token (the last prompt token is always recomputed).
class HybridReuseTest : public WindowTest {
 protected:
  // The pool holds exactly the prompt's 8 + 8 blocks.
  void SetUp() override { make(hybrid(8)); }
  void cache_prompt(SequenceOptions o = {}) {
    EXPECT_EQ(add(1, prompt_, o), 0u);
    commit_all(1);
    EXPECT_EQ(group(1).released_blocks, 6u);  // a token at 128 needs 97.., blocks 6 and 7
    remove(1);
    EXPECT_EQ(m().stats().cached_blocks, 16u);
    EXPECT_EQ(m().stats().free_blocks, 0u);
  }
  // Takes one block per group: evicts the two oldest lowest-priority ones.
  void pressure(uint64_t id) {
    add(id, {-1});
    remove(id);
  }
  std::vector<int32_t> prompt_ = tokens(0, 128);
  std::vector<int32_t> longer_ = tokens(0, 129);
};

TEST_F(HybridReuseTest, EverythingCachedReusesTheWholePrompt) {
  cache_prompt();
  EXPECT_EQ(probe(longer_), 128u);
  EXPECT_EQ(add(2, longer_), 128u);
  // The windowed group holds only the window before the first computed
  // token (128 attends to 97..128): blocks 6, 7 and the new block 8.
  EXPECT_EQ(held(2, 0), 9u);
  EXPECT_EQ(held(2, 1), 3u);
  EXPECT_EQ(m().sequence(2).window_begin[1], 6u);
  EXPECT_EQ(group(0).reused_blocks, 8u);
  EXPECT_EQ(group(1).reused_blocks, 2u);
}

TEST_F(HybridReuseTest, EvictingAWindowGroupsEarlyBlockLeavesTheHitLengthUnchanged) {
  cache_prompt();
  // Oldest: the windowed slots the commit released (blocks 0, 1, ...).
  pressure(10);
  EXPECT_EQ(group(1).evicted_blocks, 2u);
  EXPECT_EQ(group(0).evicted_blocks, 0u);
  EXPECT_EQ(m().stats().num_sequences, 0u);
  EXPECT_EQ(probe(longer_), 128u);
}

TEST_F(HybridReuseTest, EvictingAWindowGroupsLastBlockShortensTheHitLength) {
  // Block 7 (tokens [112, 128)) at priority 10: its windowed slot goes
  // first (released before its node's full-group block at removal).
  SequenceOptions o;
  o.retention_ranges = {RetentionRange{112, 128, 10, kNoDuration}};
  cache_prompt(o);
  add(10, {-1});
  EXPECT_EQ(group(1).evicted_blocks, 1u);  // block 7's windowed slot
  EXPECT_EQ(group(0).evicted_blocks, 1u);  // then block 7's node: a leaf at priority 10
  remove(10);
  // 8 blocks would need windowed blocks 6 and 7; 7 blocks need 5 and 6.
  EXPECT_EQ(probe(longer_), 112u);
}

TEST_F(HybridReuseTest, EvictingTheFullGroupsFirstBlockLeavesNothing) {
  cache_prompt();
  // Another prompt of 8 blocks needs the whole pool: leaves first, the full
  // group's block 0 goes last, and with it the prompt.
  add(2, tokens(1000, 128));
  EXPECT_EQ(group(0).evicted_blocks, 8u);
  EXPECT_EQ(group(1).evicted_blocks, 8u);
  EXPECT_EQ(probe(longer_), 0u);
}

// A node whose windowed slot was evicted takes the windowed block of the
// next sequence that computes and commits the same prefix.
TEST_F(WindowTest, AnEvictedWindowedSlotIsFilledByTheNextCommit) {
  make(hybrid(16));  // 32 blocks
  add(1, tokens(0, 128));
  commit_all(1);  // kept live: the windowed group released blocks 0..5
  EXPECT_EQ(group(1).cached_blocks, 6u);
  add(10, tokens(5000, 176));  // 11 positions: 16 free + the 6 cached slots
  remove(10);
  EXPECT_EQ(group(1).evicted_blocks, 6u);
  EXPECT_EQ(group(0).evicted_blocks, 0u);
  auto prefix = tokens(0, 80);
  prefix.push_back(9999);
  EXPECT_EQ(probe(prefix), 0u);  // the window before any reuse point lacks blocks
  EXPECT_EQ(add(2, prefix), 0u);
  commit_all(2);
  remove(2);
  // Sequence 2 found the 5 nodes cached and gave their windowed slots its
  // blocks: the prefix is reusable again.
  EXPECT_EQ(probe(prefix), 80u);
}

// Block bytes differ (2 kv heads full, 1 kv head windowed): the pools share
// pages, and pages the windowed group no longer needs move to the full one.
TEST_F(WindowTest, PagesMoveBetweenPoolsOfDifferentBlockBytes) {
  CacheConfig c = hybrid(8);  // a budget of 8 blocks of each group
  c.kv_heads = {2, 1};
  make(c);
  ASSERT_EQ(m().num_pools(), 2u);
  ASSERT_NE(m().arena(), nullptr);
  EXPECT_EQ(m().arena()->num_pages(), 12u);  // 8 * (2 + 1) half-pages
  EXPECT_EQ(m().pool(0).blocks_per_page(), 1u);
  EXPECT_EQ(m().pool(1).blocks_per_page(), 2u);
  // A static split would give the full group 8 blocks: 128 tokens. Chunked
  // prefill of 160 tokens fits, because the window releases its blocks.
  add(1, tokens(0, 32));
  commit_all(1);
  for (int32_t at = 32; at < 160; at += 16) {
    const auto chunk = tokens(at, 16);
    m().extend(1, chunk.data(), chunk.size(), nullptr);
    m().check_invariants();
    commit_all(1);
  }
  EXPECT_EQ(group(0).in_use_blocks, 10u);
  EXPECT_EQ(group(1).in_use_blocks, 2u);
  EXPECT_EQ(m().pool(0).capacity(), 10u);  // pages moved to the full group
  EXPECT_GT(group(1).evicted_blocks, 0u);  // cached windowed blocks made room
  remove(1);
  // The whole prefix stays reusable: every full block and the window's two.
  auto again = tokens(0, 160);
  again.push_back(7);
  EXPECT_EQ(probe(again), 160u);
}

TEST_F(WindowTest, RewindPastAReleasedBlockIsRefused) {
  make(hybrid(64));
  add(1, tokens(0, 100));
  commit_all(1);  // windowed group released blocks 0..3 (window start 4)
  ASSERT_EQ(m().sequence(1).window_begin[1], 4u);
  // The new last token must still see 32 tokens: length >= 4*16 + 31 = 95.
  try {
    m().rewind(1, 6);
    FAIL() << "rewind accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), KVC_ERR_INVALID_ARGUMENT);
    EXPECT_STREQ(e.what(),
                 "cannot rewind 6 tokens: sequence 1 would be 94 tokens long, but layer group 1 "
                 "(window 32) has released the blocks before token 64, so it can rewind at most "
                 "5 tokens (rewind before committing rejected tokens)");
  }
  m().check_invariants();
  m().rewind(1, 5);
  m().check_invariants();
  EXPECT_EQ(m().sequence(1).length(), 95u);
}

TEST_F(WindowTest, ForkSharesTheWindowAndCopiesTheTail) {
  make(hybrid(64));
  add(1, tokens(0, 100));
  commit_all(1);
  m().fork(1, 2);
  m().check_invariants();
  EXPECT_EQ(held(2, 1), 3u);
  extend(2, 7);  // the shared partial tail is copied in every group
  EXPECT_NE(m().sequence(2).blocks[1].back(), m().sequence(1).blocks[1].back());
  remove(1);
  remove(2);
  EXPECT_EQ(m().stats().in_use_blocks, 0u);
}

// Bytes: KV derived from (position, layer) written into every block the
// prompt's sequence holds; the reused windowed blocks must hold them.
TEST_F(WindowTest, ReusedWindowedBlocksHoldTheBytesWritten) {
  make(hybrid(64));
  const auto p = tokens(0, 128);
  add(1, p);
  auto fill = [&](uint32_t layer, uint32_t block, uint64_t b) {
    const LayerSlabs v = cache_->layer_view(layer);
    auto* base = static_cast<unsigned char*>(v.base) + uint64_t(block) * v.block_stride;
    const uint64_t bytes = v.kv_stride * v.kv_factor;  // one layer of one block
    for (uint64_t i = 0; i < bytes; ++i) base[i] = uint8_t(b * 31 + layer * 7 + i * 13);
  };
  const Sequence& s = m().sequence(1);
  for (uint64_t b = 0; b < 8; ++b) {
    fill(0, s.blocks[0][b], b);
    fill(1, s.blocks[1][b], b);
  }
  commit_all(1);
  remove(1);
  ASSERT_EQ(add(2, tokens(0, 129)), 128u);
  const Sequence& r = m().sequence(2);
  for (uint32_t layer = 0; layer < 2; ++layer) {
    const LayerSlabs v = cache_->layer_view(layer);
    const uint64_t bytes = v.kv_stride * v.kv_factor;
    for (uint64_t b = r.window_begin[layer]; b < 8; ++b) {
      const auto* got = static_cast<const unsigned char*>(v.base) +
                        uint64_t(r.blocks[layer][b]) * v.block_stride;
      for (uint64_t i = 0; i < bytes; ++i)
        ASSERT_EQ(got[i], uint8_t(b * 31 + layer * 7 + i * 13))
            << "layer " << layer << " block " << b << " byte " << i;
    }
  }
}

TEST_F(WindowTest, TablesFillReleasedBlocks) {
  make(hybrid(64));
  add(1, tokens(0, 100));
  const uint64_t id = 1;
  std::vector<int64_t> slots(100);
  ASSERT_TRUE(write_slot_mapping(m(), 1, &id, 1, slots.data(), slots.size(), nullptr).fits);
  commit_all(1);  // group 1 releases blocks 0..3
  std::vector<int32_t> row(8);
  ASSERT_TRUE(write_block_table(m(), 1, &id, 1, row.data(), row.size(), -7).fits);
  const auto& b = m().sequence(1).blocks[1];
  EXPECT_EQ(row, (std::vector<int32_t>{-7, -7, -7, -7, int32_t(b[4]), int32_t(b[5]), int32_t(b[6]), -7}));
  int32_t indptr[2], indices[7], last[1];
  ASSERT_TRUE(write_block_table_csr(m(), 1, &id, 1, indptr, indices, 7, last).fits);
  EXPECT_EQ(std::vector<int32_t>(indices, indices + 7),
            (std::vector<int32_t>{0, 0, 0, 0, int32_t(b[4]), int32_t(b[5]), int32_t(b[6])}));
  EXPECT_EQ(last[0], 4);
  // A rewind that keeps the window, then a slot mapping of the re-added
  // tokens: every slot lies in a held block.
  m().rewind(1, 4);
  extend(1, 96);
  ASSERT_TRUE(write_slot_mapping(m(), 1, &id, 1, slots.data(), slots.size(), nullptr).fits);
  EXPECT_EQ(slots[0], int64_t(b[6]) * kT + 0);  // token 96
}

}  // namespace
}  // namespace kvc
