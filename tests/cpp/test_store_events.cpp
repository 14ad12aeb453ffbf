// KV events of the block stores (events.h, tiers.h): a router's index fed
// only by drained events (EventShadow) equals kvc's snapshot after every
// step of a scripted run on the CPU backend with a disk tier (write-through,
// disk eviction under a small budget, a reset, a load back from the disk, a
// reopen, a reopen with a smaller budget) and with a remote tier (the
// client's own budget deletions). Store changes reach the stream at the next
// add, commit or flush: the steps flush (no sleeps).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <memory>
#include <set>
#include <vector>

#include "core/cache.h"
#include "store/disk_store.h"
#include "event_shadow.h"
#include "kv_content.h"
#include "manager_fixture.h"
#include "redis_fixture.h"
#include "store_fixture.h"

namespace kvc {
namespace {

using test::check_sequence;
using test::EventShadow;
using test::seq;
using test::write_sequence;
using testing_store::TempDir;

CacheConfig base_config(uint64_t primary_blocks) {
  CacheConfig c;
  c.num_layers = 2;
  c.kv_heads = {2};
  c.head_dim = 4;
  c.dtype = KVC_DTYPE_F32;
  c.tokens_per_block = 4;
  c.max_tokens = primary_blocks * 4;
  c.partial_reuse = false;
  c.event_buffer_size = 4096;
  return c;
}

uint64_t record_bytes(const CacheConfig& c) {
  return store_record_layout(c, group_layers(c)).record_bytes();
}

CacheConfig disk_config(const std::string& dir, uint64_t primary_blocks, uint64_t records) {
  CacheConfig c = base_config(primary_blocks);
  c.stores.disk_dir = dir;
  c.stores.disk_bytes = records * record_bytes(c);
  return c;
}

class Engine {
 public:
  explicit Engine(const CacheConfig& c) : cache_(std::make_unique<Cache>(c)) {}
  BlockManager& m() { return cache_->manager(); }
  StoreChain& chain() { return *m().stores(); }
  // Flushes the stores (their changes become events), drains the events
  // into the shadow and compares it with the snapshot.
  void step(const char* what) {
    chain().flush();
    m().check_invariants();
    ASSERT_EQ(shadow.drain(m()), "") << what;
    ASSERT_EQ(shadow.compare(m()), "") << what;
  }
  uint64_t cache_prompt(uint64_t id, const std::vector<int32_t>& t) {
    const uint64_t cached = m().add(id, t.data(), t.size(), SequenceOptions{}, nullptr);
    const Sequence& s = m().sequence(id);
    EXPECT_EQ(check_sequence(*cache_, s, 0, cached), "");
    write_sequence(*cache_, s, cached, s.length());
    m().commit(id, t.size());
    m().remove(id);
    return cached;
  }
  uint64_t store_blocks() { return chain().reports().at(0).io.blocks; }
  EventShadow shadow;

 private:
  std::unique_ptr<Cache> cache_;
};

TEST(StoreEvents, AnIndexOfDiskEventsEqualsTheSnapshotAtEveryStep) {
  TempDir dir;
  const auto a = seq(100, 17), b = seq(900, 17), c = seq(500, 13);  // 4, 4, 3 full blocks
  std::set<uint64_t> b_hashes;
  {
    Engine e(disk_config(dir.path(), 8, 6));
    ASSERT_TRUE(e.chain().write_through());
    e.step("created on an empty directory");
    EXPECT_EQ(e.shadow.count(KVC_TIER_DISK), 0u);

    // Written through at commit: STORED(DISK) beside the tree's STORED, under
    // the same portable hashes.
    EXPECT_EQ(e.cache_prompt(1, a), 0u);
    e.step("a committed");
    EXPECT_EQ(e.shadow.count(KVC_TIER_DISK), 4u);
    EXPECT_EQ(e.shadow.hashes(KVC_TIER_DISK), e.shadow.hashes(0));

    // Two more than the budget: the disk evicts a's two oldest (REMOVED(DISK)).
    const uint64_t before = e.shadow.kinds[KVC_EVENT_REMOVED];
    EXPECT_EQ(e.cache_prompt(2, b), 0u);
    e.step("b committed, the disk full");
    EXPECT_EQ(e.shadow.count(KVC_TIER_DISK), 6u);
    EXPECT_EQ(e.store_blocks(), 6u);
    EXPECT_GE(e.shadow.kinds[KVC_EVENT_REMOVED] - before, 2u);

    // A reset clears the tree's entries (CLEARED); the disk keeps its own.
    e.m().reset_reuse();
    e.step("reset");
    EXPECT_EQ(e.shadow.count(0), 0u);
    EXPECT_EQ(e.shadow.count(KVC_TIER_DISK), 6u);
    b_hashes = e.shadow.hashes(KVC_TIER_DISK);

    // b back from the disk: STORED(PRIMARY) for the tree, the disk unchanged.
    EXPECT_EQ(e.cache_prompt(3, b), 16u);
    e.step("b loaded from the disk");
    EXPECT_EQ(e.shadow.count(0), 4u);
    EXPECT_EQ(e.shadow.hashes(KVC_TIER_DISK), b_hashes);

    // c evicts more of the disk (and of the tree, whose 8 blocks b and c share).
    e.cache_prompt(4, c);
    e.step("c committed");
    EXPECT_EQ(e.shadow.count(KVC_TIER_DISK), 6u);
    b_hashes = e.shadow.hashes(KVC_TIER_DISK);
  }
  {
    // A reopen: the new cache's first events name what the disk holds.
    Engine e(disk_config(dir.path(), 8, 6));
    e.step("reopened");
    EXPECT_EQ(e.shadow.count(0), 0u);
    EXPECT_EQ(e.shadow.hashes(KVC_TIER_DISK), b_hashes);
    EXPECT_EQ(e.shadow.kinds[KVC_EVENT_STORED], 6u);
  }
  {
    // A smaller budget: the records evicted at open are never announced.
    Engine e(disk_config(dir.path(), 8, 3));
    e.step("reopened smaller");
    EXPECT_EQ(e.shadow.count(KVC_TIER_DISK), 3u);
    EXPECT_EQ(e.shadow.kinds[KVC_EVENT_REMOVED], 0u);
    EXPECT_EQ(e.store_blocks(), 3u);
  }
}

TEST(StoreEvents, OffloadAtEvictionNamesTheDiskOnceWritten) {
  TempDir dir;
  Engine e(disk_config(dir.path(), 6, 16));
  e.chain().set_write_through(false);  // as a device cache does
  e.cache_prompt(1, seq(100, 17));
  e.step("a committed: nothing on the disk yet");
  EXPECT_EQ(e.shadow.count(KVC_TIER_DISK), 0u);
  e.cache_prompt(2, seq(900, 17));  // evicts a's blocks into the disk
  e.step("a evicted to the disk");
  EXPECT_GE(e.shadow.count(KVC_TIER_DISK), 1u);
  EXPECT_EQ(e.shadow.count(KVC_TIER_DISK), e.store_blocks());
  for (uint64_t h : e.shadow.hashes(KVC_TIER_DISK)) EXPECT_EQ(e.shadow.hashes(0).count(h), 0u);
}

void flip_byte(const std::string& path, off_t at) {
  const int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  unsigned char byte = 0;
  ASSERT_EQ(::pread(fd, &byte, 1, at), 1);
  byte ^= 0x5a;
  ASSERT_EQ(::pwrite(fd, &byte, 1, at), 1);
  ::close(fd);
}

TEST(StoreEvents, ARejectedRecordLeavesTheDisk) {
  TempDir dir;
  const auto a = seq(100, 17);
  {
    Engine e(disk_config(dir.path(), 8, 8));
    e.cache_prompt(1, a);
    e.step("a written");
  }
  // Corrupt a's second block on the disk: the next cache announces it (the
  // frame is sound), and a load that rejects it removes it.
  {
    Engine e(disk_config(dir.path(), 8, 8));
    e.step("reopened");
    ASSERT_EQ(e.shadow.count(KVC_TIER_DISK), 4u);
    DiskStore& disk = static_cast<DiskStore&>(e.chain().store(0));
    const std::set<uint64_t> held = e.shadow.hashes(KVC_TIER_DISK);
    const std::vector<uint64_t> hashes(held.begin(), held.end());
    // Any of a's records: the load reaches it (the ones before are sound).
    DiskStore::Place place;
    ASSERT_TRUE(disk.place_of(hashes[0], &place));
    flip_byte(place.path, off_t(place.offset + e.chain().layout().header_bytes() + 1));
    EXPECT_LT(e.cache_prompt(2, a), 16u);
    // Rejected (REMOVED(DISK)), then written again by the commit that
    // recomputed it (STORED(DISK)).
    e.step("a loaded up to the corrupted record, the rest recomputed");
    EXPECT_EQ(e.shadow.kinds[KVC_EVENT_REMOVED], 1u);
    EXPECT_EQ(e.shadow.count(KVC_TIER_DISK), 4u);
    EXPECT_EQ(e.store_blocks(), 4u);
  }
}

class StoreEventsRedis : public RedisTest {};

TEST_F(StoreEventsRedis, TheRemoteTierNamesThisCachesOwnWrites) {
  CacheConfig c = base_config(8);
  c.stores.remote_url = server().url();
  c.stores.remote_namespace = "store-events";
  c.stores.remote_bytes = 5 * record_bytes(c);  // this cache keeps at most 5 records
  c.stores.remote_connect_timeout_ms = 2000;
  c.stores.remote_command_timeout_ms = 2000;
  Engine e(c);
  e.step("created: the remote tier names nothing");
  EXPECT_EQ(e.shadow.count(KVC_TIER_REMOTE), 0u);
  e.cache_prompt(1, seq(100, 17));
  e.step("a written");
  EXPECT_EQ(e.shadow.count(KVC_TIER_REMOTE), 4u);
  EXPECT_EQ(e.shadow.hashes(KVC_TIER_REMOTE), e.shadow.hashes(0));
  e.cache_prompt(2, seq(900, 17));
  e.step("b written: the client's budget deletes three");
  EXPECT_EQ(e.shadow.count(KVC_TIER_REMOTE), 5u);
  EXPECT_EQ(e.store_blocks(), 5u);
  // A second engine on the server announces nothing of the first's records.
  Engine other(c);
  other.step("a second engine");
  EXPECT_EQ(other.shadow.count(KVC_TIER_REMOTE), 0u);
}

}  // namespace
}  // namespace kvc
