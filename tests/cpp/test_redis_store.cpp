// The remote tier's store (src/store/redis_store.h) on its own, against a
// real redis-server: round trip bit for bit, one round trip per chunk,
// values that must never become KV (another block's record under a key, a
// record of another geometry, garbage), the budget, the refusals at create
// and a server killed and restarted under it. The core's part (checking a
// loaded record, reject()) is played here as block_store.h says.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/error.h"
#include "redis_fixture.h"
#include "store/redis_store.h"
#include "store_fixture.h"

namespace kvc {
namespace {

using std::chrono::milliseconds;
using testing_store::TestRecord;
using testing_store::load_n;
using testing_store::test_layout;

template <class F>
std::pair<kvc_status_t, std::string> error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return {e.status(), e.what()};
  }
  return {KVC_OK, ""};
}

class RedisStoreTest : public RedisTest {
 protected:
  RedisStoreOptions options(uint64_t capacity = 64 << 20) {
    RedisStoreOptions o;
    o.url = server().url();
    o.key_namespace = "test";
    o.capacity_bytes = capacity;
    o.connect_timeout = milliseconds(2000);
    o.command_timeout = milliseconds(2000);
    return o;
  }
  // The core's side of a load: check each record, reject the refused one.
  static size_t checked(BlockStore& s, const std::vector<const TestRecord*>& want,
                        std::vector<RecordCheck>* verdicts = nullptr) {
    std::vector<uint64_t> hashes;
    for (const TestRecord* r : want) hashes.push_back(r->key.lookup_hash);
    std::vector<std::vector<unsigned char>> out;
    const size_t got = load_n(s, hashes, out);
    size_t ok = 0;
    for (; ok < got; ++ok) {
      const RecordCheck c = check_record(s.layout(), want[ok]->key, out[ok].data(), out[ok].size());
      if (verdicts) verdicts->push_back(c);
      if (c != RecordCheck::kOk) {
        s.reject(hashes[ok], c);
        break;
      }
      EXPECT_EQ(out[ok], want[ok]->bytes) << ok;
    }
    return ok;
  }
};

TEST_F(RedisStoreTest, RoundTripBitForBitOneRoundTripPerChunk) {
  const RecordLayout l = test_layout(3 << 19);  // 1.5 MiB records: 3 per 4 MiB chunk
  RedisStore s(options(), l);
  EXPECT_EQ(s.chunk(), 3u);
  std::vector<TestRecord> recs;
  for (uint64_t i = 0; i < 5; ++i) recs.emplace_back(l, i);
  for (const TestRecord& r : recs) EXPECT_TRUE(s.put(r.key.lookup_hash, 35, r.bytes.data()));
  s.flush();
  EXPECT_EQ(server().command("EXISTS " + s.key_of(recs[0].key.lookup_hash)), ":1");

  std::vector<const TestRecord*> want;
  for (const TestRecord& r : recs) want.push_back(&r);
  EXPECT_EQ(checked(s, want), 5u);
  EXPECT_EQ(s.client().counters().lookup_round_trips, 2u);  // ceil(5 / 3)
  const StoreStats st = s.stats();
  EXPECT_EQ(st.blocks, 5u);
  EXPECT_EQ(st.bytes, 5 * l.record_bytes());
  EXPECT_EQ(st.capacity_bytes, 64u << 20);
  EXPECT_EQ(st.stores, 5u);
  EXPECT_EQ(st.hits, 5u);
  EXPECT_EQ(st.misses, 0u);
  EXPECT_EQ(st.load.count, 1u);
  EXPECT_EQ(st.write.count, 5u);

  // A miss in the middle ends the run there.
  TestRecord absent(l, 99);
  EXPECT_EQ(checked(s, {want[0], &absent, want[1]}), 1u);
  EXPECT_EQ(s.stats().misses, 1u);
}

TEST_F(RedisStoreTest, AnotherBlocksRecordUnderAKeyIsNeverKV) {
  const RecordLayout l = test_layout();
  RedisStore s(options(), l);
  TestRecord mine(l, 1), other(l, 2);
  // `other`'s sound record planted under `mine`'s key (a lookup-hash
  // collision, or a writer that lies about the key).
  s.client().put(s.key_of(mine.key.lookup_hash),
                 std::string(other.bytes.begin(), other.bytes.end()), 35);
  s.flush();
  std::vector<RecordCheck> v;
  EXPECT_EQ(checked(s, {&mine}, &v), 0u);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0], RecordCheck::kOtherKey);
  EXPECT_EQ(s.stats().rejected, 1u);
  // A sound record of another block is left for its owner.
  s.flush();
  EXPECT_EQ(server().command("EXISTS " + s.key_of(mine.key.lookup_hash)), ":1");
}

TEST_F(RedisStoreTest, GarbageAndOtherGeometriesAreMissesAndCorruptValuesAreDeleted) {
  const RecordLayout l = test_layout();
  RedisStore s(options(), l);
  TestRecord a(l, 1), b(l, 2), c(l, 3);
  // Garbage of the wrong size: refused by the store itself.
  s.client().put(s.key_of(a.key.lookup_hash), "not a record", 35);
  // A record of another geometry, same size, under b's key.
  RecordLayout other_geometry = l;
  other_geometry.fingerprint = l.fingerprint + 1;
  TestRecord foreign(other_geometry, 2);
  s.client().put(s.key_of(b.key.lookup_hash),
                 std::string(foreign.bytes.begin(), foreign.bytes.end()), 35);
  // c's record with one payload byte flipped.
  std::string flipped(c.bytes.begin(), c.bytes.end());
  flipped[l.header_bytes() + 17] ^= 0x20;
  s.client().put(s.key_of(c.key.lookup_hash), flipped, 35);
  s.flush();

  EXPECT_EQ(checked(s, {&a}), 0u);
  std::vector<RecordCheck> v;
  EXPECT_EQ(checked(s, {&b}, &v), 0u);
  EXPECT_EQ(checked(s, {&c}, &v), 0u);
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[0], RecordCheck::kGeometry);
  EXPECT_EQ(v[1], RecordCheck::kChecksum);
  const StoreStats st = s.stats();
  EXPECT_EQ(st.rejected, 3u);
  EXPECT_EQ(st.hits, 2u);  // answered with a record, refused by the check
  // The refused records are deleted (the garbage stays: the core never saw it).
  s.flush();
  EXPECT_EQ(server().command("EXISTS " + s.key_of(b.key.lookup_hash)), ":0");
  EXPECT_EQ(server().command("EXISTS " + s.key_of(c.key.lookup_hash)), ":0");
  // The real records replace them.
  for (const TestRecord* r : {&a, &b, &c}) s.put(r->key.lookup_hash, 35, r->bytes.data());
  s.flush();
  EXPECT_EQ(checked(s, {&a, &b, &c}), 3u);
}

TEST_F(RedisStoreTest, KeysCarryNamespaceAndGeometry) {
  const RecordLayout l = test_layout();
  RedisStore s(options(), l);
  EXPECT_EQ(s.key_of(0x1234), "test:000000000000feed:0000000000001234");
  RedisStoreOptions o = options();
  o.key_namespace = "other";
  RedisStore t(o, l);
  TestRecord a(l, 1);
  s.put(a.key.lookup_hash, 35, a.bytes.data());
  s.flush();
  EXPECT_EQ(checked(t, {&a}), 0u);  // another namespace sees nothing
  EXPECT_EQ(checked(s, {&a}), 1u);
}

TEST_F(RedisStoreTest, RefusesAtCreateWithPreciseMessages) {
  const RecordLayout l = test_layout();
  RedisStoreOptions o = options();
  o.capacity_bytes = l.record_bytes() - 1;
  auto [status, message] = error_of([&] { RedisStore s(o, l); });
  EXPECT_EQ(status, KVC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(message, "remote cache bytes " + std::to_string(l.record_bytes() - 1) +
                         " is below one block record (" + std::to_string(l.record_bytes()) +
                         " bytes for this model's geometry)");
  o = options();
  o.key_namespace = "has space";
  std::tie(status, message) = error_of([&] { RedisStore s(o, l); });
  EXPECT_EQ(status, KVC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(message.find("may hold only letters, digits"), std::string::npos) << message;
  o = options();
  o.key_namespace = "";
  std::tie(status, message) = error_of([&] { RedisStore s(o, l); });
  EXPECT_NE(message.find("must be 1..64 bytes long"), std::string::npos) << message;
  o = options();
  o.url = "redis://127.0.0.1:notaport/0";
  std::tie(status, message) = error_of([&] { RedisStore s(o, l); });
  EXPECT_EQ(status, KVC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(message.find("the port \"notaport\""), std::string::npos) << message;
}

TEST_F(RedisStoreTest, ServerKilledMidRunGivesMissesNeverWrongBytesThenRecovers) {
  const RecordLayout l = test_layout();
  RedisStoreOptions o = options();
  o.command_timeout = milliseconds(300);
  RedisStore s(o, l);
  std::vector<TestRecord> recs;
  for (uint64_t i = 0; i < 4; ++i) recs.emplace_back(l, i);
  for (const TestRecord& r : recs) s.put(r.key.lookup_hash, 35, r.bytes.data());
  s.flush();
  std::vector<const TestRecord*> want;
  for (const TestRecord& r : recs) want.push_back(&r);
  ASSERT_EQ(checked(s, want), 4u);

  ASSERT_TRUE(server().kill());
  for (int round = 0; round < 3; ++round) {
    EXPECT_EQ(checked(s, want), 0u);  // no throw, no bytes
    s.put(recs[0].key.lookup_hash, 35, recs[0].bytes.data());  // dropped, counted
  }
  s.flush();
  StoreStats st = s.stats();
  EXPECT_GE(st.errors, 1u);
  EXPECT_GE(st.drops, 3u);

  ASSERT_TRUE(server().restart()) << server().why();
  ASSERT_TRUE(s.client().wait_connected(milliseconds(20000)));
  EXPECT_EQ(checked(s, want), 0u);  // a fresh server has none of them
  for (const TestRecord& r : recs) EXPECT_TRUE(s.put(r.key.lookup_hash, 35, r.bytes.data()));
  s.flush();
  EXPECT_EQ(checked(s, want), 4u);
}

TEST_F(RedisStoreTest, AnOptionalTierWhoseServerIsDownAtCreateConnectsLater) {
  const RecordLayout l = test_layout();
  ASSERT_TRUE(server().kill());
  RedisStoreOptions o = options();
  // Not optional: refused, naming the server.
  auto [status, message] = error_of([&] { RedisStore s(o, l); });
  EXPECT_EQ(status, KVC_ERR_DEVICE);
  EXPECT_NE(message.find("cannot connect within 2000 ms"), std::string::npos) << message;
  // Optional: created down; misses and drops, counted, until the server is up.
  o.optional = true;
  RedisStore s(o, l);
  TestRecord a(l, 1);
  EXPECT_FALSE(s.put(a.key.lookup_hash, 35, a.bytes.data()));
  EXPECT_EQ(checked(s, {&a}), 0u);
  StoreStats st = s.stats();
  EXPECT_GE(st.errors, 1u);
  EXPECT_EQ(st.drops, 1u);
  EXPECT_EQ(st.misses, 1u);
  EXPECT_NE(s.client().last_connect_error().find("cannot connect"), std::string::npos);

  ASSERT_TRUE(server().restart()) << server().why();
  ASSERT_TRUE(s.client().wait_connected(milliseconds(20000)));
  EXPECT_TRUE(s.put(a.key.lookup_hash, 35, a.bytes.data()));
  s.flush();
  EXPECT_EQ(checked(s, {&a}), 1u);
}

TEST_F(RedisStoreTest, AnOptionalTierStillRefusesAMalformedConfig) {
  RedisStoreOptions o = options();
  o.optional = true;
  o.url = "redis://127.0.0.1:1/db";
  const auto [status, message] = error_of([&] { RedisStore s(o, test_layout()); });
  EXPECT_EQ(status, KVC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(message.find("the database \"db\""), std::string::npos) << message;
}

}  // namespace
}  // namespace kvc
