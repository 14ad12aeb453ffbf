// The disk tier's store (src/store/disk_store.h) when its files are damaged
// or a write fails: a flipped byte, a slab cut short, a torn slot and files
// of the former format, slot reuse after an eviction, a crash in the middle
// of an overwrite, a failed write. Each is a miss (counted), never another
// record's bytes, and stays a miss after a reopen.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "store/disk_store.h"
#include "store_fixture.h"

namespace kvc {
namespace {

using testing_store::load_n;
using testing_store::TempDir;
using testing_store::test_layout;
using testing_store::TestRecord;

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
  DiskStore::Place at;
  ASSERT_TRUE(s.place_of(a.key.lookup_hash, &at));
  flip_byte(at.path, static_cast<off_t>(at.offset + l.header_bytes() + 100));
  std::vector<std::vector<unsigned char>> out;
  ASSERT_EQ(load_n(s, {a.key.lookup_hash}, out), 1u);  // the store moves bytes...
  const RecordCheck c = check_record(l, a.key, out[0].data(), out[0].size());
  EXPECT_EQ(c, RecordCheck::kChecksum);  // ...the check refuses them
  s.reject(a.key.lookup_hash, c);
  EXPECT_EQ(s.stats().rejected, 1u);
  EXPECT_EQ(s.stats().blocks, 0u);
  EXPECT_EQ(load_n(s, {a.key.lookup_hash}, out), 0u);
  EXPECT_FALSE(s.place_of(a.key.lookup_hash, &at));
  // The slot's magic is zeroed: a restart does not find the record again.
  s.flush();
  const int fd = ::open(at.path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  unsigned char magic[8];
  ASSERT_EQ(::pread(fd, magic, 8, off_t(at.offset)), 8);
  ::close(fd);
  EXPECT_EQ(std::vector<unsigned char>(magic, magic + 8), std::vector<unsigned char>(8, 0));
}

TEST(DiskStore, ARejectedRecordIsNotFoundAfterAReopen) {
  TempDir dir;
  const RecordLayout l = test_layout();
  TestRecord a(l, 1), b(l, 2);
  {
    DiskStore s(dir.path(), 1 << 20, l);
    s.put(a.key.lookup_hash, 35, a.bytes.data());
    s.put(b.key.lookup_hash, 35, b.bytes.data());
    s.flush();
    s.reject(a.key.lookup_hash, RecordCheck::kOtherKey);  // a sound frame the core refused
  }
  DiskStore s(dir.path(), 1 << 20, l);
  EXPECT_EQ(s.stats().blocks, 1u);
  EXPECT_EQ(s.stats().rejected, 0u);  // a zeroed slot is free, not torn
  std::vector<std::vector<unsigned char>> out;
  EXPECT_EQ(load_n(s, {a.key.lookup_hash}, out), 0u);
  ASSERT_EQ(load_n(s, {b.key.lookup_hash}, out), 1u);
  EXPECT_EQ(out[0], b.bytes);
}

TEST(DiskStore, ASlabCutShortBehindItsBackIsAnErrorAndForgotten) {
  TempDir dir;
  const RecordLayout l = test_layout();
  DiskStore s(dir.path(), 1 << 20, l);
  TestRecord a(l, 1), b(l, 2);
  s.put(a.key.lookup_hash, 35, a.bytes.data());
  s.put(b.key.lookup_hash, 35, b.bytes.data());
  s.flush();
  DiskStore::Place pa, pb;
  ASSERT_TRUE(s.place_of(a.key.lookup_hash, &pa));
  ASSERT_TRUE(s.place_of(b.key.lookup_hash, &pb));
  ASSERT_EQ(pb.offset, pa.offset + l.record_bytes());  // consecutive slots of one slab
  ASSERT_EQ(::truncate(pb.path.c_str(), off_t(pb.offset + 100)), 0);
  std::vector<std::vector<unsigned char>> out;
  // One preadv for the run comes up short: a is whole, b is not.
  EXPECT_EQ(load_n(s, {a.key.lookup_hash, b.key.lookup_hash}, out), 1u);
  EXPECT_EQ(out[0], a.bytes);
  EXPECT_EQ(s.stats().errors, 1u);
  EXPECT_EQ(s.stats().blocks, 1u);
  EXPECT_EQ(load_n(s, {b.key.lookup_hash}, out), 0u);
  EXPECT_EQ(s.stats().misses, 1u);
  // Its slot is free again and written whole by the next put.
  TestRecord c(l, 3);
  s.put(c.key.lookup_hash, 35, c.bytes.data());
  s.flush();
  ASSERT_EQ(load_n(s, {c.key.lookup_hash}, out), 1u);
  EXPECT_EQ(out[0], c.bytes);
}

TEST(DiskStore, TornSlotAndFilesOfTheFormerFormatAreDroppedAtOpen) {
  TempDir dir;
  const RecordLayout l = test_layout();
  TestRecord a(l, 1), b(l, 2), c(l, 3);
  DiskStore::Place pb, pc;
  {
    DiskStore s(dir.path(), 1 << 20, l);
    s.put(a.key.lookup_hash, 35, a.bytes.data());
    s.put(b.key.lookup_hash, 35, b.bytes.data());
    s.put(c.key.lookup_hash, 35, c.bytes.data());
    s.flush();
    ASSERT_TRUE(s.place_of(b.key.lookup_hash, &pb));
    ASSERT_TRUE(s.place_of(c.key.lookup_hash, &pc));
  }
  // b's header torn (garbage where the magic was), c cut short by the end of
  // the slab (a power loss before its pages reached the disk).
  flip_byte(pb.path, static_cast<off_t>(pb.offset + 3));
  ASSERT_EQ(::truncate(pc.path.c_str(), static_cast<off_t>(pc.offset + l.record_bytes() / 2)), 0);
  const std::string tmp = dir.path() + "/.tmp-000000000000feed-000000000000feed-0000000000001003";
  const std::string kvb = dir.path() + "/000000000000feed-0000000000001004.kvb";
  std::ofstream(tmp) << "half a record";
  std::ofstream(kvb) << "a block file of the former format";
  DiskStore s(dir.path(), 1 << 20, l);
  EXPECT_EQ(s.stats().blocks, 1u);
  EXPECT_EQ(s.stats().rejected, 2u);
  EXPECT_NE(::access(tmp.c_str(), F_OK), 0);
  EXPECT_NE(::access(kvb.c_str(), F_OK), 0);
  std::vector<std::vector<unsigned char>> out;
  EXPECT_EQ(load_n(s, {a.key.lookup_hash, b.key.lookup_hash}, out), 1u);
  EXPECT_EQ(load_n(s, {c.key.lookup_hash}, out), 0u);
}

// Bytes of `size` at `offset` of a file.
std::vector<unsigned char> read_at(const std::string& path, uint64_t offset, size_t size) {
  std::vector<unsigned char> b(size);
  const int fd = ::open(path.c_str(), O_RDONLY);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(::pread(fd, b.data(), size, off_t(offset)), ssize_t(size));
  ::close(fd);
  return b;
}

void write_at(const std::string& path, uint64_t offset, const unsigned char* p, size_t size) {
  const int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pwrite(fd, p, size, off_t(offset)), ssize_t(size));
  ::close(fd);
}

TEST(DiskStore, SlotReuseAfterEvictionNeverReturnsTheOldRecord) {
  TempDir dir;
  const RecordLayout l = test_layout();
  TestRecord a1(l, 1), a2(l, 2), b(l, 3);
  DiskStore::Place p1, pb;
  {
    DiskStore s(dir.path(), 2 * l.record_bytes(), l);
    s.put(a1.key.lookup_hash, 20, a1.bytes.data());
    s.put(a2.key.lookup_hash, 50, a2.bytes.data());
    s.flush();
    ASSERT_TRUE(s.place_of(a1.key.lookup_hash, &p1));
    s.put(b.key.lookup_hash, 50, b.bytes.data());  // evicts a1, takes its slot
    s.flush();
    ASSERT_TRUE(s.place_of(b.key.lookup_hash, &pb));
    EXPECT_EQ(pb.slot, p1.slot);
    EXPECT_EQ(read_at(pb.path, pb.offset, l.record_bytes()), b.bytes);
    std::vector<std::vector<unsigned char>> out;
    EXPECT_EQ(load_n(s, {a1.key.lookup_hash}, out), 0u);
    ASSERT_EQ(load_n(s, {b.key.lookup_hash, a2.key.lookup_hash}, out), 2u);
    EXPECT_EQ(out[0], b.bytes);
    EXPECT_EQ(out[1], a2.bytes);
    EXPECT_EQ(s.stats().evictions, 1u);
  }
  DiskStore s(dir.path(), 2 * l.record_bytes(), l);
  EXPECT_EQ(s.stats().blocks, 2u);
  std::vector<std::vector<unsigned char>> out;
  EXPECT_EQ(load_n(s, {a1.key.lookup_hash}, out), 0u);
  ASSERT_EQ(load_n(s, {b.key.lookup_hash}, out), 1u);
  EXPECT_EQ(out[0], b.bytes);
}

// A crash while b overwrote the slot a had held leaves a mix of the two:
// whichever header survived, the record fails its checksum (a counted miss),
// and a is never found under b's key nor b's bytes under a's.
TEST(DiskStore, ACrashMidOverwriteLeavesAMissNeverTheOtherRecord) {
  const RecordLayout l = test_layout();
  TestRecord a(l, 1), b(l, 2);
  for (bool header_of_b : {true, false}) {
    SCOPED_TRACE(header_of_b ? "b's header, a's payload tail" : "a's header, b's payload tail");
    TempDir dir;
    DiskStore::Place pa;
    {
      DiskStore s(dir.path(), 1 << 20, l);
      s.put(a.key.lookup_hash, 35, a.bytes.data());
      s.flush();
      ASSERT_TRUE(s.place_of(a.key.lookup_hash, &pa));
    }
    // The part of b that reached the disk before the crash.
    const size_t half = l.header_bytes() + l.payload_bytes / 2;
    if (header_of_b)
      write_at(pa.path, pa.offset, b.bytes.data(), half);
    else
      write_at(pa.path, pa.offset + half, b.bytes.data() + half, l.record_bytes() - half);
    DiskStore s(dir.path(), 1 << 20, l);
    const RecordKey& found_key = header_of_b ? b.key : a.key;
    const RecordKey& other_key = header_of_b ? a.key : b.key;
    std::vector<std::vector<unsigned char>> out;
    EXPECT_EQ(load_n(s, {other_key.lookup_hash}, out), 0u);
    ASSERT_EQ(load_n(s, {found_key.lookup_hash}, out), 1u);  // the header says so...
    const RecordCheck c = check_record(l, found_key, out[0].data(), out[0].size());
    EXPECT_EQ(c, RecordCheck::kChecksum);  // ...the check refuses it
    s.reject(found_key.lookup_hash, c);
    EXPECT_EQ(load_n(s, {found_key.lookup_hash}, out), 0u);
    EXPECT_EQ(s.stats().rejected, 1u);
    EXPECT_EQ(s.stats().blocks, 0u);
  }
}

TEST(DiskStore, AFailedWriteIsNotFoundAfterAReopen) {
  TempDir dir;
  const RecordLayout l = test_layout();
  TestRecord r1(l, 1), r2(l, 2), r3(l, 3);
  {
    DiskStoreOptions o;
    o.write_fault = [](uint64_t h) { return h == 0x1003 ? EIO : 0; };
    DiskStore s(dir.path(), 2 * l.record_bytes(), l, o);
    s.put(r1.key.lookup_hash, 35, r1.bytes.data());
    s.put(r2.key.lookup_hash, 35, r2.bytes.data());
    s.flush();
    s.put(r3.key.lookup_hash, 35, r3.bytes.data());  // evicts r1, then fails
    s.flush();
    const StoreStats st = s.stats();
    EXPECT_EQ(st.drops, 1u);
    EXPECT_EQ(st.errors, 1u);
    EXPECT_EQ(st.evictions, 1u);
    EXPECT_EQ(st.blocks, 1u);
  }
  DiskStore s(dir.path(), 2 * l.record_bytes(), l);
  EXPECT_EQ(s.stats().blocks, 1u);  // neither r3 nor the evicted r1 comes back
  std::vector<std::vector<unsigned char>> out;
  EXPECT_EQ(load_n(s, {r1.key.lookup_hash}, out), 0u);
  EXPECT_EQ(load_n(s, {r3.key.lookup_hash}, out), 0u);
  ASSERT_EQ(load_n(s, {r2.key.lookup_hash}, out), 1u);
  EXPECT_EQ(out[0], r2.bytes);
}

}  // namespace
}  // namespace kvc
