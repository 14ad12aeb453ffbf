// Block transfer internals: the key blob's format (every flipped byte of a
// blob is refused, a version 1 blob is named, the refusals name the field
// and the first block that differs, the scope check is as strong as a chain
// digest per block), export holds counted by the invariant checker past the
// sequence's removal and reset_reuse, extra keys in the digest, a fork
// sibling's unpublished block, windowed groups, and an import published
// exactly as a commit (STORED events).
#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstring>
#include <string>
#include <vector>

#include "base/error.h"
#include "core/block_record.h"
#include "core/cache.h"
#include "core/portable_hash.h"
#include "core/store_keys.h"
#include "core/transfer_keys.h"
#include "manager_fixture.h"

namespace kvc {
namespace {

using test::seq;
using test::status_of;

CacheConfig config(uint64_t blocks, uint32_t T = 4) {
  CacheConfig c;
  c.num_layers = 2;
  c.kv_heads = {2};
  c.head_dim = 4;
  c.dtype = KVC_DTYPE_F32;
  c.tokens_per_block = T;
  c.max_tokens = blocks * T;
  return c;
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TransferKeys keys_of(const std::vector<int32_t>& tokens, uint32_t T, uint64_t fingerprint,
                     const std::string& scope = encode_scope(false, "", false, 0),
                     const std::vector<ExtraKey>& extras = {}) {
  TransferKeys k;
  k.fingerprint = fingerprint;
  k.tokens_per_block = T;
  k.num_blocks = tokens.size() / T;
  k.tokens.assign(tokens.begin(), tokens.begin() + k.num_blocks * T);
  fill_transfer_keys(7, scope, extras, k);
  return k;
}

// check_transfer_keys with the receiver's scope check over the blob's
// blocks.
void check_own(const unsigned char* blob, const std::vector<int32_t>& tokens, uint64_t num_blocks,
               uint32_t T, const std::string& scope = encode_scope(false, "", false, 0),
               const std::vector<ExtraKey>& extras = {}) {
  check_transfer_keys(blob, num_blocks, T, transfer_scope_check(scope, extras, num_blocks * T),
                      tokens.data());
}

// The blob's portable hashes are the chain block stores and events name
// blocks by (under the sender's seed), with a salt and extra keys.
TEST(TransferKeys, PortableHashesAreTheStoreKeysHashes) {
  const std::vector<int32_t> t = seq(500, 64);
  const std::string scope = encode_scope(true, "tenant", true, 42);
  std::vector<ExtraKey> extras = {ExtraKey{40, 2, "image-b"}, ExtraKey{3, 9, "image-a"}};
  sort_extra_keys(extras);
  const TransferKeys k = keys_of(t, 4, 1, scope, extras);
  const PortableHasher hasher(7);
  std::vector<StoreKey> full(16);
  chain_prompt_keys(hasher, 4, StoreKey{}, hasher.scope_digest(scope), scope_chain_digest(scope),
                    extras, t.data(), 0, 16, full.data(), false);
  ASSERT_EQ(k.hashes.size(), 16u);
  for (size_t b = 0; b < 16; ++b) EXPECT_EQ(k.hashes[b], full[b].hash) << b;
}

// PortableHasher::block (the blob's hashes, events, stores) is the
// algorithm events.h states, byte for byte, for every block size up to 40
// tokens (whole 16-byte copies and a remainder of 0 to 3 tokens).
TEST(TransferKeys, PortableBlockHashIsTheStatedAlgorithmForEveryBlockSize) {
  const std::vector<int32_t> t = seq(-20, 40);
  const PortableHasher hasher(0x5eed);
  for (uint32_t n = 1; n <= 40; ++n) {
    std::vector<unsigned char> bytes;
    auto put = [&](uint64_t v, int size) {
      for (int i = 0; i < size; ++i) bytes.push_back(static_cast<unsigned char>(v >> (8 * i)));
    };
    put(0x1111, 8);
    put(0x2222, 8);
    put(0x3333, 8);
    put(n, 4);
    for (uint32_t i = 0; i < n; ++i) put(static_cast<uint32_t>(t[i]), 4);
    EXPECT_EQ(hasher.block(0x1111, 0x2222, 0x3333, t.data(), n),
              XXH3_64bits_withSeed(bytes.data(), bytes.size(), 0x5eed))
        << n << " tokens";
  }
}

// The scope check is exactly as strong as version 1's chain digest per
// block: for scopes and extra keys in and around the exported range, the
// scope checks are equal if and only if every block's chain digest is
// (tokens equal).
TEST(TransferKeys, ScopeCheckEqualsIffEveryChainDigestIsEqual) {
  const uint32_t T = 4;
  const uint64_t N = 3;  // tokens [0, 12)
  const std::vector<int32_t> t = seq(10, 20);
  const std::vector<std::string> scopes = {encode_scope(false, "", false, 0),
                                           encode_scope(true, "", false, 0),
                                           encode_scope(true, "a", true, 1)};
  const std::vector<std::vector<ExtraKey>> extras = {
      {},
      {{12, 3, "x"}},                // past the range
      {{11, 3, "x"}},                // straddles its end
      {{11, 5, "x"}},                // another length past the end
      {{2, 1, "x"}},                 // inside
      {{2, 1, "y"}},                 // other data
      {{2, 1, "x"}, {14, 2, "z"}},   // inside, and past the range
      {{0, 12, "x"}},                // every block
  };
  const PortableHasher hasher(0);
  auto chain = [&](const std::string& scope, const std::vector<ExtraKey>& e) {
    std::vector<StoreKey> keys(N);
    chain_prompt_keys(hasher, T, StoreKey{}, 0, scope_chain_digest(scope), e, t.data(), 0, N,
                      keys.data());
    std::vector<ChainDigest> d;
    for (const StoreKey& k : keys) d.push_back(k.digest);
    return d;
  };
  for (const auto& sa : scopes)
    for (const auto& ea : extras)
      for (const auto& sb : scopes)
        for (const auto& eb : extras) {
          const bool same_chain = chain(sa, ea) == chain(sb, eb);
          const bool same_check =
              transfer_scope_check(sa, ea, N * T) == transfer_scope_check(sb, eb, N * T);
          EXPECT_EQ(same_check, same_chain);
        }
  // Extra keys only past the range compare equal to none; a key that
  // straddles the range's end is compared whole, as its block's digest
  // encodes it (offset, length, data).
  EXPECT_EQ(transfer_scope_check(scopes[0], extras[0], N * T),
            transfer_scope_check(scopes[0], extras[1], N * T));
  EXPECT_EQ(transfer_scope_check(scopes[0], extras[4], N * T),
            transfer_scope_check(scopes[0], extras[6], N * T));
  EXPECT_NE(transfer_scope_check(scopes[0], extras[2], N * T),
            transfer_scope_check(scopes[0], extras[3], N * T));
}

TEST(TransferKeys, BlobRoundTripsAndEveryFlippedByteIsRefused) {
  const std::vector<int32_t> t = seq(10, 12);
  const TransferKeys k = keys_of(t, 4, 0x1234);
  const std::string blob = encode_transfer_keys(k);
  ASSERT_EQ(blob.size(), transfer_keys_size(3, 4));
  ASSERT_EQ(blob.size(), 64u + 3 * (16 + 8) + 8);
  const auto* p = reinterpret_cast<const unsigned char*>(blob.data());
  EXPECT_EQ(check_transfer_frame(p, blob.size(), 0x1234, 4), 3u);
  EXPECT_NO_THROW(check_own(p, t, 3, 4));
  // The layout transfer.h documents: the scope check at 32, the tokens at
  // 64, the portable hashes after them.
  const ChainDigest check = transfer_scope_check(encode_scope(false, "", false, 0), {}, 12);
  EXPECT_EQ(std::memcmp(p + 32, check.bytes, 32), 0);
  EXPECT_EQ(std::memcmp(p + 64, t.data(), 48), 0);
  for (uint64_t b = 0; b < 3; ++b) {
    uint64_t h = 0;
    for (int i = 7; i >= 0; --i) h = (h << 8) | p[64 + 48 + 8 * b + size_t(i)];
    EXPECT_EQ(h, k.hashes[b]) << b;
  }
  for (size_t i = 0; i < blob.size(); ++i) {
    std::string bad = blob;
    bad[i] = char(bad[i] ^ 0x10);
    const auto* q = reinterpret_cast<const unsigned char*>(bad.data());
    EXPECT_EQ(status_of([&] {
                check_transfer_frame(q, bad.size(), 0x1234, 4);
                check_own(q, t, 3, 4);
              }),
              KVC_ERR_INVALID_ARGUMENT)
        << "byte " << i;
  }
  for (size_t n = 0; n < blob.size(); ++n)
    EXPECT_EQ(status_of([&] { check_transfer_frame(p, n, 0x1234, 4); }), KVC_ERR_INVALID_ARGUMENT)
        << n << " bytes";
}

// A blob whose frame is intact (checksum rewritten) but whose scope check
// or tokens were changed is refused by the content check.
TEST(TransferKeys, TamperedScopeCheckOrTokensAreRefusedPastTheFrame) {
  const std::vector<int32_t> t = seq(10, 12);
  const std::string blob = encode_transfer_keys(keys_of(t, 4, 0x1234));
  auto resum = [](std::string& b) {
    const uint64_t sum = XXH3_64bits(b.data(), b.size() - 8);
    for (int i = 0; i < 8; ++i) b[b.size() - 8 + size_t(i)] = char((sum >> (8 * i)) & 0xff);
  };
  for (size_t at : {size_t(32), size_t(63), size_t(64), size_t(64 + 47)}) {
    std::string bad = blob;
    bad[at] = char(bad[at] ^ 1);
    resum(bad);
    const auto* q = reinterpret_cast<const unsigned char*>(bad.data());
    EXPECT_EQ(check_transfer_frame(q, bad.size(), 0x1234, 4), 3u);
    EXPECT_EQ(status_of([&] { check_own(q, t, 3, 4); }), KVC_ERR_INVALID_ARGUMENT) << at;
  }
}

TEST(TransferKeys, AVersion1BlobIsRefusedNamingBothVersions) {
  const std::vector<int32_t> t = seq(10, 12);
  std::string blob = encode_transfer_keys(keys_of(t, 4, 0x1234));
  blob[8] = 1;  // u32 version, little endian
  const auto* p = reinterpret_cast<const unsigned char*>(blob.data());
  const std::string m = message_of([&] { check_transfer_frame(p, blob.size(), 0x1234, 4); });
  EXPECT_NE(m.find("format version 1 (a chain digest per block); this cache reads version 2"),
            std::string::npos)
      << m;
  // Also when the blob is shorter than a version 2 frame.
  EXPECT_NE(message_of([&] { check_transfer_frame(p, 20, 0x1234, 4); }).find("format version 1"),
            std::string::npos);
}

TEST(TransferKeys, RefusalsNameTheFieldAndTheFirstBlockThatDiffers) {
  const std::vector<int32_t> t = seq(10, 12);
  const std::string blob = encode_transfer_keys(keys_of(t, 4, 0x1234));
  const auto* p = reinterpret_cast<const unsigned char*>(blob.data());
  EXPECT_NE(message_of([&] { check_transfer_frame(p, blob.size(), 0x9999, 4); })
                .find("geometry fingerprint 0x0000000000001234 differs from this cache's "
                      "0x0000000000009999"),
            std::string::npos);
  EXPECT_NE(message_of([&] {
              check_transfer_frame(p, blob.size(), 0x1234, 8);
            }).find("tokens_per_block is 4; this cache's is 8"),
            std::string::npos);
  std::vector<int32_t> other = t;
  other[6] = 99;
  EXPECT_NE(message_of([&] {
              check_own(p, other, 3, 4);
            }).find("block 1 differs: token 6 is 16 in the key blob but 99 in tokens"),
            std::string::npos);
  // Same tokens, another scope or extra keys: the scope check differs.
  EXPECT_NE(message_of([&] {
              check_own(p, t, 3, 4, encode_scope(true, "", false, 0));
            }).find("scope check differs from the one computed from options over its 12 tokens "
                    "(another cache salt, LoRA id or extra keys)"),
            std::string::npos);
  const std::vector<ExtraKey> image = {{5, 3, "img"}};
  EXPECT_NE(message_of([&] {
              check_own(p, t, 3, 4, encode_scope(false, "", false, 0), image);
            }).find("another cache salt, LoRA id or extra keys"),
            std::string::npos);
  // Extra keys only past the blob's tokens: no difference.
  const std::vector<ExtraKey> later = {{12, 3, "img"}};
  EXPECT_NO_THROW(check_own(p, t, 3, 4, encode_scope(false, "", false, 0), later));
}

class TransferHold : public test::ManagerFixture {};

TEST_F(TransferHold, OutlivesTheSequenceAndResetReuseAndIsCountedByTheChecker) {
  make(config(8));
  add(1, seq(0, 9));
  commit(1, 9);
  BlockExport ex = cache_->export_sequence(1, 0);
  EXPECT_EQ(ex.num_blocks, 2u);
  remove(1);
  m().check_invariants();
  EXPECT_EQ(m().stats().in_use_blocks, 2u);
  EXPECT_EQ(status_of([&] { m().reset_reuse(); }), KVC_ERR_INVALID_STATE);
  // Pressure: six more blocks fit, a seventh does not (the held two stay).
  add(2, seq(100, 24));
  EXPECT_EQ(status_of([&] { add(3, seq(200, 4)); }), KVC_ERR_OUT_OF_BLOCKS);
  remove(2);
  EXPECT_EQ(add(4, seq(0, 9)), 8u);  // the held blocks are still the prefix's
  remove(4);
  cache_->release_export(ex.hold);
  EXPECT_EQ(status_of([&] { cache_->release_export(ex.hold); }), KVC_ERR_NOT_FOUND);
  m().reset_reuse();
  EXPECT_EQ(m().stats().free_blocks, 8u);
}

TEST_F(TransferHold, ABlockAForkSiblingSharesIsNotExportedUntilPublished) {
  make(config(16));
  add(1, seq(0, 6));
  m().fork(1, 2);
  extend(1, seq(50, 2));
  commit(1, 8);  // block 0 is shared with sibling 2: not published yet
  EXPECT_EQ(m().sequence(1).published, 0u);
  EXPECT_EQ(status_of([&] { cache_->export_sequence(1, 0); }), KVC_ERR_INVALID_STATE);
  EXPECT_NE(message_of([&] {
              cache_->export_sequence(1, 4);
            }).find("block 0 of sequence 1 is committed but not yet published"),
            std::string::npos);
  m().check_invariants();
  remove(2);
  commit(1, 8);  // held alone now: published
  BlockExport ex = cache_->export_sequence(1, 0);
  EXPECT_EQ(ex.num_blocks, 2u);
  cache_->release_export(ex.hold);
  m().check_invariants();
}

TEST_F(TransferHold, AWindowedGroupThatEvictedABlockCannotExportIt) {
  CacheConfig c = config(12);
  c.windows = {0, 4};  // layer 0 full, layer 1 a 4-token window
  make(c);
  add(1, seq(0, 17));
  commit(1, 17);  // layer 1 released blocks 0..2 (cached in their nodes)
  BlockExport all = cache_->export_sequence(1, 0);  // every group still holds them
  EXPECT_EQ(all.num_blocks, 4u);
  cache_->release_export(all.hold);
  // Pressure evicts the released windowed blocks (interior slots may go).
  for (int32_t id = 10; id < 40; ++id) {
    if (status_of([&] { add(uint64_t(id), seq(1000 * id, 8)); }) != KVC_OK) break;
    commit(uint64_t(id), 8);
    remove(uint64_t(id));
  }
  const kvc_status_t s = status_of([&] { cache_->export_sequence(1, 0); });
  EXPECT_EQ(s, KVC_ERR_UNSUPPORTED);
  EXPECT_NE(message_of([&] { cache_->export_sequence(1, 0); }).find("left the attention window"),
            std::string::npos);
  m().check_invariants();
}

TEST_F(TransferHold, AnImportIsPublishedAsACommitWithStoredEvents) {
  CacheConfig c = config(16);
  c.event_buffer_size = 64;
  make(c);
  Cache sender(config(16));
  const std::vector<int32_t> t = seq(40, 13);
  sender.manager().add(1, t.data(), t.size(), {}, nullptr);
  sender.manager().commit(1, t.size());
  const BlockExport ex = sender.export_sequence(1, 0);
  BlockImport im;
  Refusal refusal;
  ASSERT_TRUE(cache_->import_begin(9, t.data(), t.size(), {}, ex.keys.data(), ex.keys.size(), &im,
                                   &refusal));
  EXPECT_EQ(im.first_block, 0u);
  EXPECT_EQ(im.num_blocks, 3u);
  EXPECT_EQ(m().tree().size(), 0u);
  cache_->import_complete(im);
  m().check_invariants();
  EXPECT_EQ(m().tree().size(), 3u);
  std::vector<kvc_event_t> events(16);
  kvc_event_drain_t drain{};
  drain.struct_size = sizeof drain;
  m().drain_events(events.data(), events.size(), nullptr, 0, drain);
  uint64_t stored = 0;
  for (uint64_t i = 0; i < drain.events; ++i)
    if (events[i].kind == KVC_EVENT_STORED) ++stored;
  EXPECT_EQ(stored, 3u);
  sender.release_export(ex.hold);
}

}  // namespace
}  // namespace kvc
