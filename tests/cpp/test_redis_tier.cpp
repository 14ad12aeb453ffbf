// The remote tier in a cache (store_chain.h with RedisStore) against a real
// redis-server: evicted blocks go to Redis and come back bit for bit, into
// the same cache and into another one sharing the server; salts never meet;
// another block's record planted under a block's key is a miss; the server
// killed mid-run or paused (no answer) never fails a serving call nor hands
// out a wrong byte, and the tier recovers after a restart. Every step runs
// the invariant checker.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "core/cache.h"
#include "core/prompt_hashes.h"
#include "kv_content.h"
#include "manager_fixture.h"
#include "redis_fixture.h"
#include "store_fixture.h"
#include "store/redis_store.h"

namespace kvc {
namespace {

using std::chrono::milliseconds;
using test::check_sequence;
using test::check_tree;
using test::seq;
using test::write_sequence;

CacheConfig remote_config(const std::string& url, uint64_t primary_blocks,
                          uint32_t command_timeout_ms = 2000) {
  CacheConfig c;
  c.num_layers = 2;
  c.kv_heads = {2};
  c.head_dim = 4;
  c.dtype = KVC_DTYPE_F32;
  c.tokens_per_block = 4;
  c.max_tokens = primary_blocks * 4;
  c.partial_reuse = false;  // only full blocks are published: exact counts
  c.stores.remote_url = url;
  c.stores.remote_namespace = "tier-test";
  c.stores.remote_bytes = 64 << 20;
  c.stores.remote_connect_timeout_ms = 2000;
  c.stores.remote_command_timeout_ms = command_timeout_ms;
  return c;
}

// One cache and the steps the tests take on it.
class Engine {
 public:
  // The scripted counts below are the eviction offload's (a device cache's);
  // write-through at commit: test_store_write_through.cpp.
  explicit Engine(const CacheConfig& c) : cache_(std::make_unique<Cache>(c)) {
    m().stores()->set_write_through(false);
  }
  BlockManager& m() { return cache_->manager(); }
  RedisStore& redis() { return dynamic_cast<RedisStore&>(m().stores()->store(0)); }
  StoreTierReport remote() {
    m().stores()->flush();
    return m().stores()->reports().at(0);
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
  const Cache& cache() const { return *cache_; }

 private:
  std::unique_ptr<Cache> cache_;
};

SequenceOptions salted(const std::string& salt) {
  SequenceOptions o;
  o.has_salt = true;
  o.salt = salt;
  return o;
}

class RedisTierTest : public RedisTest {};

TEST_F(RedisTierTest, EvictedBlocksGoToRedisAndComeBackBitForBit) {
  Engine e(remote_config(server().url(), 4));
  const auto a = seq(100, 13);  // 3 full blocks + 1 token
  const auto b = seq(500, 16);  // 4 blocks: evicts every block of a
  EXPECT_EQ(e.cache_prompt(1, a), 0u);
  EXPECT_EQ(e.cache_prompt(2, b), 0u);
  StoreTierReport r = e.remote();
  EXPECT_STREQ(r.name, "remote");
  EXPECT_EQ(r.offered_blocks, 3u);
  EXPECT_EQ(r.io.stores, 3u);
  EXPECT_EQ(r.io.blocks, 3u);
  EXPECT_EQ(r.io.bytes, 3 * e.redis().layout().record_bytes());
  EXPECT_EQ(server().command("DBSIZE"), ":3");
  // a comes back from Redis: its 3 full blocks (the last token computed).
  EXPECT_EQ(e.add(3, a), 12u);
  r = e.remote();
  EXPECT_EQ(r.onboarded_blocks, 3u);
  EXPECT_EQ(r.io.hits, 3u);
  EXPECT_EQ(r.io.rejected, 0u);
  EXPECT_EQ(r.io.errors, 0u);
  EXPECT_GE(r.io.load.count, 1u);
}

TEST_F(RedisTierTest, ASecondCacheReusesWhatTheFirstOffloaded) {
  const auto a = seq(100, 21);  // 5 full blocks + 1 token
  {
    Engine first(remote_config(server().url(), 6));
    EXPECT_EQ(first.cache_prompt(1, a), 0u);
    EXPECT_EQ(first.cache_prompt(2, seq(900, 24)), 0u);  // evicts a's 5 full blocks
    EXPECT_EQ(first.remote().io.stores, 5u);
  }
  // Another cache on the server: nothing in its tree, all of a from Redis.
  Engine second(remote_config(server().url(), 8));
  EXPECT_EQ(second.add(1, a), 20u);
  EXPECT_EQ(second.remote().onboarded_blocks, 5u);
  // Another namespace shares nothing.
  CacheConfig other = remote_config(server().url(), 8);
  other.stores.remote_namespace = "another-deployment";
  Engine third(other);
  EXPECT_EQ(third.add(1, a), 0u);
}

TEST_F(RedisTierTest, ALoadedBlockIsOfferedOnlyToTheStoresItWasNotLoadedFrom) {
  const auto a = seq(100, 21);  // 5 full blocks + 1 token
  const auto c = seq(900, 24);  // 6 full blocks: evicts every block of a
  {
    Engine first(remote_config(server().url(), 6));
    first.cache_prompt(1, a);
    first.cache_prompt(2, c);  // a's 5 to Redis (c's stay cached, never offered)
    EXPECT_EQ(first.remote().io.stores, 5u);
  }
  // A second cache with a disk tier above the remote one.
  testing_store::TempDir dir;
  CacheConfig cfg = remote_config(server().url(), 6);
  cfg.stores.disk_dir = dir.path();
  cfg.stores.disk_bytes = 64 * store_record_layout(cfg, group_layers(cfg)).record_bytes();
  Engine second(cfg);
  StoreChain& chain = *second.m().stores();
  auto reports = [&] {
    chain.flush();
    std::vector<StoreTierReport> r = chain.reports();
    EXPECT_EQ(r.size(), 2u);
    EXPECT_STREQ(r.at(0).name, "disk");
    return r;
  };
  // a from Redis (the disk is empty); evicted by c, it goes to the disk
  // only: Redis holds it.
  EXPECT_EQ(second.cache_prompt(1, a), 20u);
  EXPECT_EQ(second.cache_prompt(2, c), 0u);
  std::vector<StoreTierReport> r = reports();
  EXPECT_EQ(r[1].onboarded_blocks, 5u);
  EXPECT_EQ(r[0].offered_blocks, 5u);
  EXPECT_EQ(r[0].io.stores, 5u);
  EXPECT_EQ(r[1].offered_blocks, 0u);
  // a from the disk now, bit for bit; c's 6 computed blocks go to both.
  EXPECT_EQ(second.cache_prompt(3, a), 20u);
  r = reports();
  EXPECT_EQ(r[0].onboarded_blocks, 5u);
  EXPECT_EQ(r[0].offered_blocks, 11u);
  EXPECT_EQ(r[1].offered_blocks, 6u);
  // c from the disk; a's 5 (loaded from the disk) go to Redis only.
  EXPECT_EQ(second.cache_prompt(4, c), 20u);
  r = reports();
  EXPECT_EQ(r[0].onboarded_blocks, 10u);
  EXPECT_EQ(r[0].offered_blocks, 11u);
  EXPECT_EQ(r[0].io.stores, 11u);
  EXPECT_EQ(r[1].offered_blocks, 11u);
}

TEST_F(RedisTierTest, SaltsNeverMeetAcrossTheRemoteTier) {
  const auto a = seq(100, 17);  // 4 full blocks + 1 token
  {
    Engine first(remote_config(server().url(), 5));
    EXPECT_EQ(first.cache_prompt(1, a, salted("tenant-a")), 0u);
    EXPECT_EQ(first.cache_prompt(2, seq(900, 20)), 0u);  // evicts a's 4 full blocks
    EXPECT_EQ(first.remote().io.stores, 4u);
  }
  Engine second(remote_config(server().url(), 8));
  EXPECT_EQ(second.cache_prompt(1, a, salted("tenant-b")), 0u);
  EXPECT_EQ(second.cache_prompt(2, a), 0u);  // no salt is another scope too
  EXPECT_EQ(second.remote().onboarded_blocks, 0u);
  EXPECT_EQ(second.add(3, a, salted("tenant-a")), 16u);  // its own salt: bit for bit
  EXPECT_EQ(second.remote().onboarded_blocks, 4u);
}

TEST_F(RedisTierTest, AnotherBlocksRecordPlantedUnderABlocksKeyIsAMiss) {
  Engine e(remote_config(server().url(), 4));
  const auto a = seq(100, 9);   // 2 full blocks + 1 token
  const auto b = seq(300, 9);
  EXPECT_EQ(e.cache_prompt(1, a), 0u);
  EXPECT_EQ(e.cache_prompt(2, b), 0u);
  EXPECT_EQ(e.cache_prompt(3, seq(900, 16)), 0u);  // evicts a's and b's blocks
  ASSERT_EQ(e.remote().io.stores, 4u);
  // b's first record (a sound record) copied over a's first block's key.
  std::vector<uint64_t> ha(2), hb(2);
  prompt_block_hashes(e.cache().config(), a.data(), 8, {}, ha.data());
  prompt_block_hashes(e.cache().config(), b.data(), 8, {}, hb.data());
  EXPECT_EQ(server().command("COPY " + e.redis().key_of(hb[0]) + " " + e.redis().key_of(ha[0]) +
                             " REPLACE"),
            ":1");
  EXPECT_EQ(e.add(4, a), 0u);  // a's first block is b's: nothing of a is reused
  StoreTierReport r = e.remote();
  EXPECT_EQ(r.io.rejected, 1u);
  EXPECT_EQ(r.onboarded_blocks, 0u);
  e.m().remove(4);
  // b itself still loads (its record was copied, not moved).
  EXPECT_EQ(e.add(5, b), 8u);
}

TEST_F(RedisTierTest, ServerKilledMidRunNeverFailsACallNorHandsOutAWrongByte) {
  Engine e(remote_config(server().url(), 4, 300));
  const auto a = seq(100, 13);
  const auto b = seq(500, 16);
  EXPECT_EQ(e.cache_prompt(1, a), 0u);
  EXPECT_EQ(e.cache_prompt(2, b), 0u);  // a -> Redis
  ASSERT_EQ(e.remote().io.stores, 3u);

  ASSERT_TRUE(server().kill());
  // Every call goes on: a's blocks are simply not found, b's evictions are
  // dropped, the KV read back is the oracle's.
  EXPECT_EQ(e.cache_prompt(3, a), 0u);
  EXPECT_EQ(e.cache_prompt(4, b), 0u);
  EXPECT_EQ(e.cache_prompt(5, a), 0u);
  StoreTierReport r = e.remote();
  EXPECT_GE(r.io.errors, 1u);
  EXPECT_GE(r.io.drops, 1u);
  EXPECT_EQ(r.onboarded_blocks, 0u);

  ASSERT_TRUE(server().restart()) << server().why();
  ASSERT_TRUE(e.redis().client().wait_connected(milliseconds(20000)));
  // Stored again after the restart, and found again.
  EXPECT_EQ(e.cache_prompt(6, b), 0u);  // a (in the tree) -> Redis
  EXPECT_GE(e.remote().io.stores, 6u);
  EXPECT_EQ(e.add(7, a), 12u);
  EXPECT_GE(e.remote().onboarded_blocks, 3u);
}

TEST_F(RedisTierTest, AServerThatStopsAnsweringCostsOneTimeoutThenMisses) {
  Engine e(remote_config(server().url(), 4, 200));
  const auto a = seq(100, 13);
  EXPECT_EQ(e.cache_prompt(1, a), 0u);
  EXPECT_EQ(e.cache_prompt(2, seq(500, 16)), 0u);
  ASSERT_EQ(e.remote().io.stores, 3u);
  ASSERT_TRUE(server().pause());
  EXPECT_EQ(e.add(3, a), 0u);  // the lookup times out: a miss, no error to the caller
  StoreTierReport r = e.remote();
  EXPECT_GE(r.io.errors, 1u);
  EXPECT_EQ(r.onboarded_blocks, 0u);
  EXPECT_FALSE(e.redis().client().counters().connected);
  ASSERT_TRUE(server().resume());
  ASSERT_TRUE(e.redis().client().wait_connected(milliseconds(20000)));
  e.m().remove(3);
}

TEST_F(RedisTierTest, RefusedAtCreateUnlessOptional) {
  CacheConfig c = remote_config(server().url(), 4);
  c.stores.remote_bytes = 100;
  EXPECT_EQ(test::status_of([&] { Cache x(c); }), KVC_ERR_INVALID_ARGUMENT);
  c = remote_config(server().url(), 4);
  ASSERT_TRUE(server().kill());
  EXPECT_EQ(test::status_of([&] { Cache x(c); }), KVC_ERR_DEVICE);
  c.stores.remote_optional = true;
  Engine e(c);  // created: the tier connects later
  EXPECT_EQ(e.cache_prompt(1, seq(100, 13)), 0u);
  EXPECT_EQ(e.cache_prompt(2, seq(500, 16)), 0u);
  StoreTierReport r = e.remote();
  EXPECT_GE(r.io.errors, 1u);
  EXPECT_EQ(r.io.drops, 3u);
}

}  // namespace
}  // namespace kvc
