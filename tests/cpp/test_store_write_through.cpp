// Write-through at commit (store_chain.h): a committed block reaches the
// stores while this cache still holds it, a second cache finds it bit for
// bit, the blocks a queued write reads cannot be freed or reused before it
// ran (they are cached and queued as without the tiers; leaving the tree
// waits for the job; a paused writer makes the race deterministic), priorities and resets, and
// the counted drop of a block whose device copy fails at eviction.
// Every step runs the invariant checker; flush() replaces any waiting.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "core/cache.h"
#include "kv_content.h"
#include "manager_fixture.h"
#include "redis_fixture.h"
#include "store_fixture.h"

namespace kvc {
namespace {

using test::check_sequence;
using test::check_tree;
using test::seq;
using test::write_sequence;
using testing_store::TempDir;

CacheConfig small_config(uint64_t primary_blocks) {
  CacheConfig c;
  c.num_layers = 2;
  c.kv_heads = {2};
  c.head_dim = 4;
  c.dtype = KVC_DTYPE_F32;
  c.tokens_per_block = 4;
  c.max_tokens = primary_blocks * 4;
  c.partial_reuse = false;  // only full blocks are published: exact counts
  return c;
}

CacheConfig disk_config(const std::string& dir, uint64_t primary_blocks) {
  CacheConfig c = small_config(primary_blocks);
  c.stores.disk_dir = dir;
  c.stores.disk_bytes = 64 * store_record_layout(c, group_layers(c)).record_bytes();
  return c;
}

CacheConfig redis_config(const std::string& url, uint64_t primary_blocks) {
  CacheConfig c = small_config(primary_blocks);
  c.stores.remote_url = url;
  c.stores.remote_namespace = "write-through";
  c.stores.remote_bytes = 64 << 20;
  c.stores.remote_connect_timeout_ms = 2000;
  c.stores.remote_command_timeout_ms = 2000;
  return c;
}

class Engine {
 public:
  explicit Engine(const CacheConfig& c) : cache_(std::make_unique<Cache>(c)) {}
  BlockManager& m() { return cache_->manager(); }
  StoreChain& chain() { return *m().stores(); }
  StoreTierReport tier() {
    chain().flush();
    return chain().reports().at(0);
  }
  void check() {
    m().check_invariants();
    EXPECT_EQ(check_tree(*cache_), "");
  }
  // Adds, checks the reused KV bit for bit, writes the KV of the rest.
  uint64_t add(uint64_t id, const std::vector<int32_t>& t, SequenceOptions o = {}) {
    const uint64_t cached = m().add(id, t.data(), t.size(), o, nullptr);
    const Sequence& s = m().sequence(id);
    EXPECT_EQ(check_sequence(*cache_, s, 0, cached), "");
    write_sequence(*cache_, s, cached, s.length());
    check();
    return cached;
  }
  uint64_t cache_prompt(uint64_t id, const std::vector<int32_t>& t, SequenceOptions o = {}) {
    const uint64_t cached = add(id, t, o);
    m().commit(id, t.size());
    check();
    m().remove(id);
    check();
    return cached;
  }
  void reset() { cache_.reset(); }
  Cache& cache() { return *cache_; }

 private:
  std::unique_ptr<Cache> cache_;
};

TEST(StoreWriteThrough, ACommittedBlockReachesTheDiskWhileStillCached) {
  TempDir dir;
  const auto a = seq(100, 17);  // 4 full blocks + 1 token
  {
    Engine e(disk_config(dir.path(), 8));
    ASSERT_TRUE(e.chain().write_through());
    EXPECT_EQ(e.add(1, a), 0u);
    e.m().commit(1, a.size());
    e.check();
    // Still held by sequence 1, nothing evicted: already on the disk.
    StoreTierReport d = e.tier();
    EXPECT_EQ(d.offered_blocks, 4u);
    EXPECT_EQ(d.io.stores, 4u);
    EXPECT_EQ(d.io.drops, 0u);
    EXPECT_EQ(e.m().stats().evicted_blocks, 0u);
    e.check();
    e.m().remove(1);
    e.check();
    // Evicting a stored block writes nothing more.
    e.cache_prompt(2, seq(900, 32));
    d = e.tier();
    EXPECT_GE(e.m().stats().evicted_blocks, 4u);
    EXPECT_EQ(d.offered_blocks, 4u + 8u);  // b's 8 at its own commit
    EXPECT_EQ(d.io.stores, 12u);
  }
  // A second cache on the directory: every full block of a, bit for bit.
  Engine second(disk_config(dir.path(), 8));
  EXPECT_EQ(second.add(1, a), 16u);
  EXPECT_EQ(second.tier().onboarded_blocks, 4u);
}

class StoreWriteThroughRedis : public RedisTest {};

TEST_F(StoreWriteThroughRedis, ASecondEngineSeesBlocksTheFirstStillCaches) {
  const auto a = seq(100, 21);  // 5 full blocks + 1 token
  Engine first(redis_config(server().url(), 8));
  ASSERT_TRUE(first.chain().write_through());
  EXPECT_EQ(first.add(1, a), 0u);
  first.m().commit(1, a.size());
  first.chain().flush();
  // The first engine still holds a (live sequence, in its tree)...
  EXPECT_EQ(first.m().stats().evicted_blocks, 0u);
  // ...and another engine on the server reuses it, bit for bit.
  Engine second(redis_config(server().url(), 8));
  EXPECT_EQ(second.add(1, a), 20u);
  EXPECT_EQ(second.tier().onboarded_blocks, 5u);
  first.m().remove(1);
  first.check();
}

TEST(StoreWriteThrough, AQueuedWriteKeepsItsBlocksFromReuse) {
  // 4 blocks: a's 3 full blocks and its tail fill the pool; b needs all 4.
  TempDir dir;
  const auto a = seq(100, 13);
  const auto b = seq(500, 16);
  {
    Engine e(disk_config(dir.path(), 4));
    e.chain().pause_writer(true);  // the jobs wait: the worst case of a slow writer
    EXPECT_EQ(e.add(1, a), 0u);
    e.m().commit(1, a.size());
    e.m().remove(1);
    e.check();  // the checker checks the jobs' stamps
    // a's 3 nodes are stamped with their jobs, not held: cached and queued
    // as without the tiers.
    EXPECT_EQ(e.chain().jobs_out(), 3u);
    EXPECT_EQ(e.m().stats().cached_blocks, 3u);
    EXPECT_EQ(e.chain().write_waits(), 0u);
    // b needs a's blocks: the first victim, a's leaf, is skipped (deferred:
    // its job is not finished), and with nothing else to evict the add
    // waits for the writer (which writes a's own bytes, the leaf's job
    // last), then evicts a and overwrites the blocks with b's KV.
    EXPECT_EQ(e.cache_prompt(2, b), 0u);
    EXPECT_EQ(e.m().stats().evicted_blocks, 3u);
    EXPECT_EQ(e.chain().deferrals(), 1u);
    EXPECT_EQ(e.chain().write_waits(), 1u);
    const StoreTierReport d = e.tier();
    EXPECT_EQ(d.io.stores, 3u + 4u);
    EXPECT_EQ(d.io.drops, 0u);
  }
  // Another cache loads a's records: a's bytes, not b's.
  Engine second(disk_config(dir.path(), 8));
  EXPECT_EQ(second.add(1, a), 12u);
  EXPECT_EQ(second.add(2, b), 12u);
}

// Eviction skips a block whose write job is not finished. a's 16 jobs fill
// the queue (16, the minimum) and wait (the writer paused); b's commit
// finds no room: b's blocks are not written, not stamped. a is older, but
// c's add defers a's leaf (the victim) and evicts b's 3 blocks instead,
// without waiting; a's blocks go back to the queue once the writer is done
// and reach the disk bit for bit as written.
TEST(StoreWriteThrough, EvictionSkipsABlockWhoseWriteIsNotFinished) {
  TempDir dir;
  const auto a = seq(100, 64);  // 16 full blocks
  const auto b = seq(500, 12);  // 3
  const auto c = seq(900, 32);  // 8: 5 free, 3 evicted
  {
    Engine e(disk_config(dir.path(), 24));
    e.chain().pause_writer(true);
    e.cache_prompt(1, a);
    EXPECT_EQ(e.chain().jobs_out(), 16u);
    e.cache_prompt(2, b);
    EXPECT_EQ(e.chain().jobs_out(), 16u);  // b's 3 dropped: no room
    EXPECT_EQ(e.m().stats().cached_blocks, 19u);
    EXPECT_EQ(e.cache_prompt(3, c), 0u);
    EXPECT_EQ(e.chain().deferrals(), 1u);   // a's leaf
    EXPECT_EQ(e.chain().write_waits(), 0u);
    EXPECT_EQ(e.m().stats().evicted_blocks, 3u);
    EXPECT_EQ(e.add(4, b), 0u);  // b's blocks went, a's stay
    e.m().remove(4);
    e.chain().pause_writer(false);
    const StoreTierReport d = e.tier();  // flushes: a's leaf queued again
    e.check();
    EXPECT_EQ(d.io.stores, 16u);
  }
  Engine second(disk_config(dir.path(), 24));
  EXPECT_EQ(second.add(1, a), 60u);  // the last block holds the last token: computed
  EXPECT_EQ(second.tier().onboarded_blocks, 15u);
}

// The same with the room made ahead (kvc_cache_make_room): a's leaf is
// deferred, b's 3 blocks go, nothing waits; c's add then evicts nothing.
TEST(StoreWriteThrough, RoomMadeAheadSkipsABlockWhoseWriteIsNotFinished) {
  TempDir dir;
  const auto a = seq(100, 64), b = seq(500, 12), c = seq(900, 32);
  Engine e(disk_config(dir.path(), 24));
  e.chain().pause_writer(true);
  e.cache_prompt(1, a);
  e.cache_prompt(2, b);  // b's 3 dropped from the full queue: not pending
  EXPECT_EQ(e.m().make_room(8, nullptr), 8u);
  e.check();
  EXPECT_EQ(e.chain().deferrals(), 1u);  // a's leaf
  EXPECT_EQ(e.chain().write_waits(), 0u);
  EXPECT_EQ(e.m().stats().evicted_blocks, 3u);
  EXPECT_EQ(e.cache_prompt(3, c), 0u);
  EXPECT_EQ(e.m().stats().evicted_blocks, 3u);  // c's add took free blocks
  e.chain().pause_writer(false);
  EXPECT_EQ(e.tier().io.stores, 16u);
  e.check();
}

// A writer behind eviction (paused: nothing finishes) gets a shorter queue:
// the deferral halves the admission window (write_admission.h), the next
// commit's jobs past it are dropped and counted, and a drain that finds the
// writer idle lets the window grow back.
TEST(StoreWriteThrough, AWriterBehindEvictionGetsAShorterQueue) {
  TempDir dir;
  const auto a = seq(100, 64);  // 16 full blocks
  const auto b = seq(500, 12);  // 3
  const auto c = seq(900, 32);  // 8: 5 free, 3 evicted
  Engine e(disk_config(dir.path(), 24));  // a ring of 16 jobs
  EXPECT_EQ(e.chain().admission().window(), 16u);
  e.chain().pause_writer(true);
  e.cache_prompt(1, a);  // 16 jobs out
  e.cache_prompt(2, b);  // no room: 3 dropped
  EXPECT_EQ(e.chain().admission().cuts(), 0u);
  e.cache_prompt(3, c);  // its add defers a's leaf; its commit finds no room
  EXPECT_EQ(e.chain().deferrals(), 1u);
  EXPECT_EQ(e.chain().admission().cuts(), 1u);
  EXPECT_EQ(e.chain().admission().window(), 8u);  // half the 16 jobs out
  EXPECT_EQ(e.chain().jobs_out(), 16u);
  e.chain().pause_writer(false);
  const StoreTierReport d = e.tier();  // flushes: every job finished
  e.check();
  EXPECT_EQ(d.io.stores, 16u);
  EXPECT_EQ(d.io.drops, 3u + 8u);  // b's and c's
  EXPECT_EQ(e.chain().admission().window(), 16u);  // the writer was idle: doubled
  // The window is the ring again: a new prompt's 8 blocks are all written.
  e.cache_prompt(4, seq(1300, 32));
  EXPECT_EQ(e.tier().io.stores, 24u);
}

// Copy on partial reuse off: an add that matches part of a cached block
// nobody uses takes the block over in place (the node leaves the tree) and
// writes its own rows past the match. A write job still reading that block
// (the writer paused) is waited for first: the record holds a's bytes, bit
// for bit, and no stamp outlives its node (found by the fuzz harness's disk
// configuration: "tree node 2 (write job 2) is stamped but not live").
TEST(StoreWriteThrough, APartialReuseInPlaceWaitsForTheWriteJobOfItsBlock) {
  TempDir dir;
  const auto a = seq(100, 8);  // 2 full blocks (the second a leaf)
  auto b = a;
  b.resize(7);  // a's first block, 3 tokens of its second, then b's own
  b.push_back(5000);
  {
    CacheConfig c = disk_config(dir.path(), 8);
    c.partial_reuse = true;
    c.copy_on_partial_reuse = false;
    Engine e(c);
    e.chain().pause_writer(true);
    e.cache_prompt(1, a);
    EXPECT_EQ(e.chain().jobs_out(), 2u);
    EXPECT_EQ(e.add(2, b), 7u);  // the partial block taken over: its job waited for
    EXPECT_EQ(e.chain().write_waits(), 1u);
    e.m().commit(2, b.size());
    e.check();
    e.m().remove(2);
    e.check();
    const StoreTierReport d = e.tier();
    EXPECT_EQ(d.io.stores, 2u + 1u);  // a's 2 blocks, b's second
  }
  Engine second(disk_config(dir.path(), 8));
  auto longer = a;
  longer.push_back(7000);
  EXPECT_EQ(second.add(1, longer), 8u);  // a's 2 blocks from the disk, checked bit for bit
  EXPECT_EQ(second.tier().onboarded_blocks, 2u);
}

TEST(StoreWriteThrough, OnlyBlocksAtTheOffloadPriorityAreWritten) {
  TempDir dir;
  CacheConfig c = disk_config(dir.path(), 8);
  c.secondary_offload_min_priority = 50;
  Engine e(c);
  SequenceOptions high;
  high.prompt_priority = 60;
  e.cache_prompt(1, seq(100, 9));  // 2 blocks at 35: not written
  EXPECT_EQ(e.tier().io.stores, 0u);
  e.cache_prompt(2, seq(300, 9), high);  // 2 blocks at 60
  EXPECT_EQ(e.tier().io.stores, 2u);
  e.cache_prompt(3, seq(900, 32));  // evicts both pairs: nothing more is written
  EXPECT_EQ(e.tier().io.stores, 2u);
  EXPECT_EQ(e.add(4, seq(300, 9)), 8u);
  EXPECT_EQ(e.add(5, seq(100, 9)), 0u);
}

TEST(StoreWriteThrough, AResetWaitsForTheWritesAndKeepsTheStores) {
  TempDir dir;
  const auto a = seq(100, 17);
  Engine e(disk_config(dir.path(), 8));
  e.chain().pause_writer(true);
  e.cache_prompt(1, a);
  e.m().reset_reuse();  // the queued writes hold blocks: it waits for them
  e.check();
  EXPECT_EQ(e.tier().io.stores, 4u);
  EXPECT_EQ(e.add(2, a), 16u);  // from the disk
}

TEST(StoreWriteThrough, TheStagingPathStillOffloadsAtEviction) {
  TempDir dir;
  Engine e(disk_config(dir.path(), 4));
  e.chain().set_direct_access(false);  // as a device cache: no write-through
  const auto a = seq(100, 13);
  e.cache_prompt(1, a);
  EXPECT_EQ(e.tier().io.stores, 0u);
  e.cache_prompt(2, seq(500, 16));
  EXPECT_EQ(e.tier().io.stores, 3u);
  EXPECT_EQ(e.add(3, a), 12u);
}

// A device copy that fails while offloading at eviction drops the block,
// counted in every tier's drops.
TEST(StoreWriteThrough, AFailedOffloadCopyIsACountedDrop) {
  TempDir dir;
  test::FaultPlan faults;
  std::unique_ptr<Cache> cache = test::faulty_cache(disk_config(dir.path(), 4), faults);
  BlockManager& m = cache->manager();
  m.stores()->set_direct_access(false);  // through copy_tier, as on a device
  auto cache_prompt = [&](uint64_t id, const std::vector<int32_t>& t) {
    const uint64_t cached = m.add(id, t.data(), t.size(), {}, nullptr);
    write_sequence(*cache, m.sequence(id), cached, t.size());
    m.commit(id, t.size());
    m.remove(id);
    m.check_invariants();
    return cached;
  };
  cache_prompt(1, seq(100, 13));
  faults.fail_copy(1);             // the first offload copy fails
  cache_prompt(2, seq(500, 16));   // evicts a's 3 blocks: one copy for the add's offers
  m.stores()->flush();
  StoreTierReport d = m.stores()->reports().at(0);
  EXPECT_EQ(d.io.drops, 3u);
  EXPECT_EQ(d.offered_blocks, 0u);
  EXPECT_EQ(d.io.stores, 0u);
  EXPECT_EQ(check_tree(*cache), "");
  cache_prompt(3, seq(900, 16));   // evicts b's 4 blocks, the device healthy again
  m.stores()->flush();
  d = m.stores()->reports().at(0);
  EXPECT_EQ(d.io.drops, 3u);
  EXPECT_EQ(d.offered_blocks, 4u);
  EXPECT_EQ(d.io.stores, 4u);
  EXPECT_EQ(check_tree(*cache), "");
}

// A shrink right after a commit while the writes are queued (the writer is
// paused so that they surely are): the blocks are cached, not held; the
// resize waits for the writes, then evicts the blocks past the new end. Their records reached the disk: a new cache loads them.
TEST(StoreWriteThrough, AShrinkWaitsForTheQueuedWritesInsteadOfRefusing) {
  TempDir dir;
  const auto a = seq(100, 17);  // 4 full blocks + 1 token
  const CacheConfig c = disk_config(dir.path(), 8);
  {
    Engine e(c);
    ASSERT_TRUE(e.chain().write_through());
    e.chain().pause_writer(true);
    e.cache_prompt(1, a);
    EXPECT_EQ(e.m().stats().in_use_blocks, 0u);  // the queued writes hold none
    EXPECT_EQ(e.chain().jobs_out(), 4u);
    const uint64_t set_bytes = e.cache().pool(0).block_bytes();
    e.cache().resize(set_bytes);  // one block
    e.check();
    EXPECT_EQ(e.m().stats().num_blocks, 1u);
    EXPECT_EQ(e.m().stats().in_use_blocks, 0u);
    EXPECT_EQ(e.tier().io.stores, 4u);
  }
  Engine again(c);
  EXPECT_EQ(again.add(1, a), 16u);  // loaded from the disk, checked bit for bit
}

// Decoding commits one block at a time, each while the job of the block
// before it is still queued (a paused writer): each job chains on its
// parent's job, whose key the writer's thread made. The keys it hands back
// are memoized and equal the ones the checker rebuilds from the tree
// (check_invariants), and a second cache loads every block by them, bit for
// bit.
TEST(StoreWriteThrough, BlocksCommittedOneAtATimeChainOnTheirParentsQueuedJobs) {
  TempDir dir;
  const auto a = seq(100, 25);  // 6 full blocks + 1 token; the prompt is the first block
  const CacheConfig c = disk_config(dir.path(), 16);
  {
    Engine e(c);
    ASSERT_TRUE(e.chain().write_through());
    e.chain().pause_writer(true);
    EXPECT_EQ(e.add(1, std::vector<int32_t>(a.begin(), a.begin() + 4)), 0u);
    e.m().commit(1, 4);
    for (uint64_t n = 4; n < 24; n += 4) {
      e.m().extend(1, a.data() + n, 4, nullptr);
      write_sequence(e.cache(), e.m().sequence(1), n, n + 4);
      e.m().commit(1, n + 4);
      e.check();
    }
    EXPECT_EQ(e.chain().jobs_out(), 6u);
    e.chain().pause_writer(false);
    const StoreTierReport d = e.tier();  // flushes: every key handed back
    e.check();
    EXPECT_EQ(d.io.stores, 6u);
    EXPECT_EQ(d.io.drops, 0u);
    e.m().remove(1);
    e.check();
  }
  Engine second(c);
  EXPECT_EQ(second.add(1, a), 24u);
  EXPECT_EQ(second.tier().onboarded_blocks, 6u);
}

// A full queue takes the leading jobs of a commit and drops the rest,
// counted; a later block whose parent's job was dropped gets its parent's
// key made on the serving call, and its record is right: a second cache
// loads the run up to the first dropped block.
TEST(StoreWriteThrough, AFullQueueDropsACommitsLastJobsAndLaterBlocksStillKeyRight) {
  TempDir dir;
  const auto a = seq(100, 85);  // 21 full blocks + 1 token
  const CacheConfig c = disk_config(dir.path(), 24);  // a queue of 16 jobs (the minimum)
  {
    Engine e(c);
    e.chain().pause_writer(true);
    EXPECT_EQ(e.add(1, std::vector<int32_t>(a.begin(), a.begin() + 80)), 0u);
    e.m().commit(1, 80);  // 20 blocks: 16 jobs queued, 4 dropped
    e.chain().pause_writer(false);
    e.chain().flush();
    e.m().extend(1, a.data() + 80, 4, nullptr);
    write_sequence(e.cache(), e.m().sequence(1), 80, 84);
    e.m().commit(1, 84);  // block 20 chains on block 19, whose job was dropped
    e.check();
    const StoreTierReport d = e.tier();
    EXPECT_EQ(d.offered_blocks, 17u);
    EXPECT_EQ(d.io.stores, 17u);
    EXPECT_EQ(d.io.drops, 4u);  // the 4 jobs the ring had no room for, never built
    e.m().remove(1);
    e.check();
  }
  Engine second(c);
  EXPECT_EQ(second.add(1, a), 64u);  // blocks 0-15; block 16's record was never written
  EXPECT_EQ(second.tier().onboarded_blocks, 16u);
}

}  // namespace
}  // namespace kvc
