// The block stores below the tree (store_chain.h) with the disk store: exact
// placement for scripted runs, offload then onboard with the KV checked bit
// for bit, a restart that keeps the prefix cache, torn and flipped files and
// other scopes as misses, and the rules (priority, reset, partial match).
// Every step runs the invariant checker; flush() replaces any waiting.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <future>
#include <memory>
#include <random>
#include <vector>

#include "core/cache.h"
#include "kv_content.h"
#include "manager_fixture.h"
#include "store/disk_store.h"
#include "store_fixture.h"

namespace kvc {
namespace {

using test::check_sequence;
using test::check_tree;
using test::seq;
using test::write_sequence;
using testing_store::TempDir;

constexpr uint64_t kSetBytes = 512;  // 2 layers x K,V x 4 tokens x 2 heads x 4 dims x f32

CacheConfig store_config(const std::string& dir, uint64_t primary_blocks, uint64_t host_blocks = 0,
                         uint64_t disk_records = 64) {
  CacheConfig c;
  c.num_layers = 2;
  c.kv_heads = {2};
  c.head_dim = 4;
  c.dtype = KVC_DTYPE_F32;
  c.tokens_per_block = 4;
  c.max_tokens = primary_blocks * 4;
  c.host_cache_bytes = host_blocks * kSetBytes;
  c.partial_reuse = false;  // only full blocks are published: exact counts
  c.stores.disk_dir = dir;
  const RecordLayout l = store_record_layout(c, group_layers(c));
  c.stores.disk_bytes = disk_records * l.record_bytes();
  return c;
}

class StoreChainTest : public ::testing::Test {
 protected:
  // The scripted placements below are the eviction offload's (a device
  // cache's); write-through at commit has its own tests
  // (test_store_write_through.cpp) and randomized runs here.
  void make(const CacheConfig& c, bool write_through = false) {
    cache_.reset();
    cache_ = std::make_unique<Cache>(c);
    m().stores()->set_write_through(write_through);
  }
  BlockManager& m() { return cache_->manager(); }
  StoreChain& chain() { return *m().stores(); }
  StoreTierReport disk() {
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
  // Adds, commits and removes: the prompt's full blocks end up cached.
  uint64_t cache_prompt(uint64_t id, const std::vector<int32_t>& t, SequenceOptions o = {}) {
    const uint64_t cached = add(id, t, o);
    m().commit(id, t.size());
    check();
    m().remove(id);
    check();
    return cached;
  }

  TempDir dir_;
  std::unique_ptr<Cache> cache_;
};

TEST_F(StoreChainTest, EvictedBlocksGoToDiskAndComeBackBitForBit) {
  make(store_config(dir_.path(), 4));
  const auto a = seq(100, 13);  // 3 full blocks + 1 token
  const auto b = seq(500, 16);  // 4 blocks: evicts every block of a
  EXPECT_EQ(cache_prompt(1, a), 0u);
  EXPECT_EQ(m().stats().tree_nodes, 3u);
  EXPECT_EQ(disk().io.stores, 0u);
  EXPECT_EQ(cache_prompt(2, b), 0u);
  StoreTierReport d = disk();
  EXPECT_EQ(d.offered_blocks, 3u);  // a's three nodes, leaves first
  EXPECT_EQ(d.io.stores, 3u);
  EXPECT_EQ(d.io.blocks, 3u);
  EXPECT_EQ(m().stats().evicted_blocks, 3u);
  // b's 4 blocks hold the pool; a comes back from the disk: its 3 full
  // blocks (the last token is computed) and its last block take 4 fresh
  // blocks, which evict b's 4, which go to the disk too.
  EXPECT_EQ(add(3, a), 12u);
  d = disk();
  EXPECT_EQ(d.onboarded_blocks, 3u);
  EXPECT_EQ(d.io.hits, 3u);
  EXPECT_EQ(d.io.rejected, 0u);
  EXPECT_EQ(d.io.stores, 7u);
  const Sequence& s = m().sequence(3);
  EXPECT_EQ(s.cached, 12u);
  EXPECT_EQ(s.published, 3u);  // published as a commit would
  EXPECT_EQ(m().stats().reused_blocks, 3u);
  m().commit(3, a.size());
  m().remove(3);
  check();
  // Now in the tree: reused from primary memory, not from the disk.
  EXPECT_EQ(add(4, a), 12u);
  EXPECT_EQ(disk().onboarded_blocks, 3u);
}

TEST_F(StoreChainTest, ABlockLoadedFromTheDiskIsNotWrittenBackWhenEvicted) {
  make(store_config(dir_.path(), 4));
  const auto a = seq(100, 13);  // 3 full blocks + 1 token
  const auto b = seq(500, 16);  // 4 blocks: evicts every block of a
  cache_prompt(1, a);
  cache_prompt(2, b);  // a's 3 nodes to the disk
  EXPECT_EQ(disk().offered_blocks, 3u);
  EXPECT_EQ(cache_prompt(3, a), 12u);  // loaded; evicts b's 4 to the disk
  EXPECT_EQ(disk().offered_blocks, 7u);
  // b's first 3 blocks come back from the disk (its last one is computed)
  // and evict a's 3 loaded nodes: the disk holds them, nothing is written.
  EXPECT_EQ(cache_prompt(4, b), 12u);
  StoreTierReport d = disk();
  EXPECT_EQ(d.offered_blocks, 7u);
  EXPECT_EQ(d.io.stores, 7u);
  EXPECT_EQ(m().stats().evicted_blocks, 10u);
  // a still comes back bit for bit; b's loaded nodes leave unwritten, its
  // computed fourth block is written.
  EXPECT_EQ(add(5, a), 12u);
  d = disk();
  EXPECT_EQ(d.offered_blocks, 8u);
  EXPECT_EQ(d.io.stores, 8u);
  EXPECT_EQ(d.onboarded_blocks, 9u);
}

// A device cache's offers are sealed and put by the offer worker after the
// call returns (StoreChain::put_slot): with the worker held, the add that
// evicted them has put nothing. Once it runs, the records hold the bytes
// the blocks had when they were evicted (the call copied them into a
// slot's staging), although the same add's sequence wrote into those
// blocks since.
TEST_F(StoreChainTest, OffersAreSealedAndPutAfterTheCallReturns) {
  make(store_config(dir_.path(), 4));
  chain().set_direct_access(false);  // through copy_tier, as on a device
  const auto a = seq(100, 13);  // 3 full blocks + 1 token
  const auto b = seq(500, 16);  // 4 blocks: a's 3 and a free one
  cache_prompt(1, a);
  std::promise<void> go;
  std::shared_future<void> held = go.get_future().share();
  chain().offer_worker().post([held] { held.wait(); });
  cache_prompt(2, b);  // a's 3 nodes offered; b's KV written into their blocks
  EXPECT_EQ(chain().reports().at(0).offered_blocks, 0u);
  EXPECT_EQ(chain().reports().at(0).io.stores, 0u);
  EXPECT_EQ(chain().reports().at(0).io.queued, 3u);  // waiting in a slot: queued_blocks
  go.set_value();
  EXPECT_EQ(disk().offered_blocks, 3u);
  EXPECT_EQ(disk().io.queued, 0u);
  EXPECT_EQ(cache_prompt(3, a), 12u);  // a's 3 from the disk, bit for bit
  EXPECT_EQ(disk().onboarded_blocks, 3u);
}

// A call that finds every offer slot still out since earlier calls (the
// offer worker behind) drops its offers, counted, instead of waiting for
// the worker: a tier that falls behind never paces the serving calls (a
// wait would hang here, the worker held). The slots the earlier calls
// filled are sealed and put as usual.
TEST_F(StoreChainTest, ACallFindingEverySlotOutSinceEarlierCallsDropsItsOffers) {
  make(store_config(dir_.path(), 4));
  chain().set_direct_access(false);  // through copy_tier, as on a device
  cache_prompt(1, seq(100, 13));     // 3 full blocks cached
  std::promise<void> go;
  std::shared_future<void> held = go.get_future().share();
  chain().offer_worker().post([held] { held.wait(); });
  // Each prompt evicts the last one's 3 blocks: one slot a call.
  for (uint64_t i = 0; i < 4; ++i) cache_prompt(2 + i, seq(1000 * (i + 1), 13));
  EXPECT_EQ(chain().reports().at(0).io.queued, 12u);  // 4 slots out, 3 blocks each
  for (uint64_t i = 4; i < 6; ++i) cache_prompt(2 + i, seq(1000 * (i + 1), 13));
  EXPECT_EQ(chain().offer_waits(), 0u);  // returned, the worker still held
  go.set_value();
  const StoreTierReport d = disk();
  EXPECT_EQ(d.offered_blocks, 12u);
  EXPECT_EQ(d.io.drops, 6u);  // the last two calls' 3 each
  EXPECT_EQ(cache_prompt(10, seq(1000, 13)), 12u);  // blocks a slot took, bit for bit
  EXPECT_EQ(cache_prompt(11, seq(5000, 13)), 0u);   // blocks dropped: a miss
}

// A device cache's commits are keyed by the record writer (keys only, off
// the serving call), so the offers of their eviction hash nothing on the
// serving thread: the records go out under the writer's keys and load back
// under the keys the add makes from its own tokens, bit for bit.
TEST_F(StoreChainTest, OffersAtEvictionTakeTheKeysTheWriterMadeAtCommit) {
  make(store_config(dir_.path(), 4));
  chain().set_direct_access(false);  // through copy_tier, as on a device
  ASSERT_TRUE(chain().keys_at_commit());
  ASSERT_TRUE(chain().offers_at_eviction());
  const auto a = seq(100, 13);  // 3 full blocks + 1 token
  const auto b = seq(500, 16);  // 4 blocks: evicts a's 3
  cache_prompt(1, a);
  chain().flush();  // a's key jobs finished
  EXPECT_EQ(disk().io.stores, 0u);  // keys only: no record written at commit
  EXPECT_EQ(disk().io.drops, 0u);
  const uint64_t made = chain().keys().node_keys_made();
  cache_prompt(2, b);  // a's 3 nodes offered
  EXPECT_EQ(chain().keys().node_keys_made(), made);
  StoreTierReport d = disk();
  EXPECT_EQ(d.offered_blocks, 3u);
  EXPECT_EQ(d.io.stores, 3u);
  EXPECT_EQ(cache_prompt(3, a), 12u);  // a's 3 from the disk, bit for bit
  d = disk();
  EXPECT_EQ(d.onboarded_blocks, 3u);
  EXPECT_EQ(d.io.rejected, 0u);
}

// A victim whose key job is not finished (the writer paused at its commit)
// is deferred, as a write job's is, and its offer then takes the key the
// job made: the records load back bit for bit.
TEST_F(StoreChainTest, AVictimWhoseKeyJobIsOutIsDeferredUntilItIsKeyed) {
  make(store_config(dir_.path(), 4));
  chain().set_direct_access(false);
  const auto a = seq(100, 13);
  const auto b = seq(500, 16);
  chain().pause_writer(true);
  cache_prompt(1, a);  // a's 3 key jobs out, not taken
  EXPECT_EQ(chain().jobs_out(), 3u);
  const uint64_t made = chain().keys().node_keys_made();
  cache_prompt(2, b);  // evicts a's 3: the leaf is deferred, then its job waited for
  EXPECT_EQ(chain().deferrals(), 1u);
  EXPECT_EQ(chain().keys().node_keys_made(), made);
  EXPECT_EQ(disk().offered_blocks, 3u);
  EXPECT_EQ(cache_prompt(3, a), 12u);  // bit for bit
  EXPECT_EQ(disk().onboarded_blocks, 3u);
}

// A call whose offers fill every staging slot waits for the oldest slot's
// task and goes on: every offer reaches the disk (none dropped).
TEST_F(StoreChainTest, OffersPastTheSlotsInFlightWaitForTheOldest) {
  make(store_config(dir_.path(), 8));
  chain().set_direct_access(false);  // through copy_tier, as on a device
  chain().set_offer_chunk(1);        // one offer a slot
  const auto a = seq(100, 24);       // 6 cached blocks
  cache_prompt(1, a);
  cache_prompt(2, seq(500, 32));  // evicts the 6: 4 slots out, then waits
  const StoreTierReport d = disk();
  EXPECT_EQ(d.offered_blocks, 6u);
  EXPECT_EQ(d.io.stores, 6u);
  EXPECT_EQ(d.io.drops, 0u);
  EXPECT_EQ(cache_prompt(3, a), 20u);  // a's 5 from the disk, bit for bit
}

// A device cache defers an add's offers and copies them out in one batch
// (StoreChain::flush_offers): before the add writes into the blocks they
// left (here: the records it loads), never after.
class DeferredOffers : public StoreChainTest, public ::testing::WithParamInterface<uint64_t> {};

TEST_P(DeferredOffers, AreCopiedOutBeforeTheirBlocksAreWritten) {
  make(store_config(dir_.path(), 4));
  chain().set_direct_access(false);  // through copy_tier, as on a device
  chain().set_offer_chunk(GetParam());
  const auto a = seq(100, 13);  // 3 full blocks + 1 token
  const auto b = seq(500, 16);  // 4 blocks
  cache_prompt(1, a);
  cache_prompt(2, b);  // a's 3 nodes offered, copied out at the add's end
  EXPECT_EQ(disk().offered_blocks, 3u);
  // a's 3 blocks load into the 4 blocks b's nodes leave: b's records are
  // copied out before the loads overwrite them.
  EXPECT_EQ(cache_prompt(3, a), 12u);
  EXPECT_EQ(disk().offered_blocks, 7u);
  EXPECT_EQ(cache_prompt(4, b), 12u);  // b's 3 from the disk, bit for bit
  EXPECT_EQ(cache_prompt(5, a), 12u);
  const StoreTierReport d = disk();
  EXPECT_EQ(d.onboarded_blocks, 9u);
  EXPECT_EQ(d.io.rejected, 0u);
}

// A copy on partial reuse writes into a block an offer of the same add just
// left: the offer is copied out first.
TEST_P(DeferredOffers, ACopyOnPartialReuseWaitsForThem) {
  CacheConfig c = store_config(dir_.path(), 4);
  c.partial_reuse = true;
  make(c);
  chain().set_direct_access(false);  // through copy_tier, as on a device
  chain().set_offer_chunk(GetParam());
  const auto p = seq(100, 12);  // 3 full blocks
  const auto a = seq(500, 4);   // 1 block: the pool is full of cached blocks
  cache_prompt(1, p);
  cache_prompt(2, a);
  // b matches 2 tokens of a's block: its first new block gets those rows
  // copied in, and it is p's leaf's (the oldest victim, offered).
  std::vector<int32_t> b = {a[0], a[1]};
  for (int32_t t = 900; t < 906; ++t) b.push_back(t);
  EXPECT_EQ(cache_prompt(3, b), 2u);
  EXPECT_EQ(disk().offered_blocks, 2u);  // p's last two blocks
  // p and one more block: p's blocks 1 and 2 from the disk, bit for bit.
  std::vector<int32_t> d = p;
  for (int32_t t = 700; t < 704; ++t) d.push_back(t);
  EXPECT_EQ(add(4, d), 12u);
  EXPECT_EQ(disk().onboarded_blocks, 2u);
}

// 1024: an add's offers in one batch; 2: copied out two at a time as well.
INSTANTIATE_TEST_SUITE_P(Chunks, DeferredOffers, ::testing::Values(uint64_t(1024), uint64_t(2)));

TEST_F(StoreChainTest, RestartOnTheSameDirectoryKeepsThePrefixCache) {
  const auto a = seq(100, 17);  // 4 full blocks + 1
  {
    make(store_config(dir_.path(), 8));
    cache_prompt(1, a);
    cache_prompt(2, seq(900, 32));  // evicts a's 4 blocks to disk
    EXPECT_EQ(disk().io.blocks, 4u);
    cache_.reset();  // the destructor drains the queue
  }
  make(store_config(dir_.path(), 8));
  EXPECT_EQ(disk().io.blocks, 4u);  // the index rebuilt from the files
  EXPECT_EQ(add(1, a), 16u);
  EXPECT_EQ(disk().onboarded_blocks, 4u);
}

TEST_F(StoreChainTest, AnotherGeometryOrSeedNeverLoads) {
  const auto a = seq(100, 17);
  make(store_config(dir_.path(), 8));
  cache_prompt(1, a);
  cache_prompt(2, seq(900, 32));
  cache_.reset();
  CacheConfig other = store_config(dir_.path(), 8);
  other.head_dim = 8;  // another geometry: another fingerprint, other files
  other.stores.disk_bytes = 64 * store_record_layout(other, group_layers(other)).record_bytes();
  make(other);
  EXPECT_EQ(disk().io.blocks, 0u);
  EXPECT_EQ(add(1, a), 0u);
  cache_.reset();
  CacheConfig seeded = store_config(dir_.path(), 8);
  seeded.event_hash_seed = 7;  // the records' addresses differ
  make(seeded);
  EXPECT_EQ(disk().io.blocks, 4u);
  EXPECT_EQ(add(1, a), 0u);
}

void flip_byte(const std::string& path, off_t at) {
  const int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  unsigned char c = 0;
  ASSERT_EQ(::pread(fd, &c, 1, at), 1);
  c ^= 1;
  ASSERT_EQ(::pwrite(fd, &c, 1, at), 1);
  ::close(fd);
}

TEST_F(StoreChainTest, FlippedOrTornRecordsAreMissesCounted) {
  const auto a = seq(100, 17);
  make(store_config(dir_.path(), 8));
  cache_prompt(1, a);
  cache_prompt(2, seq(900, 32));
  chain().flush();
  // The keys of a's blocks as a lookup makes them.
  std::vector<StoreKey> keys(4);
  const std::string scope = encode_scope(false, "", false, 0);
  chain().keys().prompt_keys(StoreKey{}, scope, {}, a.data(), 0, 4, keys.data());
  auto& store = static_cast<DiskStore&>(chain().store(0));
  const RecordLayout& l = chain().layout();
  DiskStore::Place p2, p3;
  ASSERT_TRUE(store.place_of(keys[2].hash, &p2));
  ASSERT_TRUE(store.place_of(keys[3].hash, &p3));
  flip_byte(p2.path, static_cast<off_t>(p2.offset + l.header_bytes() + 7));
  // Block 3 torn: its slot's second half never reached the disk.
  const std::vector<unsigned char> zeros(l.record_bytes() / 2);
  const int fd = ::open(p3.path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pwrite(fd, zeros.data(), zeros.size(), off_t(p3.offset + l.record_bytes() - zeros.size())),
            ssize_t(zeros.size()));
  ::close(fd);
  // The store hands out all four; block 2 fails its checksum (rejected,
  // forgotten) and ends the run: blocks 0 and 1 load.
  EXPECT_EQ(add(3, a), 8u);
  StoreTierReport d = disk();
  EXPECT_EQ(d.onboarded_blocks, 2u);
  EXPECT_EQ(d.io.hits, 4u);
  EXPECT_EQ(d.io.rejected, 1u);
  EXPECT_EQ(d.io.errors, 0u);
  // a's blocks 0, 1 and the torn 3 (not reached yet), and the 5 of b's 8
  // evicted for a's 5 new blocks.
  EXPECT_EQ(d.io.blocks, 8u);
  EXPECT_FALSE(store.place_of(keys[2].hash, &p2));
  // Block 3 is found by the next lookup that reaches it and fails its
  // checksum there.
  DiskStore::Place again;
  if (store.place_of(keys[3].hash, &again)) {
    std::vector<unsigned char> rec(l.record_bytes());
    unsigned char* out = rec.data();
    ASSERT_EQ(store.load(&keys[3].hash, 1, &out), 1u);
    EXPECT_EQ(check_record_frame(l, rec.data(), rec.size()), RecordCheck::kChecksum);
  }
}

TEST_F(StoreChainTest, SaltedAndLoraScopesNeverMeet) {
  const auto a = seq(100, 17);
  make(store_config(dir_.path(), 8));
  SequenceOptions salt_x, salt_y, lora;
  salt_x.has_salt = true;
  salt_x.salt = "x";
  salt_y.has_salt = true;
  salt_y.salt = "y";
  lora.has_lora = true;
  lora.lora_id = 3;
  cache_prompt(1, a, salt_x);
  cache_prompt(2, seq(900, 32));  // a (salt x) to the disk
  EXPECT_EQ(disk().io.blocks, 4u);
  EXPECT_EQ(cache_prompt(3, a, salt_y), 0u);
  EXPECT_EQ(cache_prompt(4, a), 0u);
  EXPECT_EQ(cache_prompt(5, a, lora), 0u);
  cache_prompt(6, seq(900, 32));  // the others out of primary memory
  EXPECT_EQ(add(7, a, salt_x), 16u);
  const StoreTierReport d = disk();
  EXPECT_EQ(d.io.rejected, 0u);  // other scopes miss by address, never by check
}

TEST_F(StoreChainTest, ExtraKeysArePartOfTheKey) {
  const auto a = seq(100, 17);
  make(store_config(dir_.path(), 8));
  SequenceOptions img, other;
  img.extra_keys.push_back(ExtraKey{4, 4, "image-1"});
  other.extra_keys.push_back(ExtraKey{4, 4, "image-2"});
  cache_prompt(1, a, img);
  cache_prompt(2, seq(900, 32));
  EXPECT_EQ(add(3, a, other), 4u);  // block 0 has no extra key: shared
  m().remove(3);
  cache_prompt(4, seq(900, 32));
  EXPECT_EQ(add(5, a, img), 16u);
}

TEST_F(StoreChainTest, BelowTheOffloadPriorityNothingIsStored) {
  CacheConfig c = store_config(dir_.path(), 4);
  c.secondary_offload_min_priority = 50;
  make(c);
  SequenceOptions high;
  high.prompt_priority = 60;
  cache_prompt(1, seq(100, 9));        // 2 blocks at 35: dropped
  cache_prompt(2, seq(200, 16));       // evicts them
  EXPECT_EQ(disk().io.stores, 0u);
  cache_prompt(3, seq(300, 9), high);  // 2 blocks at 60
  cache_prompt(4, seq(400, 16));       // evicts b's 2 remaining and c's... (lowest first)
  EXPECT_EQ(disk().io.stores, 2u);
  EXPECT_EQ(add(5, seq(300, 9)), 8u);
}

TEST_F(StoreChainTest, ResetStoresNothingAndLookupsStillWork) {
  const auto a = seq(100, 17);
  make(store_config(dir_.path(), 8));
  cache_prompt(1, a);
  m().reset_reuse();
  check();
  EXPECT_EQ(disk().io.stores, 0u);
  cache_prompt(2, a);
  cache_prompt(3, seq(900, 32));
  EXPECT_EQ(disk().io.stores, 4u);
  m().reset_reuse();
  EXPECT_EQ(add(4, a), 16u);  // a reset empties the tree, not the stores
}

TEST_F(StoreChainTest, AFullBlockFromTheDiskBeatsAPartialMatch) {
  CacheConfig c = store_config(dir_.path(), 8);
  c.partial_reuse = true;
  make(c);
  const auto a = seq(100, 17);
  cache_prompt(1, a);
  cache_prompt(2, seq(900, 32));  // a to the disk
  // A prompt sharing a's first block and 2 tokens of its second, published
  // with its partial tail: a's second block matches it token by token.
  auto p = seq(100, 6);
  cache_prompt(3, p);                      // block 0 from the disk, 2 tokens computed
  EXPECT_EQ(disk().onboarded_blocks, 1u);
  EXPECT_EQ(add(4, a), 16u);               // block 0 from the tree, 1..3 from the disk
  EXPECT_EQ(disk().onboarded_blocks, 4u);
}

TEST_F(StoreChainTest, HostTierThenDiskScriptedPlacement) {
  // 4 primary blocks, 3 host sets: primary -> host -> disk.
  make(store_config(dir_.path(), 4, 3));
  const auto a = seq(100, 13);  // 3 full blocks
  const auto b = seq(500, 16);  // 4 full blocks
  cache_prompt(1, a);
  cache_prompt(2, b);  // a's 3 nodes move to the host tier; nothing to the disk
  CacheStats st = m().stats();
  EXPECT_EQ(st.host.offloaded_blocks, 3u);
  EXPECT_EQ(st.host_cached_blocks, 3u);
  EXPECT_EQ(disk().io.stores, 0u);
  // A third prompt evicts b's 4 nodes, leaf first: b3, b2, b1 are offloaded,
  // each making room by evicting the host's oldest leaf (a2, a1, a0), which
  // go to the disk; b0 finds no host victim (the host holds only nodes of
  // this call) and is dropped with its host children b1..b3: to the disk too.
  cache_prompt(3, seq(700, 16));
  st = m().stats();
  EXPECT_EQ(st.host.offloaded_blocks, 6u);
  EXPECT_EQ(st.host_cached_blocks, 0u);
  StoreTierReport d = disk();
  EXPECT_EQ(d.io.stores, 7u);
  EXPECT_EQ(d.io.blocks, 7u);
  // Both come back from the disk bit for bit.
  EXPECT_EQ(add(4, a), 12u);
  m().commit(4, a.size());
  m().remove(4);
  EXPECT_EQ(add(5, b), 12u);  // the last block holds the last token: computed
  EXPECT_EQ(disk().onboarded_blocks, 6u);
}

// Write-through with a host tier: a node whose write job is not finished
// (the writer paused) is cached and may be moved to the host tier like any
// other; the move frees its primary blocks, so it waits for the job first
// (StoreChain::leaving), and the record holds the node's own bytes, bit for
// bit, not those of the blocks' next owner.
TEST_F(StoreChainTest, AHostOffloadWaitsForTheWriteJobOfItsBlocks) {
  const auto a = seq(100, 13);  // 3 full blocks
  const auto b = seq(500, 16);  // 4 full blocks
  {
    make(store_config(dir_.path(), 4, 3), /*write_through=*/true);
    ASSERT_TRUE(chain().write_through());
    chain().pause_writer(true);
    cache_prompt(1, a);
    EXPECT_EQ(chain().jobs_out(), 3u);
    EXPECT_EQ(m().stats().cached_blocks, 3u);  // stamped, not held
    cache_prompt(2, b);  // a's 3 nodes move to the host tier: the first waits
    EXPECT_EQ(chain().write_waits(), 1u);
    EXPECT_EQ(m().stats().host.offloaded_blocks, 3u);
    EXPECT_EQ(disk().io.stores, 3u + 4u);
    EXPECT_EQ(disk().io.drops, 0u);
  }
  make(store_config(dir_.path(), 8));  // a fresh cache: both from the disk
  EXPECT_EQ(add(1, a), 12u);
  EXPECT_EQ(add(2, b), 12u);
  EXPECT_EQ(disk().onboarded_blocks, 6u);
}

// Random prompts over a few shared prefixes, small pools, a host tier and a
// small disk, offload at eviction and write-through: every reused byte checked, invariants after every step, and
// whatever the disk answers is either checked KV or a miss.
TEST_F(StoreChainTest, RandomizedRunsKeepEveryByte) {
  // With and without a host tier; bytes copied directly between records and
  // the CPU pools, and through the staging blocks a device cache uses (its
  // offers deferred to the call's end: runs 2 and 3). Runs 4 and 5 write
  // through at commit.
  for (int run = 0; run < 6; ++run) {
    const uint64_t host = run % 2 == 0 ? 0 : 3;
    TempDir dir;
    CacheConfig c = store_config(dir.path(), 12, host, 10);
    // Through the staging blocks, partial matches are copied into new
    // blocks too, which may be ones a deferred offer still reads.
    c.partial_reuse = run == 2 || run == 3;
    make(c, run >= 4);
    chain().set_direct_access(run < 2 || run >= 4);
    std::mt19937 rng(uint32_t(7 + run));
    std::vector<std::vector<int32_t>> prefixes;
    for (int i = 0; i < 5; ++i) prefixes.push_back(seq(1000 * (i + 1), 4 * int32_t(1 + rng() % 4)));
    std::vector<uint64_t> live;
    uint64_t next = 1;
    for (int step = 0; step < 300; ++step) {
      const int op = int(rng() % 10);
      if (op < 5 && live.size() < 2) {
        std::vector<int32_t> t = prefixes[rng() % prefixes.size()];
        const int tail = int(rng() % 9);
        for (int k = 0; k < tail; ++k) t.push_back(int32_t(rng() % 50));
        if (t.size() > 24) t.resize(24);
        SequenceOptions o;
        o.prompt_priority = rng() % 4 == 0 ? 10 : 35;
        if (rng() % 5 == 0) {
          o.has_salt = true;
          o.salt = "s";
        }
        uint64_t cached = 0;
        if (!m().try_add(next, t.data(), t.size(), o, nullptr, &cached)) continue;
        const Sequence& s = m().sequence(next);
        ASSERT_EQ(check_sequence(*cache_, s, 0, cached), "") << "step " << step;
        write_sequence(*cache_, s, cached, s.length());
        m().commit(next, rng() % 2 == 0 ? s.length() : cached);
        live.push_back(next++);
      } else if (!live.empty()) {
        const size_t i = rng() % live.size();
        const Sequence& s = m().sequence(live[i]);
        if (s.committed < s.length()) m().commit(live[i], s.length());
        m().remove(live[i]);
        live.erase(live.begin() + long(i));
      }
      m().check_invariants();
      ASSERT_EQ(check_tree(*cache_), "") << "step " << step;
      if (step % 50 == 0) chain().flush();
    }
    const StoreTierReport d = disk();
    EXPECT_GT(d.io.stores, 0u);
    EXPECT_GT(d.onboarded_blocks, 0u);
    EXPECT_EQ(d.io.rejected, 0u);
    EXPECT_LE(d.io.blocks, 10u);
    cache_.reset();
  }
}

}  // namespace
}  // namespace kvc

namespace kvc {
namespace {

// A device copy that fails while onboarding: the add goes on, computing the
// blocks (a miss), and nothing half-copied is published.
TEST(StoreChainFaults, AFailedOnboardCopyIsAMiss) {
  TempDir dir;
  test::FaultPlan faults;
  std::unique_ptr<Cache> cache = test::faulty_cache(store_config(dir.path(), 8), faults);
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
  const auto a = seq(100, 17);
  cache_prompt(1, a);
  cache_prompt(2, seq(900, 32));  // a to the disk (one offload copy for the add's offers)
  m.stores()->flush();
  // The next add evicts 5 of b's blocks, copies them out in one offload
  // copy before it onboards (StoreChain::flush_offers), then onboards: that
  // second copy fails.
  faults.fail_copy(2);
  EXPECT_EQ(cache_prompt(3, a), 0u);
  m.stores()->flush();  // the offers' seals and puts are the offer worker's
  StoreTierReport d = m.stores()->reports().at(0);
  EXPECT_EQ(d.onboarded_blocks, 0u);
  EXPECT_EQ(d.offered_blocks, 4u + 5u);
  EXPECT_EQ(check_tree(*cache), "");
  // With the device healthy again the blocks load (a was just recomputed and
  // published: evict it again first).
  cache_prompt(4, seq(900, 32));
  m.stores()->flush();
  EXPECT_EQ(cache_prompt(5, a), 16u);
  EXPECT_EQ(check_tree(*cache), "");
}

}  // namespace
}  // namespace kvc
