// Xxh3Stream (core/xxh3_stream.h): every path (baseline, AVX2 where the CPU
// has it) gives the system libxxhash's XXH3-64 of the concatenated pieces,
// whatever the lengths and cuts; the record checksum (block_record.h) is that
// value, so records written before the dispatched hash still load.
#include <gtest/gtest.h>

#include <xxhash.h>  // the system library's XXH3_64bits: the reference

#include <cstring>
#include <random>
#include <vector>

#include "core/block_record.h"
#include "core/xxh3_stream.h"

namespace kvc {
namespace {

std::vector<unsigned char> random_bytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<unsigned char> v(n);
  for (auto& b : v) b = static_cast<unsigned char>(rng());
  return v;
}

std::vector<Xxh3Stream::Path> paths() {
  std::vector<Xxh3Stream::Path> p{Xxh3Stream::Path::kBaseline};
  if (Xxh3Stream::available(Xxh3Stream::Path::kAvx2)) p.push_back(Xxh3Stream::Path::kAvx2);
  return p;
}

TEST(Xxh3Stream, EveryPathEqualsTheLibraryOnRandomLengthsAndCuts) {
  const std::vector<unsigned char> data = random_bytes(3 << 20, 7);
  std::mt19937_64 rng(11);
  std::vector<size_t> lengths = {0, 1, 3, 16, 17, 128, 129, 240, 241, 255, 256, 257, 1023, 1024,
                                 1025, 4095, 4096, 32 << 10, (32 << 10) + 192, 256 << 10,
                                 (2 << 20) + 192};
  for (int i = 0; i < 200; ++i) lengths.push_back(size_t(rng() % 70000));
  for (int i = 0; i < 8; ++i) lengths.push_back(size_t(rng() % data.size()));
  for (Xxh3Stream::Path path : paths()) {
    for (size_t n : lengths) {
      const size_t start = size_t(rng() % 64);  // unaligned starts too
      const unsigned char* p = data.data() + start;
      const uint64_t want = XXH3_64bits(p, n);
      Xxh3Stream one(path);
      one.update(p, n);
      ASSERT_EQ(one.digest(), want) << Xxh3Stream::name(path) << " " << n << " bytes";
      // The same bytes in random pieces (a read in pieces hashes so).
      Xxh3Stream cut(path);
      size_t at = 0;
      while (at < n) {
        const size_t piece = std::min(n - at, size_t(rng() % 300000) + 1);
        cut.update(p + at, piece);
        at += piece;
      }
      ASSERT_EQ(cut.digest(), want) << Xxh3Stream::name(path) << " " << n << " bytes in pieces";
    }
  }
}

TEST(Xxh3Stream, AvxAndBaselineAgreeOnRandomLengths) {
  if (!Xxh3Stream::available(Xxh3Stream::Path::kAvx2))
    GTEST_SKIP() << "no AVX2 path on this CPU or build";
  EXPECT_EQ(Xxh3Stream::best(), Xxh3Stream::Path::kAvx2);
  std::mt19937_64 rng(3);
  for (int i = 0; i < 300; ++i) {
    const size_t n = size_t(rng() % (i < 250 ? 5000 : 600000));
    const std::vector<unsigned char> d = random_bytes(n, rng());
    Xxh3Stream a(Xxh3Stream::Path::kAvx2), b(Xxh3Stream::Path::kBaseline);
    a.update(d.data(), n);
    b.update(d.data(), n);
    ASSERT_EQ(a.digest(), b.digest()) << n << " bytes";
  }
}

TEST(Xxh3Stream, DigestMayBeTakenMidStream) {
  const std::vector<unsigned char> d = random_bytes(10000, 5);
  for (Xxh3Stream::Path path : paths()) {
    Xxh3Stream s(path);
    s.update(d.data(), 4000);
    EXPECT_EQ(s.digest(), XXH3_64bits(d.data(), 4000));
    s.update(d.data() + 4000, 6000);
    EXPECT_EQ(s.digest(), XXH3_64bits(d.data(), 10000));
  }
}

// The record's checksum is XXH3-64 (seed 0) of bytes [0, 80) ++ [88, end):
// the value the system library gives, at the sizes the disk tier stores.
TEST(Xxh3Stream, RecordChecksumIsTheFormatsValue) {
  for (uint64_t payload : {uint64_t(16), uint64_t(1000), uint64_t(32) << 10,
                           uint64_t(256) << 10, uint64_t(2) << 20}) {
    RecordLayout layout;
    layout.fingerprint = 0xabc;
    layout.tokens_per_block = 16;
    layout.payload_bytes = payload;
    std::vector<int32_t> tokens(16, 9);
    RecordKey key;
    key.lookup_hash = 5;
    key.tokens = tokens.data();
    std::vector<unsigned char> r = random_bytes(layout.record_bytes(), payload);
    seal_record(layout, key, 1, r.data());
    std::vector<unsigned char> cat(r.begin(), r.begin() + 80);
    cat.insert(cat.end(), r.begin() + 88, r.end());
    uint64_t stored = 0;
    for (int i = 0; i < 8; ++i) stored |= uint64_t(r[80 + size_t(i)]) << (8 * i);
    EXPECT_EQ(stored, XXH3_64bits(cat.data(), cat.size())) << payload;
    EXPECT_EQ(check_record(layout, key, r.data(), r.size()), RecordCheck::kOk);
  }
}

}  // namespace
}  // namespace kvc
