// Records hashed as they are read (block_record.h: RecordChecksum,
// check_record_summed; BlockStore::load_summed; the disk store's windowed
// reads, slab_files.h): the checksum of a record in any pieces equals the
// one-shot checksum, the summed check gives check_record's verdict, and a
// record with a byte flipped on disk in any window of a run is never a hit.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <condition_variable>
#include <mutex>
#include <random>

#include "store/disk_store.h"
#include "store_fixture.h"

namespace kvc {
namespace {

using testing_store::TempDir;
using testing_store::TestRecord;
using testing_store::test_layout;

uint64_t stored_sum(const std::vector<unsigned char>& r) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t(r[80 + size_t(i)]) << (8 * i);
  return v;
}

TEST(BlockRecordSummed, ChecksumInAnyPiecesEqualsOneShot) {
  std::mt19937_64 rng(1);
  for (uint64_t payload : {uint64_t(1), uint64_t(100), uint64_t(4096), uint64_t(70000)}) {
    const RecordLayout l = test_layout(payload);
    const TestRecord r(l, payload);
    const uint64_t want = record_checksum(r.bytes.data(), r.bytes.size());
    EXPECT_EQ(want, stored_sum(r.bytes));
    // Cuts everywhere around the stored checksum's bytes [80, 88), then random.
    std::vector<std::vector<size_t>> cuts;
    for (size_t c = 70; c <= 98; ++c) cuts.push_back({c});
    cuts.push_back({80, 88});
    cuts.push_back({81, 87});
    cuts.push_back({79, 80, 81, 82, 83, 84, 85, 86, 87, 88, 89});
    for (int i = 0; i < 50; ++i) {
      std::vector<size_t> c;
      for (int k = 0; k < 5; ++k) c.push_back(size_t(rng() % r.bytes.size()));
      std::sort(c.begin(), c.end());
      cuts.push_back(c);
    }
    for (const auto& c : cuts) {
      RecordChecksum sum;
      size_t at = 0;
      for (size_t to : c) {
        sum.update(r.bytes.data() + at, to - at);
        at = to;
      }
      sum.update(r.bytes.data() + at, r.bytes.size() - at);
      ASSERT_EQ(sum.bytes(), r.bytes.size());
      ASSERT_EQ(sum.digest(), want) << payload << " bytes, first cut " << c[0];
    }
  }
}

TEST(BlockRecordSummed, SummedCheckGivesCheckRecordsVerdict) {
  const RecordLayout l = test_layout(1000);
  TestRecord r(l, 3);
  auto summed = [&](const RecordKey& key, const RecordLayout& layout, size_t size) {
    return check_record_summed(layout, key, r.bytes.data(), size,
                               record_checksum(r.bytes.data(), size));
  };
  EXPECT_EQ(summed(r.key, l, r.bytes.size()), RecordCheck::kOk);
  for (size_t i = 0; i < r.bytes.size(); ++i) {
    r.bytes[i] ^= 0x20;
    const RecordCheck c = summed(r.key, l, r.bytes.size());
    EXPECT_NE(c, RecordCheck::kOk) << "byte " << i;
    EXPECT_EQ(c, check_record(l, r.key, r.bytes.data(), r.bytes.size())) << "byte " << i;
    r.bytes[i] ^= 0x20;
  }
  // A sum that is not these bytes' (a caller's bug) is never a hit either.
  EXPECT_EQ(check_record_summed(l, r.key, r.bytes.data(), r.bytes.size(), stored_sum(r.bytes) ^ 1),
            RecordCheck::kChecksum);
  RecordKey other = r.key;
  other.lookup_hash ^= 1;
  EXPECT_EQ(summed(other, l, r.bytes.size()), RecordCheck::kOtherKey);
  RecordLayout l2 = l;
  l2.fingerprint ^= 1;
  EXPECT_EQ(summed(r.key, l2, r.bytes.size()), RecordCheck::kGeometry);
  EXPECT_EQ(summed(r.key, l, r.bytes.size() - 1), RecordCheck::kMalformed);
}

// Loads with load_summed(); checks every returned record's sum against its
// bytes and the summed check.
size_t load_summed_n(BlockStore& s, const std::vector<TestRecord>& recs, size_t first, size_t n,
                     std::vector<std::vector<unsigned char>>& out, std::vector<uint64_t>& sums) {
  out.assign(n, std::vector<unsigned char>(s.layout().record_bytes()));
  sums.assign(n, 0);
  std::vector<unsigned char*> ptrs;
  std::vector<uint64_t> hashes;
  for (size_t i = 0; i < n; ++i) {
    ptrs.push_back(out[i].data());
    hashes.push_back(recs[first + i].key.lookup_hash);
  }
  return s.load_summed(hashes.data(), n, ptrs.data(), sums.data());
}

// Sizes around the read window (SlabFiles::kHashWindow): tiny records (a
// window is cut at 64 pieces), records that end inside a window, records
// larger than one.
TEST(DiskStoreSummed, SumsEqualEachRecordsChecksumAtEverySize) {
  const uint64_t w = SlabFiles::kHashWindow;
  for (uint64_t payload : {uint64_t(16), uint64_t(4096), uint64_t(100000), w - 100, w + 12345,
                           2 * w + 1}) {
    TempDir dir;
    const RecordLayout l = test_layout(payload);
    const size_t n = payload < 1000 ? 150 : 7;
    DiskStore s(dir.path(), uint64_t(n) * l.record_bytes(), l);
    std::vector<TestRecord> recs;
    for (size_t i = 0; i < n; ++i) recs.emplace_back(l, i + 1);
    for (const TestRecord& r : recs) ASSERT_TRUE(s.put(r.key.lookup_hash, 35, r.bytes.data()));
    s.flush();
    std::vector<std::vector<unsigned char>> out;
    std::vector<uint64_t> sums;
    ASSERT_EQ(load_summed_n(s, recs, 0, n, out, sums), n) << payload;
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(out[i], recs[i].bytes) << payload << " record " << i;
      ASSERT_EQ(sums[i], record_checksum(out[i].data(), out[i].size())) << payload << " " << i;
      ASSERT_EQ(check_record_summed(l, recs[i].key, out[i].data(), out[i].size(), sums[i]),
                RecordCheck::kOk);
    }
    // A run that starts mid-way (other window boundaries).
    ASSERT_EQ(load_summed_n(s, recs, 1, n - 2, out, sums), n - 2);
    for (size_t i = 0; i < n - 2; ++i)
      ASSERT_EQ(sums[i], stored_sum(recs[i + 1].bytes)) << payload << " " << i;
  }
}

// Records still queued (the worker held in its write) are copied from the
// queue: summed too.
TEST(DiskStoreSummed, QueuedRecordsAreSummedToo) {
  TempDir dir;
  const RecordLayout l = test_layout(5000);
  std::mutex mu;
  std::condition_variable cv;
  bool entered = false, release = false;
  DiskStoreOptions o;
  o.write_fault = [&](uint64_t) {
    std::unique_lock<std::mutex> lock(mu);
    entered = true;
    cv.notify_all();
    cv.wait(lock, [&] { return release; });
    return 0;
  };
  DiskStore s(dir.path(), 1 << 20, l, o);
  std::vector<TestRecord> recs;
  for (size_t i = 0; i < 3; ++i) recs.emplace_back(l, i + 1);
  for (const TestRecord& r : recs) ASSERT_TRUE(s.put(r.key.lookup_hash, 35, r.bytes.data()));
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return entered; });
  }
  std::vector<std::vector<unsigned char>> out;
  std::vector<uint64_t> sums;
  EXPECT_EQ(load_summed_n(s, recs, 0, 3, out, sums), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(out[i], recs[i].bytes);
    EXPECT_EQ(sums[i], stored_sum(recs[i].bytes));
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
  }
  cv.notify_all();
  s.flush();
  EXPECT_EQ(load_summed_n(s, recs, 0, 3, out, sums), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(sums[i], stored_sum(recs[i].bytes));
}

void flip_byte(const std::string& path, off_t at) {
  const int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  unsigned char b = 0;
  ASSERT_EQ(::pread(fd, &b, 1, at), 1);
  b ^= 0x40;
  ASSERT_EQ(::pwrite(fd, &b, 1, at), 1);
  ::close(fd);
}

// The middle record of a run of three, with one byte flipped on disk at
// positions in each of its windows (and the header, the stored checksum):
// its summed check fails, its neighbours' pass.
TEST(DiskStoreSummed, AFlippedByteInAnyWindowIsNeverAHit) {
  TempDir dir;
  const uint64_t w = SlabFiles::kHashWindow;
  const RecordLayout l = test_layout(2 * w + 777);
  DiskStore s(dir.path(), 3 * l.record_bytes(), l);
  std::vector<TestRecord> recs;
  for (size_t i = 0; i < 3; ++i) recs.emplace_back(l, i + 1);
  for (const TestRecord& r : recs) ASSERT_TRUE(s.put(r.key.lookup_hash, 35, r.bytes.data()));
  s.flush();
  DiskStore::Place at;
  ASSERT_TRUE(s.place_of(recs[1].key.lookup_hash, &at));
  // Offsets within the middle record; its windows start where the run's do
  // (the run starts at record 0).
  const uint64_t size = l.record_bytes();
  const uint64_t run_at = size;  // the record's first byte within the run
  std::vector<uint64_t> spots = {0, 9, 40, 80, 87, 88, 130, l.header_bytes(), size - 1};
  for (uint64_t k = 1; k <= 3; ++k) {
    const uint64_t boundary = k * w;  // a window boundary of the run
    if (boundary > run_at && boundary < run_at + size) {
      spots.push_back(boundary - run_at - 1);
      spots.push_back(boundary - run_at);
    }
  }
  std::vector<std::vector<unsigned char>> out;
  std::vector<uint64_t> sums;
  for (uint64_t spot : spots) {
    flip_byte(at.path, off_t(at.offset + spot));
    ASSERT_EQ(load_summed_n(s, recs, 0, 3, out, sums), 3u) << spot;  // the store moves bytes...
    EXPECT_EQ(check_record_summed(l, recs[0].key, out[0].data(), size, sums[0]), RecordCheck::kOk);
    const RecordCheck c = check_record_summed(l, recs[1].key, out[1].data(), size, sums[1]);
    EXPECT_NE(c, RecordCheck::kOk) << "byte " << spot;  // ...the check refuses them
    EXPECT_EQ(c, check_record(l, recs[1].key, out[1].data(), size)) << "byte " << spot;
    EXPECT_EQ(check_record_summed(l, recs[2].key, out[2].data(), size, sums[2]), RecordCheck::kOk);
    flip_byte(at.path, off_t(at.offset + spot));  // back
  }
  ASSERT_EQ(load_summed_n(s, recs, 0, 3, out, sums), 3u);
  EXPECT_EQ(check_record_summed(l, recs[1].key, out[1].data(), size, sums[1]), RecordCheck::kOk);
}

}  // namespace
}  // namespace kvc
