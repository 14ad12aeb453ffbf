// The disk tier's store (src/store/disk_store.h) on its own: round trip bit
// for bit, persistence across a reopen, the prioritized LRU budget, the
// bounded queue and failed writes (drops counted), torn and flipped files
// (never a hit), and the precise refusals at open. No sleeps: a write fault
// hook holds the worker where a test needs it, flush() waits for it.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <fstream>
#include <mutex>

#include "base/error.h"
#include "store/disk_store.h"
#include "store_fixture.h"

namespace kvc {
namespace {

using testing_store::TempDir;
using testing_store::TestRecord;
using testing_store::test_layout;

// Loads hashes[0..n) into fresh buffers; returns the leading count.
size_t load_n(BlockStore& s, const std::vector<uint64_t>& hashes,
              std::vector<std::vector<unsigned char>>& out) {
  out.assign(hashes.size(), std::vector<unsigned char>(s.layout().record_bytes()));
  std::vector<unsigned char*> ptrs;
  for (auto& b : out) ptrs.push_back(b.data());
  return s.load(hashes.data(), hashes.size(), ptrs.data());
}

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
  size_t kvb = 0;
  for (const std::string& f : dir.files()) kvb += f.size() > 4 && f.substr(f.size() - 4) == ".kvb";
  EXPECT_EQ(kvb, 3u);
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

void flip_byte(const std::string& path, off_t at) {
  const int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  unsigned char c = 0;
  ASSERT_EQ(::pread(fd, &c, 1, at), 1);
  c ^= 0x40;
  ASSERT_EQ(::pwrite(fd, &c, 1, at), 1);
  ::close(fd);
}

TEST(DiskStore, FlippedByteIsRejectedByTheCheckAndForgotten) {
  TempDir dir;
  const RecordLayout l = test_layout();
  DiskStore s(dir.path(), 1 << 20, l);
  TestRecord a(l, 1);
  s.put(a.key.lookup_hash, 35, a.bytes.data());
  s.flush();
  flip_byte(s.path_of(a.key.lookup_hash), static_cast<off_t>(l.header_bytes() + 100));
  std::vector<std::vector<unsigned char>> out;
  ASSERT_EQ(load_n(s, {a.key.lookup_hash}, out), 1u);  // the store moves bytes...
  const RecordCheck c = check_record(l, a.key, out[0].data(), out[0].size());
  EXPECT_EQ(c, RecordCheck::kChecksum);                 // ...the check refuses them
  s.reject(a.key.lookup_hash, c);
  EXPECT_EQ(s.stats().rejected, 1u);
  EXPECT_EQ(s.stats().blocks, 0u);
  EXPECT_EQ(load_n(s, {a.key.lookup_hash}, out), 0u);
  EXPECT_NE(::access(s.path_of(a.key.lookup_hash).c_str(), F_OK), 0);
}

TEST(DiskStore, AFileRemovedBehindItsBackIsAMissAndForgotten) {
  TempDir dir;
  const RecordLayout l = test_layout();
  DiskStore s(dir.path(), 1 << 20, l);
  TestRecord a(l, 1);
  s.put(a.key.lookup_hash, 35, a.bytes.data());
  s.flush();
  ASSERT_EQ(::unlink(s.path_of(a.key.lookup_hash).c_str()), 0);
  std::vector<std::vector<unsigned char>> out;
  EXPECT_EQ(load_n(s, {a.key.lookup_hash}, out), 0u);
  EXPECT_EQ(s.stats().misses, 1u);
  EXPECT_EQ(s.stats().errors, 0u);
  EXPECT_EQ(s.stats().blocks, 0u);
}

TEST(DiskStore, TornFileAndLeftoverTemporaryAreRemovedAtOpen) {
  TempDir dir;
  const RecordLayout l = test_layout();
  TestRecord a(l, 1), b(l, 2);
  std::string torn;
  {
    DiskStore s(dir.path(), 1 << 20, l);
    s.put(a.key.lookup_hash, 35, a.bytes.data());
    s.put(b.key.lookup_hash, 35, b.bytes.data());
    s.flush();
    torn = s.path_of(b.key.lookup_hash);
  }
  ASSERT_EQ(::truncate(torn.c_str(), static_cast<off_t>(l.record_bytes() / 2)), 0);
  const std::string tmp = dir.path() + "/.tmp-000000000000feed-000000000000feed-0000000000001003";
  std::ofstream(tmp) << "half a record";
  DiskStore s(dir.path(), 1 << 20, l);
  EXPECT_EQ(s.stats().blocks, 1u);
  EXPECT_EQ(s.stats().rejected, 1u);
  EXPECT_NE(::access(torn.c_str(), F_OK), 0);
  EXPECT_NE(::access(tmp.c_str(), F_OK), 0);
  std::vector<std::vector<unsigned char>> out;
  EXPECT_EQ(load_n(s, {a.key.lookup_hash, b.key.lookup_hash}, out), 1u);
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

}  // namespace
}  // namespace kvc
