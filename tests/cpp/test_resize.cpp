// kvc_cache_resize in place (Cache::resize): grow and shrink with sequences
// in flight keep every block id, the bytes of every block that stays
// (content oracle, kv_content.h), the counts and the pools' addresses; a
// shrink evicts cached blocks in victim order (retention priorities, LRU;
// leaves first; reported as events; offloaded to a host tier), moves the
// cached blocks past the new end below it, and refuses over a block in
// use, changing nothing; a growth the device cannot back changes
// nothing; the plan follows AutoDeploy's formula.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "core/cache.h"
#include "kv_content.h"
#include "manager_fixture.h"

namespace kvc {
namespace {

using test::cat;
using test::check_sequence;
using test::check_tree;
using test::seq;
using test::status_of;
using test::write_sequence;

constexpr uint64_t kSet = 128;  // one block of the one group: 2 layers * K,V * 2 * f32 * 4 tokens

CacheConfig config(uint64_t blocks, uint64_t max_blocks) {
  CacheConfig c;
  c.num_layers = 2;
  c.kv_heads = {1};
  c.head_dim = 2;
  c.dtype = KVC_DTYPE_F32;
  c.tokens_per_block = 4;
  c.primary_bytes = blocks * kSet;
  c.max_primary_bytes = max_blocks * kSet;
  c.event_buffer_size = 1024;
  return c;
}

// Everything a refused call must leave as it was.
struct State {
  std::vector<BlockInfo> blocks;
  std::vector<uint32_t> free_list;
  std::vector<uint64_t> counts;
  std::vector<void*> bases;
  uint64_t last_event = 0;

  static State of(const Cache& c) {
    State s;
    const BlockManager& m = c.manager();
    for (size_t p = 0; p < m.num_pools(); ++p) {
      const BlockPool& pool = m.pool(uint32_t(p));
      for (uint32_t b = 0; b < pool.id_bound(); ++b) s.blocks.push_back(pool.info(b));
      s.free_list.insert(s.free_list.end(), pool.free_list().begin(), pool.free_list().end());
      s.bases.push_back(c.pool(uint32_t(p)).base());
      s.counts.push_back(c.pool(uint32_t(p)).num_blocks());
    }
    const CacheStats st = m.stats();
    s.counts.insert(s.counts.end(), {st.num_blocks, st.free_blocks, st.cached_blocks,
                                     st.in_use_blocks, st.evicted_blocks, st.tree_nodes,
                                     c.plan().total_bytes, c.plan().token_capacity});
    s.last_event = m.events() ? m.events()->last_id() : 0;
    return s;
  }
  bool operator==(const State& o) const {
    if (blocks.size() != o.blocks.size()) return false;
    for (size_t i = 0; i < blocks.size(); ++i)
      if (blocks[i].ref != o.blocks[i].ref || blocks[i].node != o.blocks[i].node) return false;
    return free_list == o.free_list && counts == o.counts && bases == o.bases &&
           last_event == o.last_event;
  }
};

std::vector<kvc_event_t> drain(BlockManager& m) {
  std::vector<kvc_event_t> out, ev(64);
  for (;;) {
    kvc_event_drain_t r{};
    m.drain_events(ev.data(), ev.size(), nullptr, 0, r);
    out.insert(out.end(), ev.begin(), ev.begin() + long(r.events));
    if (r.events == 0) return out;
  }
}

class Resize : public test::ManagerFixture {
 protected:
  // Adds, writes the oracle's bytes, commits.
  void add_written(uint64_t id, const std::vector<int32_t>& t) {
    add(id, t);
    write_sequence(*cache_, m().sequence(id), 0, t.size());
    commit_all(id);
  }
  std::vector<uint32_t> ids(uint64_t id) { return m().sequence(id).blocks[0]; }
  void expect_bytes() {
    EXPECT_EQ(check_tree(*cache_), "");
    for (uint64_t id : live_)
      EXPECT_EQ(check_sequence(*cache_, m().sequence(id), 0, m().sequence(id).length()), "");
  }
  std::vector<uint64_t> live_;
};

TEST_F(Resize, GrowKeepsIdsBytesAndAddressesAndAddsBlocksAfterTheFreeOnes) {
  make(config(16, 64));
  const std::vector<int32_t> a = seq(0, 24), b = seq(100, 16);
  add_written(1, a);  // 6 blocks in use
  add_written(2, b);  // 4 blocks, cached once removed
  remove(2);
  live_ = {1};
  drain(m());
  const std::vector<uint32_t> held = ids(1);
  const LayerSlabs view = cache_->layer_view(1);
  void* base = cache_->pool(0).base();
  const CacheStats before = stats();
  ASSERT_EQ(before.free_blocks, 6u);

  cache_->resize(48 * kSet);
  m().check_invariants();
  EXPECT_EQ(cache_->pool(0).base(), base);
  EXPECT_EQ(cache_->layer_view(1).base, view.base);
  EXPECT_EQ(cache_->layer_view(1).num_blocks, 48u);
  EXPECT_EQ(cache_->pool(0).num_blocks(), 48u);
  EXPECT_EQ(cache_->plan().total_bytes, 48 * kSet);
  EXPECT_EQ(cache_->plan().token_capacity, 48u * 4);
  const CacheStats grown = stats();
  EXPECT_EQ(grown.num_blocks, 48u);
  EXPECT_EQ(grown.free_blocks, 6u + 32);
  EXPECT_EQ(grown.cached_blocks, before.cached_blocks);
  EXPECT_EQ(grown.in_use_blocks, before.in_use_blocks);
  EXPECT_EQ(grown.evicted_blocks, before.evicted_blocks);
  EXPECT_TRUE(drain(m()).empty());  // a grow changes nothing cached
  EXPECT_EQ(ids(1), held);
  expect_bytes();
  EXPECT_EQ(probe(cat(b, {7})), 16u);  // the cached prompt is still reusable

  // The 6 old free blocks go first, then the new ones; all hold bytes.
  add_written(3, seq(300, 24));
  for (uint32_t id : ids(3)) EXPECT_LT(id, 16u);
  add_written(4, seq(400, 60));  // 15 blocks: only the new ids are free
  for (uint32_t id : ids(4)) EXPECT_GE(id, 16u);
  live_ = {1, 3, 4};
  expect_bytes();
  EXPECT_EQ(probe(cat(b, {7})), 16u);
}

TEST_F(Resize, ShrinkEvictsInVictimOrderAndMovesTheCachedTailBelowTheEnd) {
  make(config(16, 16));
  const std::vector<int32_t> a = seq(0, 16), c = seq(200, 16);
  add_written(1, a);  // ids 0..3
  remove(1);          // cached, the oldest
  add_written(2, seq(100, 16));  // ids 4..7, in use
  add_written(3, c);             // ids 8..11
  remove(3);                     // cached, younger than A
  ASSERT_EQ(ids(2), (std::vector<uint32_t>{4, 5, 6, 7}));
  live_ = {2};
  const std::vector<kvc_event_t> stored = drain(m());
  std::vector<uint64_t> a_hashes;  // root first
  for (size_t i = 0; i < 4; ++i) a_hashes.push_back(stored[i].hash);
  const CacheStats before = stats();
  void* base = cache_->pool(0).base();

  // 10 blocks hold 4 in use and 6 of the 8 cached: the two oldest go (A's
  // leaf, then its parent), wherever they lie; C's blocks 10 and 11, past
  // the end, move into the ids they freed.
  cache_->resize(10 * kSet);
  m().check_invariants();
  EXPECT_EQ(cache_->pool(0).base(), base);
  const CacheStats after = stats();
  EXPECT_EQ(after.num_blocks, 10u);
  EXPECT_EQ(after.evicted_blocks - before.evicted_blocks, 2u);
  EXPECT_EQ(after.cached_blocks, before.cached_blocks - 2);
  EXPECT_EQ(after.in_use_blocks, before.in_use_blocks);
  EXPECT_EQ(after.free_blocks, 0u);
  EXPECT_EQ(ids(2), (std::vector<uint32_t>{4, 5, 6, 7}));
  expect_bytes();  // the moved blocks hold C's bytes under C's keys
  EXPECT_EQ(probe(cat(c, {1})), 16u);
  EXPECT_EQ(probe(cat(a, {1})), 8u);
  const std::vector<kvc_event_t> ev = drain(m());
  ASSERT_EQ(ev.size(), 2u);  // REMOVED, the leaf first; a move is no event
  EXPECT_EQ(ev[0].kind, uint32_t(KVC_EVENT_REMOVED));
  EXPECT_EQ(ev[0].hash, a_hashes[3]);
  EXPECT_EQ(ev[1].kind, uint32_t(KVC_EVENT_REMOVED));
  EXPECT_EQ(ev[1].hash, a_hashes[2]);

  // 8 blocks: the rest of A goes; C's first two blocks (ids 8, 9) move.
  cache_->resize(8 * kSet);
  m().check_invariants();
  EXPECT_EQ(stats().evicted_blocks - before.evicted_blocks, 4u);
  EXPECT_EQ(probe(cat(a, {1})), 0u);
  EXPECT_EQ(probe(cat(c, {1})), 16u);
  expect_bytes();
  const std::vector<kvc_event_t> ev2 = drain(m());
  ASSERT_EQ(ev2.size(), 2u);
  EXPECT_EQ(ev2[0].hash, a_hashes[1]);
  EXPECT_EQ(ev2[1].hash, a_hashes[0]);

  // C is reused from the blocks it moved to, bit for bit.
  remove(2);
  add(4, cat(c, {1}));
  EXPECT_EQ(stats().reused_blocks - before.reused_blocks, 4u);
  write_sequence(*cache_, m().sequence(4), 16, 17);
  live_ = {4};
  expect_bytes();
  remove(4);
  live_ = {};

  // And it grows back to the creation size: the cut ids are free again,
  // beside the block of sequence 4's last token (B's leaf made room for it).
  cache_->resize(16 * kSet);
  EXPECT_EQ(stats().free_blocks, 8u + 1);
  EXPECT_EQ(stats().cached_blocks, 7u);
  EXPECT_EQ(cache_->pool(0).base(), base);
  expect_bytes();
}

// Retention priorities order a shrink's victims as any eviction's: a
// high-priority prompt past the end stays (moved), a default one below it
// goes.
TEST_F(Resize, ShrinkHonoursRetentionPriorities) {
  make(config(12, 12));
  const std::vector<int32_t> low = seq(0, 16), high = seq(300, 16);
  add_written(1, low);  // ids 0..3
  remove(1);
  SequenceOptions keep;
  keep.prompt_priority = 90;
  add(2, high, keep);  // ids 4..7, priority 90
  write_sequence(*cache_, m().sequence(2), 0, high.size());
  commit_all(2);
  remove(2);
  add_written(3, seq(600, 16));  // ids 8..11: the youngest cached blocks
  remove(3);
  cache_->resize(4 * kSet);  // 4 of 12 cached blocks stay
  m().check_invariants();
  EXPECT_EQ(probe(cat(high, {1}), keep), 16u);
  EXPECT_EQ(probe(cat(low, {1})), 0u);
  EXPECT_EQ(probe(cat(seq(600, 16), {1})), 0u);
  expect_bytes();
}

// A shrink with a host tier moves its victims there (the usual offload),
// and a later prompt brings them back bit for bit.
TEST_F(Resize, ShrinkOffloadsItsVictimsToTheHostTier) {
  CacheConfig cfg = config(12, 12);
  cfg.host_cache_bytes = 8 * kSet;
  make(cfg);
  const std::vector<int32_t> a = seq(0, 16), b = seq(300, 16);
  add_written(1, seq(900, 8));  // ids 0, 1 in use
  add_written(2, a);            // ids 2..5
  remove(2);
  add_written(3, b);  // ids 6..9
  remove(3);
  live_ = {1};
  const CacheStats before = stats();
  ASSERT_EQ(before.host_cached_blocks, 0u);

  cache_->resize(6 * kSet);  // room for 2 in use and 4 cached: A (older) goes to the host
  m().check_invariants();
  const CacheStats after = stats();
  EXPECT_EQ(after.num_blocks, 6u);
  EXPECT_EQ(after.evicted_blocks, before.evicted_blocks);  // moved, not evicted
  EXPECT_EQ(after.host.offloaded_blocks - before.host.offloaded_blocks, 4u);
  EXPECT_EQ(after.host_cached_blocks, 4u);
  EXPECT_EQ(after.cached_blocks, 4u);
  expect_bytes();  // B moved below the end; A's host blocks hold A's bytes
  EXPECT_EQ(probe(cat(b, {1})), 16u);
  EXPECT_EQ(probe(cat(a, {1})), 16u);

  remove(1);
  add(4, cat(a, {1}));  // onboards A (B makes room)
  EXPECT_EQ(stats().host.onboarded_blocks - before.host.onboarded_blocks, 4u);
  write_sequence(*cache_, m().sequence(4), 16, 17);
  live_ = {4};
  expect_bytes();
}

TEST_F(Resize, ShrinkOverABlockInUseIsRefusedAndChangesNothing) {
  make(config(16, 32));
  add_written(1, seq(0, 16));
  remove(1);
  add_written(2, seq(100, 16));  // ids 4..7 in use
  live_ = {2};
  const State before = State::of(*cache_);
  try {
    cache_->resize(6 * kSet);
    FAIL() << "a shrink over a block in use went through";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), KVC_ERR_OUT_OF_BLOCKS);
    EXPECT_NE(std::string(e.what()).find("block 6 of pool 0 (layer group 0) is in use"),
              std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(before == State::of(*cache_));
  m().check_invariants();
  expect_bytes();
  // Once the sequence is gone its blocks are cached and the shrink evicts them.
  remove(2);
  live_ = {};
  cache_->resize(6 * kSet);
  EXPECT_EQ(stats().num_blocks, 6u);
  expect_bytes();
}

TEST_F(Resize, BadBudgetsAreRefusedAndChangeNothing) {
  make(config(16, 32));
  add_written(1, seq(0, 16));
  const State before = State::of(*cache_);
  for (uint64_t bytes : {uint64_t(0), kSet - 1, 33 * kSet}) {
    EXPECT_EQ(status_of([&] { cache_->resize(bytes); }), KVC_ERR_INVALID_ARGUMENT) << bytes;
    EXPECT_TRUE(before == State::of(*cache_)) << bytes;
  }
  // A budget that is not a whole number of blocks rounds down.
  cache_->resize(20 * kSet + 5);
  EXPECT_EQ(stats().num_blocks, 20u);
}

TEST(ResizeFaults, AGrowTheDeviceCannotBackChangesNothing) {
  for (int pools : {1, 2}) {
    // 150 blocks pass the page of backing each pool has: every pool commits.
    CacheConfig c = config(16, 200);
    uint64_t set = kSet;
    if (pools == 2) {
      c.kv_heads = {1, 2};         // blocks of 64 and 128 bytes: two pools,
      c.host_cache_bytes = 4 * 192;  // split (no shared pages with a host tier)
      set = 192;
      c.primary_bytes = 16 * set;
      c.max_primary_bytes = 200 * set;
    }
    test::FaultPlan faults;
    auto cache = test::faulty_cache(c, faults);
    const std::vector<int32_t> t = seq(0, 16);
    cache->manager().add(1, t.data(), t.size(), {}, nullptr);
    write_sequence(*cache, cache->manager().sequence(1), 0, t.size());
    cache->manager().commit(1, t.size());
    const State before = State::of(*cache);
    const int64_t live = faults.live;
    faults.fail_allocation(uint32_t(pools));
    try {
      cache->resize(150 * set);
      ADD_FAILURE() << "the injected fault did not fail the grow";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), KVC_ERR_OUT_OF_MEMORY) << e.what();
      EXPECT_NE(std::string(e.what()).find("(injected fault)"), std::string::npos) << e.what();
    }
    ASSERT_EQ(cache->num_pools(), size_t(pools));
    EXPECT_TRUE(before == State::of(*cache)) << pools;
    EXPECT_EQ(faults.live, live);
    cache->manager().check_invariants();
    EXPECT_EQ(check_sequence(*cache, cache->manager().sequence(1), 0, t.size()), "");
    cache->resize(150 * set);  // without the fault it grows
    EXPECT_EQ(cache->manager().stats().num_blocks, 150u * uint64_t(pools));
    EXPECT_EQ(check_sequence(*cache, cache->manager().sequence(1), 0, t.size()), "");
  }
}

TEST(ResizePlan, FollowsTheSeedsFormulaAndTheCeiling) {
  Cache cache(config(16, 1000));
  ResizeInputs in;
  in.free_bytes = 100000;
  in.non_paged_bytes = 20000;
  in.forward_bytes = 30000;
  in.fraction = 0.5;
  uint64_t formula = 0, free = 0;
  MemoryPlan p = cache.plan_for(in, &formula, &free);
  EXPECT_EQ(formula, 25000u);  // (100000 - 20000 - 30000) * 0.5
  EXPECT_EQ(free, 100000u);
  EXPECT_EQ(p.budget_bytes, 25000u);
  EXPECT_EQ(p.blocks_per_group, 25000 / kSet);
  EXPECT_EQ(p.pool_blocks, std::vector<uint64_t>{25000 / kSet});
  EXPECT_EQ(cache.manager().stats().num_blocks, 16u);  // planning changes nothing
  // Held to the ceiling.
  in.free_bytes = 10000000;
  p = cache.plan_for(in, &formula, &free);
  EXPECT_EQ(p.budget_bytes, 1000 * kSet);
  EXPECT_EQ(p.pool_blocks, std::vector<uint64_t>{1000});
  // Bad input.
  for (double f : {0.0, -0.5, 1.5}) {
    in.fraction = f;
    EXPECT_EQ(status_of([&] { cache.plan_for(in, &formula, &free); }), KVC_ERR_INVALID_ARGUMENT);
  }
  in.fraction = 1.0;
  in.free_bytes = 40000;  // non_paged + forward above it
  EXPECT_EQ(status_of([&] { cache.plan_for(in, &formula, &free); }), KVC_ERR_INVALID_ARGUMENT);
  in.free_bytes = 50000 + kSet - 1;  // less than one block left
  EXPECT_EQ(status_of([&] { cache.plan_for(in, &formula, &free); }), KVC_ERR_INVALID_ARGUMENT);
  in.free_bytes = 0;  // the CPU backend reports no free memory
  EXPECT_EQ(status_of([&] { cache.plan_for(in, &formula, &free); }), KVC_ERR_INVALID_ARGUMENT);
}

// Pools of different block bytes sharing pages: a grow adds free pages to
// the arena, which the pools take as they need blocks; a shrink cuts the
// last pages (evicting their cached blocks) and refuses over a page with
// a block in use.
TEST_F(Resize, PagesSharedBetweenPoolsGrowIntoTheArena) {
  CacheConfig c = config(8, 40);
  c.num_layers = 3;
  c.windows = {0, 9, 0};  // blocks of 128 (full layers) and 64 bytes (windowed)
  c.primary_bytes = 8 * 192;
  c.max_primary_bytes = 40 * 192;
  make(c);
  ASSERT_NE(m().arena(), nullptr);
  const uint32_t pages = m().arena()->num_pages();
  add_written(1, seq(0, 20));
  live_ = {1};
  const std::vector<void*> bases = {cache_->pool(0).base(), cache_->pool(1).base()};
  cache_->resize(40 * 192);
  m().check_invariants();
  EXPECT_EQ(m().arena()->num_pages(), 40u * 192 / 128);
  EXPECT_GT(m().arena()->num_pages(), pages);
  EXPECT_EQ(cache_->pool(0).base(), bases[0]);
  EXPECT_EQ(cache_->pool(1).base(), bases[1]);
  add_written(2, seq(500, 80));  // needs pages beyond the old arena
  live_ = {1, 2};
  expect_bytes();
  const State before = State::of(*cache_);
  EXPECT_EQ(status_of([&] { cache_->resize(8 * 192); }), KVC_ERR_OUT_OF_BLOCKS);
  EXPECT_TRUE(before == State::of(*cache_));
  remove(2);
  cache_->resize(8 * 192);
  EXPECT_EQ(m().arena()->num_pages(), pages);
  m().check_invariants();
  live_ = {1};
  expect_bytes();
}

// With a host tier the cut blocks leave the tree (with the host nodes
// below them); everything else stays in its tier with its bytes.
TEST_F(Resize, ShrinkWithAHostTier) {
  CacheConfig c = config(12, 24);
  c.host_cache_bytes = 8 * kSet;
  make(c);
  for (uint64_t id = 1; id <= 6; ++id) {
    add_written(id, seq(int32_t(id * 100), 16));
    remove(id);  // later ones offload earlier ones to the host tier
  }
  add_written(7, seq(0, 8));
  live_ = {7};
  const uint64_t host_before = stats().host_cached_blocks;
  EXPECT_GT(host_before, 0u);
  cache_->resize(24 * kSet);
  cache_->resize(6 * kSet);
  m().check_invariants();
  EXPECT_EQ(stats().num_blocks, 6u);
  expect_bytes();
}

}  // namespace
}  // namespace kvc
