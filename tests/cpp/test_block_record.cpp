// The stored-block record (block_record.h): SHA-256 against the FIPS test
// vectors, the chain digest's separation of scopes, and check_record's
// verdict on sound, torn, flipped, foreign and other-geometry records.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "core/block_key.h"
#include "core/block_record.h"
#include "core/cache_config.h"
#include "core/layer_groups.h"
#include "core/sha256.h"

namespace kvc {
namespace {

std::string hex(const Sha256Digest& d) {
  std::string s;
  char b[3];
  for (uint8_t x : d.bytes) {
    std::snprintf(b, sizeof b, "%02x", x);
    s += b;
  }
  return s;
}

TEST(Sha256, FipsVectors) {
  EXPECT_EQ(hex(sha256("", 0)),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(hex(sha256("abc", 3)),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const std::string two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  EXPECT_EQ(hex(sha256(two.data(), two.size())),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  const std::string million(1000000, 'a');
  EXPECT_EQ(hex(sha256(million.data(), million.size())),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, IncrementalEqualsOneShot) {
  std::string data;
  for (int i = 0; i < 300; ++i) data.push_back(char(i * 7));
  for (size_t cut : {size_t(0), size_t(1), size_t(55), size_t(56), size_t(63), size_t(64),
                     size_t(65), size_t(128), size_t(299)}) {
    Sha256 h;
    h.update(data.data(), cut);
    h.update(data.data() + cut, data.size() - cut);
    EXPECT_EQ(h.finish(), sha256(data.data(), data.size())) << cut;
  }
}

TEST(Sha256, HardwareAndPortableAgree) {
  // On a CPU with the SHA extensions the default path uses them.
  std::string data;
  uint32_t x = 1;
  for (int i = 0; i < 1000; ++i) {
    x = x * 1103515245u + 12345u;
    data.push_back(char(x >> 24));
  }
  for (size_t n : {size_t(0), size_t(3), size_t(55), size_t(64), size_t(119), size_t(1000)}) {
    Sha256 hw, sw(/*portable=*/true);
    hw.update(data.data(), n);
    sw.update(data.data(), n);
    EXPECT_EQ(hex(hw.finish()), hex(sw.finish())) << n << " bytes, hardware " << sha256_hardware();
  }
}

TEST(ChainDigest, ScopeTokensAndParentAllCount) {
  const std::vector<int32_t> t = {1, 2, 3, 4};
  const ChainDigest none = scope_chain_digest(encode_scope(false, "", false, 0));
  const ChainDigest salt_a = scope_chain_digest(encode_scope(true, "a", false, 0));
  const ChainDigest salt_b = scope_chain_digest(encode_scope(true, "b", false, 0));
  const ChainDigest lora_a = scope_chain_digest(encode_scope(false, "", true, 'a'));
  const ChainDigest root{};
  const ChainDigest base = block_chain_digest(root, none, ChainDigest{}, t.data(), 4);
  EXPECT_NE(base, block_chain_digest(root, salt_a, ChainDigest{}, t.data(), 4));
  EXPECT_NE(block_chain_digest(root, salt_a, ChainDigest{}, t.data(), 4),
            block_chain_digest(root, salt_b, ChainDigest{}, t.data(), 4));
  EXPECT_NE(salt_a, lora_a);
  EXPECT_NE(base, block_chain_digest(base, none, ChainDigest{}, t.data(), 4));
  EXPECT_NE(base, block_chain_digest(root, none, extra_chain_digest("x"), t.data(), 4));
  EXPECT_EQ(extra_chain_digest(""), ChainDigest{});
  const std::vector<int32_t> u = {1, 2, 3, 5};
  EXPECT_NE(base, block_chain_digest(root, none, ChainDigest{}, u.data(), 4));
  EXPECT_EQ(base, block_chain_digest(root, none, ChainDigest{}, t.data(), 4));
}

CacheConfig small_config() {
  CacheConfig c;
  c.num_layers = 2;
  c.kv_heads = {2};
  c.head_dim = 8;
  c.dtype = KVC_DTYPE_F32;
  c.tokens_per_block = 4;
  return c;
}

TEST(GeometryFingerprint, ChangesWithTheShape) {
  CacheConfig a = small_config();
  const uint64_t fa = geometry_fingerprint(a, group_layers(a));
  EXPECT_EQ(fa, geometry_fingerprint(a, group_layers(a)));
  CacheConfig b = a;
  b.dtype = KVC_DTYPE_F16;
  EXPECT_NE(fa, geometry_fingerprint(b, group_layers(b)));
  b = a;
  b.tokens_per_block = 8;
  EXPECT_NE(fa, geometry_fingerprint(b, group_layers(b)));
  b = a;
  b.layout = KVC_LAYOUT_HND;
  EXPECT_NE(fa, geometry_fingerprint(b, group_layers(b)));
  b = a;
  b.windows = {0, 8};
  EXPECT_NE(fa, geometry_fingerprint(b, group_layers(b)));
}

struct Sealed {
  RecordLayout layout;
  std::vector<int32_t> tokens = {10, 11, 12, 13};
  RecordKey key;
  std::vector<unsigned char> bytes;
  Sealed() {
    layout.fingerprint = 0x1234;
    layout.tokens_per_block = 4;
    layout.payload_bytes = 1000;
    key.lookup_hash = 77;
    key.digest = block_chain_digest(ChainDigest{}, scope_chain_digest("s"), ChainDigest{},
                                    tokens.data(), 4);
    key.tokens = tokens.data();
    bytes.resize(layout.record_bytes());
    for (size_t i = 0; i < layout.payload_bytes; ++i)
      bytes[layout.header_bytes() + i] = static_cast<unsigned char>(i * 31 + 5);
    seal_record(layout, key, 60, bytes.data());
  }
  RecordCheck check() const { return check_record(layout, key, bytes.data(), bytes.size()); }
};

TEST(BlockRecord, SealedRecordChecksAndReadsBack) {
  Sealed s;
  EXPECT_EQ(s.layout.header_bytes(), 192u);  // 128 + 16, rounded up to 64
  EXPECT_EQ(s.check(), RecordCheck::kOk);
  const RecordHeader h = read_record_header(s.bytes.data());
  EXPECT_TRUE(h.magic_ok);
  EXPECT_EQ(h.lookup_hash, 77u);
  EXPECT_EQ(h.priority, 60u);
  EXPECT_EQ(h.payload_bytes, 1000u);
  EXPECT_EQ(h.fingerprint, 0x1234u);
}

TEST(BlockRecord, EveryFlippedByteIsRefused) {
  Sealed s;
  for (size_t i = 0; i < s.bytes.size(); ++i) {
    s.bytes[i] ^= 0x10;
    EXPECT_NE(s.check(), RecordCheck::kOk) << "byte " << i;
    s.bytes[i] ^= 0x10;
  }
  EXPECT_EQ(s.check(), RecordCheck::kOk);
}

TEST(BlockRecord, TornRecordIsMalformed) {
  Sealed s;
  EXPECT_EQ(check_record(s.layout, s.key, s.bytes.data(), s.bytes.size() - 1),
            RecordCheck::kMalformed);
  // A record whose tail never reached the disk (zeros) fails its checksum.
  for (size_t i = s.bytes.size() / 2; i < s.bytes.size(); ++i) s.bytes[i] = 0;
  EXPECT_EQ(s.check(), RecordCheck::kChecksum);
}

TEST(BlockRecord, OtherKeyAndOtherGeometry) {
  Sealed s;
  RecordKey other = s.key;
  other.digest.bytes[5] ^= 1;
  EXPECT_EQ(check_record(s.layout, other, s.bytes.data(), s.bytes.size()), RecordCheck::kOtherKey);
  other = s.key;
  other.lookup_hash = 78;
  EXPECT_EQ(check_record(s.layout, other, s.bytes.data(), s.bytes.size()), RecordCheck::kOtherKey);
  std::vector<int32_t> t2 = s.tokens;
  t2[3] = 99;
  other = s.key;
  other.tokens = t2.data();
  EXPECT_EQ(check_record(s.layout, other, s.bytes.data(), s.bytes.size()), RecordCheck::kOtherKey);
  RecordLayout l2 = s.layout;
  l2.fingerprint = 0x9999;
  EXPECT_EQ(check_record(l2, s.key, s.bytes.data(), s.bytes.size()), RecordCheck::kGeometry);
}

}  // namespace
}  // namespace kvc
