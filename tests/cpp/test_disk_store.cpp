// The disk tier's store (src/store/disk_store.h) on its own: round trip bit
// for bit, persistence across a reopen, the prioritized LRU budget, the
// bounded queue and failed writes (drops counted), readers racing the
// writer, a randomized run against an in-memory oracle, and the precise
// refusals at open. Damaged files and crashes: test_disk_store_faults.cpp.
// No sleeps: a write fault hook holds the worker where a test needs it,
// flush() waits for it.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "base/error.h"
#include "store/disk_store.h"
#include "store_fixture.h"

namespace kvc {
namespace {

using testing_store::TempDir;
using testing_store::TestRecord;
using testing_store::load_n;
using testing_store::test_layout;

TEST(DiskStore, RoundTripBitForBitAndStopsAtTheFirstMiss) {
  TempDir dir;
  const RecordLayout l = test_layout();
  DiskStore s(dir.path(), 1 << 20, l);
  TestRecord a(l, 1), b(l, 2), c(l, 3);
  EXPECT_TRUE(s.put(a.key.lookup_hash, 35, a.bytes.data()));
  EXPECT_TRUE(s.put(b.key.lookup_hash, 35, b.bytes.data()));
  s.flush();
  std::vector<std::vector<unsigned char>> out;
  EXPECT_EQ(load_n(s, {a.key.lookup_hash, b.key.lookup_hash, c.key.lookup_hash}, out), 2u);
  EXPECT_EQ(out[0], a.bytes);
  EXPECT_EQ(out[1], b.bytes);
  EXPECT_EQ(check_record(l, a.key, out[0].data(), out[0].size()), RecordCheck::kOk);
  // A miss first ends the run at once.
  EXPECT_EQ(load_n(s, {c.key.lookup_hash, a.key.lookup_hash}, out), 0u);
  const StoreStats st = s.stats();
  EXPECT_EQ(st.blocks, 2u);
  EXPECT_EQ(st.bytes, 2 * l.record_bytes());
  EXPECT_EQ(st.stores, 2u);
  EXPECT_EQ(st.hits, 2u);
  EXPECT_EQ(st.misses, 2u);
  EXPECT_EQ(st.drops, 0u);
  EXPECT_EQ(st.write.count, 2u);
  EXPECT_EQ(st.load.count, 2u);
}

TEST(DiskStore, ReopenFindsThePreviousRecordsAndOnlyThoseOfItsGeometry) {
  TempDir dir;
  const RecordLayout l = test_layout();
  TestRecord a(l, 1, 80), b(l, 2, 10);
  {
    DiskStore s(dir.path(), 1 << 20, l);
    s.put(a.key.lookup_hash, 80, a.bytes.data());
    s.put(b.key.lookup_hash, 10, b.bytes.data());
  }  // the destructor writes what is queued
  RecordLayout other = l;
  other.fingerprint = 0xbeef;
  {
    DiskStore foreign(dir.path(), 1 << 20, other);
    EXPECT_EQ(foreign.stats().blocks, 0u);
  }
  DiskStore s(dir.path(), 1 << 20, l);
  EXPECT_EQ(s.stats().blocks, 2u);
  std::vector<std::vector<unsigned char>> out;
  ASSERT_EQ(load_n(s, {a.key.lookup_hash, b.key.lookup_hash}, out), 2u);
  EXPECT_EQ(out[0], a.bytes);
  EXPECT_EQ(out[1], b.bytes);
}

TEST(DiskStore, BudgetEvictsLowestPriorityThenOldest) {
  TempDir dir;
  const RecordLayout l = test_layout();
  DiskStore s(dir.path(), 3 * l.record_bytes() + 100, l);
  ASSERT_EQ(s.max_records(), 3u);
  TestRecord r1(l, 1), r2(l, 2), r3(l, 3), r4(l, 4), r5(l, 5);
  s.put(r1.key.lookup_hash, 90, r1.bytes.data());
  s.put(r2.key.lookup_hash, 20, r2.bytes.data());
  s.put(r3.key.lookup_hash, 20, r3.bytes.data());
  s.put(r4.key.lookup_hash, 50, r4.bytes.data());  // evicts r2 (lowest, older)
  s.flush();
  std::vector<std::vector<unsigned char>> out;
  EXPECT_EQ(load_n(s, {r2.key.lookup_hash}, out), 0u);
  EXPECT_EQ(load_n(s, {r3.key.lookup_hash}, out), 1u);  // r3 becomes the newest 20
  s.put(r5.key.lookup_hash, 20, r5.bytes.data());      // evicts r3 (the only 20)
  s.flush();
  EXPECT_EQ(load_n(s, {r3.key.lookup_hash}, out), 0u);
  EXPECT_EQ(load_n(s, {r1.key.lookup_hash, r4.key.lookup_hash, r5.key.lookup_hash}, out), 3u);
  EXPECT_EQ(s.stats().evictions, 2u);
  EXPECT_EQ(s.stats().blocks, 3u);
  // One slab file holds them, no larger than the budget's 3 slots.
  size_t slabs = 0;
  for (const std::string& f : dir.files())
    if (f.size() > 5 && f.substr(f.size() - 5) == ".slab") {
      ++slabs;
      struct stat st {};
      ASSERT_EQ(::stat((dir.path() + "/" + f).c_str(), &st), 0);
      EXPECT_EQ(uint64_t(st.st_size), 3 * l.record_bytes());
    }
  EXPECT_EQ(slabs, 1u);
}

// Holds the worker inside its first write until released.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool entered = false, open = false;
  int fail_with = 0;
  int pass(uint64_t) {
    std::unique_lock<std::mutex> lock(mu);
    entered = true;
    cv.notify_all();
    cv.wait(lock, [&] { return open; });
    return fail_with;
  }
  void wait_entered() {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return entered; });
  }
  void release() {
    std::lock_guard<std::mutex> lock(mu);
    open = true;
    cv.notify_all();
  }
};

TEST(DiskStore, FullQueueDropsThePutAndCountsIt) {
  TempDir dir;
  const RecordLayout l = test_layout();
  Gate gate;
  DiskStoreOptions o;
  o.queue_records = 2;
  o.write_fault = [&](uint64_t h) { return gate.pass(h); };
  DiskStore s(dir.path(), 1 << 20, l, o);
  TestRecord r1(l, 1), r2(l, 2), r3(l, 3), r4(l, 4);
  EXPECT_TRUE(s.put(r1.key.lookup_hash, 35, r1.bytes.data()));
  gate.wait_entered();  // the worker holds r1
  EXPECT_TRUE(s.put(r2.key.lookup_hash, 35, r2.bytes.data()));
  EXPECT_TRUE(s.put(r3.key.lookup_hash, 35, r3.bytes.data()));
  EXPECT_FALSE(s.put(r4.key.lookup_hash, 35, r4.bytes.data()));
  EXPECT_EQ(s.stats().drops, 1u);
  EXPECT_EQ(s.stats().queued, 2u);
  // Queued records are served from the queue before they reach the disk.
  std::vector<std::vector<unsigned char>> out;
  ASSERT_EQ(load_n(s, {r1.key.lookup_hash, r2.key.lookup_hash, r3.key.lookup_hash}, out), 3u);
  EXPECT_EQ(out[1], r2.bytes);
  gate.release();
  s.flush();
  EXPECT_EQ(s.stats().stores, 3u);
  EXPECT_EQ(load_n(s, {r4.key.lookup_hash}, out), 0u);
}

// put_buffer() queues the caller's buffer itself (no copy) and hands a
// spare one back: the record is served from the queue, then from the disk,
// bit for bit; a written buffer becomes the next put's spare (no allocation
// in steady state); a put refused for a full queue leaves the caller its
// buffer and its bytes.
TEST(DiskStore, PutBufferTakesTheBufferAndHandsBackASpare) {
  TempDir dir;
  const RecordLayout l = test_layout();
  const size_t size = l.record_bytes();
  Gate gate;
  DiskStoreOptions o;
  o.queue_records = 1;
  o.write_fault = [&](uint64_t h) { return gate.pass(h); };
  DiskStore s(dir.path(), 1 << 20, l, o);
  TestRecord r1(l, 1), r2(l, 2), r3(l, 3), r4(l, 4);
  auto buffer_of = [&](const TestRecord& r) {
    std::unique_ptr<unsigned char[]> b(new unsigned char[size]);
    std::memcpy(b.get(), r.bytes.data(), size);
    return b;
  };
  std::unique_ptr<unsigned char[]> buf = buffer_of(r1);
  const unsigned char* first = buf.get();
  ASSERT_TRUE(s.put_buffer(r1.key.lookup_hash, 35, buf));
  ASSERT_NE(buf, nullptr);
  EXPECT_NE(buf.get(), first);  // taken: the caller has another buffer
  gate.wait_entered();          // the worker holds r1's buffer
  std::memcpy(buf.get(), r2.bytes.data(), size);
  const unsigned char* second = buf.get();
  ASSERT_TRUE(s.put_buffer(r2.key.lookup_hash, 35, buf));
  EXPECT_NE(buf.get(), second);
  // The queue (one record) is full: refused, the caller keeps its buffer.
  std::memcpy(buf.get(), r3.bytes.data(), size);
  const unsigned char* third = buf.get();
  EXPECT_FALSE(s.put_buffer(r3.key.lookup_hash, 35, buf));
  EXPECT_EQ(buf.get(), third);
  EXPECT_EQ(std::memcmp(buf.get(), r3.bytes.data(), size), 0);
  EXPECT_EQ(s.stats().drops, 1u);
  // Queued: served from the caller's former buffer, bit for bit.
  std::vector<std::vector<unsigned char>> out;
  ASSERT_EQ(load_n(s, {r1.key.lookup_hash, r2.key.lookup_hash}, out), 2u);
  EXPECT_EQ(out[0], r1.bytes);
  EXPECT_EQ(out[1], r2.bytes);
  gate.release();
  s.flush();
  // Written: the buffers come back as spares, the last written first.
  std::memcpy(buf.get(), r3.bytes.data(), size);
  ASSERT_TRUE(s.put_buffer(r3.key.lookup_hash, 35, buf));
  EXPECT_TRUE(buf.get() == first || buf.get() == second);
  s.flush();  // a queue of one
  std::memcpy(buf.get(), r4.bytes.data(), size);
  ASSERT_TRUE(s.put(r4.key.lookup_hash, 35, buf.get()));  // put() copies: the caller's buffer stays
  s.flush();
  ASSERT_EQ(load_n(s, {r1.key.lookup_hash, r2.key.lookup_hash, r3.key.lookup_hash,
                       r4.key.lookup_hash},
                   out),
            4u);
  EXPECT_EQ(out[0], r1.bytes);
  EXPECT_EQ(out[1], r2.bytes);
  EXPECT_EQ(out[2], r3.bytes);
  EXPECT_EQ(out[3], r4.bytes);
  EXPECT_EQ(s.stats().stores, 4u);
  EXPECT_TRUE(s.filter_consistent());
}

TEST(DiskStore, FailedWritesAreDroppedAndCountedAsErrors) {
  TempDir dir;
  const RecordLayout l = test_layout();
  DiskStoreOptions o;
  o.write_fault = [](uint64_t h) { return h == 0x1002 ? ENOSPC : 0; };
  DiskStore s(dir.path(), 1 << 20, l, o);
  TestRecord r1(l, 1), r2(l, 2);
  EXPECT_TRUE(s.put(r1.key.lookup_hash, 35, r1.bytes.data()));
  EXPECT_TRUE(s.put(r2.key.lookup_hash, 35, r2.bytes.data()));
  s.flush();
  const StoreStats st = s.stats();
  EXPECT_EQ(st.stores, 1u);
  EXPECT_EQ(st.drops, 1u);
  EXPECT_EQ(st.errors, 1u);
  std::vector<std::vector<unsigned char>> out;
  EXPECT_EQ(load_n(s, {r1.key.lookup_hash, r2.key.lookup_hash}, out), 1u);
}

TEST(DiskStore, SmallerBudgetAtReopenEvictsTheLowest) {
  TempDir dir;
  const RecordLayout l = test_layout();
  TestRecord a(l, 1, 70), b(l, 2, 10), c(l, 3, 70);
  {
    DiskStore s(dir.path(), 1 << 20, l);
    s.put(a.key.lookup_hash, 70, a.bytes.data());
    s.put(b.key.lookup_hash, 10, b.bytes.data());
    s.put(c.key.lookup_hash, 70, c.bytes.data());
  }
  DiskStore s(dir.path(), 2 * l.record_bytes(), l);
  EXPECT_EQ(s.stats().blocks, 2u);
  std::vector<std::vector<unsigned char>> out;
  EXPECT_EQ(load_n(s, {b.key.lookup_hash}, out), 0u);
  EXPECT_EQ(load_n(s, {a.key.lookup_hash, c.key.lookup_hash}, out), 2u);
}

std::string open_error(const std::string& dir, uint64_t bytes, const RecordLayout& l) {
  try {
    DiskStore s(dir, bytes, l);
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), KVC_ERR_INVALID_ARGUMENT);
    return e.what();
  }
  return "";
}

TEST(DiskStore, BadDirectoryOrBudgetIsRefusedWithAPreciseMessage) {
  TempDir dir;
  const RecordLayout l = test_layout();
  EXPECT_EQ(open_error(dir.path() + "/missing", 1 << 20, l),
            "disk cache directory '" + dir.path() + "/missing' cannot be used: No such file or directory");
  const std::string file = dir.path() + "/plain";
  std::ofstream(file) << "x";
  EXPECT_EQ(open_error(file, 1 << 20, l), "disk cache directory '" + file + "' is not a directory");
  EXPECT_NE(open_error("/proc", 1 << 20, l).find("disk cache directory '/proc' is not writable"),
            std::string::npos);
  EXPECT_EQ(open_error(dir.path(), l.record_bytes() - 1, l),
            "disk cache bytes " + std::to_string(l.record_bytes() - 1) +
                " is below one block record (" + std::to_string(l.record_bytes()) +
                " bytes for this model's geometry)");
  EXPECT_EQ(open_error("", 1 << 20, l), "disk cache directory must not be empty");
  DiskStore first(dir.path(), 1 << 20, l);
  EXPECT_NE(open_error(dir.path(), 1 << 20, l).find("is in use by another cache of this geometry"),
            std::string::npos);
}

TEST(DiskStore, RestartFindsEveryBlockBitForBitAcrossSeveralSlabs) {
  TempDir dir;
  const RecordLayout l = test_layout(3000);  // not a multiple of any page
  DiskStoreOptions o;
  o.slab_bytes = 5 * l.record_bytes() + 7;  // 5 slots a slab
  std::vector<TestRecord> recs;
  for (uint64_t i = 0; i < 23; ++i) recs.emplace_back(l, i, uint32_t(i % 3) * 30);
  std::vector<uint64_t> hashes;
  for (const auto& r : recs) hashes.push_back(r.key.lookup_hash);
  {
    DiskStore s(dir.path(), 1 << 20, l, o);
    for (const auto& r : recs) ASSERT_TRUE(s.put(r.key.lookup_hash, 35, r.bytes.data()));
  }
  size_t slabs = 0;
  for (const std::string& f : dir.files()) slabs += f.size() > 5 && f.substr(f.size() - 5) == ".slab";
  EXPECT_EQ(slabs, 5u);  // 23 records, 5 a slab
  DiskStore s(dir.path(), 1 << 20, l, o);
  EXPECT_EQ(s.stats().blocks, recs.size());
  std::vector<std::vector<unsigned char>> out;
  ASSERT_EQ(load_n(s, hashes, out), recs.size());  // runs split at slab ends
  for (size_t i = 0; i < recs.size(); ++i) {
    EXPECT_EQ(out[i], recs[i].bytes) << i;
    EXPECT_EQ(check_record(l, recs[i].key, out[i].data(), out[i].size()), RecordCheck::kOk);
  }
  EXPECT_EQ(s.stats().hits, recs.size());
}

// A reader loading while the worker replaces and evicts: every hit is the
// record of its own key, whole (never another record's slot contents).
TEST(DiskStore, ReadersRacingTheWriterOnlyEverSeeTheirOwnRecords) {
  TempDir dir;
  const RecordLayout l = test_layout(1024);
  DiskStoreOptions o;
  o.queue_records = 8;
  DiskStore s(dir.path(), 6 * l.record_bytes(), l, o);
  std::vector<TestRecord> recs;
  for (uint64_t i = 0; i < 12; ++i) recs.emplace_back(l, i);
  std::atomic<bool> done{false};
  std::thread reader([&] {
    std::vector<std::vector<unsigned char>> out;
    uint64_t round = 0;
    while (!done.load()) {
      const size_t first = size_t(round++ % recs.size());
      std::vector<uint64_t> hashes;
      for (size_t k = 0; k < 4; ++k) hashes.push_back(recs[(first + k) % recs.size()].key.lookup_hash);
      const size_t got = load_n(s, hashes, out);
      for (size_t k = 0; k < got; ++k)
        ASSERT_EQ(out[k], recs[(first + k) % recs.size()].bytes);
    }
  });
  for (int round = 0; round < 300; ++round) {
    const TestRecord& r = recs[size_t(round * 7 % 12)];
    s.put(r.key.lookup_hash, uint32_t(round % 5) * 20, r.bytes.data());
    if (round % 16 == 15) s.flush();
  }
  s.flush();
  done = true;
  reader.join();
  EXPECT_LE(s.stats().blocks, 6u);
}

// Random puts (fresh contents under reused keys), loads, rejects, flushes and
// reopens against an oracle of what the store may hold: a hit is always the
// newest accepted put of its key, bit for bit; a reopen after a flush finds
// exactly what was held before it; and the store never holds more than its
// budget, nor evicts while it has room.
TEST(DiskStore, RandomizedAgainstAnOracle) {
  TempDir dir;
  const RecordLayout l = test_layout(512);
  constexpr uint64_t kSlots = 9;
  DiskStoreOptions o;
  o.slab_bytes = 4 * l.record_bytes();  // 3 slabs
  o.queue_records = 5;
  std::mt19937_64 rng(2211);
  // Every version of every key: key k, version v -> a record with its own payload.
  std::map<std::pair<uint64_t, uint64_t>, TestRecord> versions;
  auto record = [&](uint64_t k, uint64_t v) -> const TestRecord& {
    auto it = versions.find({k, v});
    if (it == versions.end()) {
      TestRecord r(l, k);
      for (size_t b = 0; b < l.payload_bytes; ++b)
        r.bytes[l.header_bytes() + b] = static_cast<unsigned char>(b * 31 + k * 7 + v * 101);
      seal_record(l, r.key, 35, r.bytes.data());
      it = versions.emplace(std::make_pair(k, v), std::move(r)).first;
    }
    return it->second;
  };
  std::map<uint64_t, uint64_t> newest;  // key -> version of its newest accepted put
  std::set<uint64_t> held;              // keys the store may hold (an accepted put, not yet seen missing)
  uint64_t version = 0;
  uint64_t evictions_seen = 0;  // the store's count at the last check
  int reopens = 0, rejected_found = 0;
  uint64_t total_evictions_at_check = 0;
  auto store = std::make_unique<DiskStore>(dir.path(), kSlots * l.record_bytes(), l, o);
  for (int step = 0; step < 1500; ++step) {
    const int op = int(rng() % 100);
    if (op < 50) {
      const uint64_t k = rng() % 20;
      const TestRecord& r = record(k, ++version);
      if (store->put(r.key.lookup_hash, uint32_t(rng() % 4) * 30, r.bytes.data())) {
        newest[k] = version;
        held.insert(k);
      }
    } else if (op < 85) {
      std::vector<uint64_t> keys, hashes;
      for (size_t i = 0, n = 1 + rng() % 5; i < n; ++i) keys.push_back(rng() % 20);
      for (uint64_t k : keys) hashes.push_back(0x1000 + k);
      std::vector<std::vector<unsigned char>> out;
      const size_t got = load_n(*store, hashes, out);
      for (size_t i = 0; i < got; ++i) {
        ASSERT_EQ(held.count(keys[i]), 1u) << "step " << step << ": a key never put or evicted";
        ASSERT_EQ(out[i], record(keys[i], newest[keys[i]]).bytes) << "step " << step;
      }
      if (got < keys.size()) held.erase(keys[got]);  // evicted (no faults here)
    } else if (op < 88) {
      const uint64_t k = rng() % 20;
      store->reject(0x1000 + k, RecordCheck::kOtherKey);
      store->flush();  // a queued newer put is kept; else the key is gone
      std::vector<std::vector<unsigned char>> out;
      if (load_n(*store, {0x1000 + k}, out) == 0) {
        rejected_found += held.erase(k) != 0;
      } else ASSERT_EQ(out[0], record(k, newest[k]).bytes);
    } else if (op < 95) {
      // After a flush the store holds exactly the held keys still found, no
      // more than its budget, and a key goes missing only by an eviction.
      store->flush();
      const uint64_t evictions_before = evictions_seen;
      size_t missing = 0;
      std::vector<std::vector<unsigned char>> out;
      for (auto it = held.begin(); it != held.end();) {
        if (load_n(*store, {0x1000 + *it}, out) == 0) {
          ++missing;
          it = held.erase(it);
        } else {
          ASSERT_EQ(out[0], record(*it, newest[*it]).bytes);
          ++it;
        }
      }
      ASSERT_TRUE(store->filter_consistent()) << "step " << step;
      const StoreStats st = store->stats();
      ASSERT_LE(st.blocks, kSlots);
      ASSERT_EQ(st.blocks, held.size()) << "step " << step;
      evictions_seen = st.evictions;
      if (missing > 0) {
        ASSERT_GT(evictions_seen, evictions_before) << "step " << step;
      }
    } else {
      // Reopen: exactly the held keys come back, bit for bit.
      store->flush();
      std::set<uint64_t> before;
      std::vector<std::vector<unsigned char>> out;
      for (uint64_t k = 0; k < 20; ++k)
        if (load_n(*store, {0x1000 + k}, out) == 1) before.insert(k);
      store.reset();
      store = std::make_unique<DiskStore>(dir.path(), kSlots * l.record_bytes(), l, o);
      ASSERT_EQ(store->stats().blocks, before.size()) << "step " << step;
      ASSERT_EQ(store->stats().rejected, 0u);
      for (uint64_t k = 0; k < 20; ++k) {
        const size_t got = load_n(*store, {0x1000 + k}, out);
        ASSERT_EQ(got, before.count(k)) << "step " << step << " key " << k;
        if (got == 1) {
          ASSERT_EQ(out[0], record(k, newest[k]).bytes);
        }
      }
      held = before;
      evictions_seen = 0;
      ++reopens;
    }
    if (op < 95) total_evictions_at_check = std::max(total_evictions_at_check, evictions_seen);
  }
  // The run went through what it is meant to exercise.
  EXPECT_GT(reopens, 20);
  EXPECT_GT(total_evictions_at_check, 0u);
  EXPECT_GT(rejected_found, 0);
}

}  // namespace
}  // namespace kvc
