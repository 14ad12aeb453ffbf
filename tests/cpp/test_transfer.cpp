// Block transfer internals: the key blob's format (every flipped byte of a
// blob is refused, the refusals name the field and the first block that
// differs), export holds counted by the invariant checker past the
// sequence's removal and reset_reuse, extra keys in the digest, a fork
// sibling's unpublished block, windowed groups, and an import published
// exactly as a commit (STORED events).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "base/error.h"
#include "core/block_record.h"
#include "core/cache.h"
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
  k.keys.resize(k.num_blocks);
  chain_transfer_keys(7, T, scope, extras, tokens.data(), k.num_blocks, k.keys.data());
  return k;
}

// The receiver's digest-only chain (import begin) is the blob's digests,
// with a salt and extra keys in the scope.
TEST(TransferKeys, DigestOnlyChainEqualsTheBlobsDigests) {
  const std::vector<int32_t> t = seq(500, 64);
  const std::string scope = encode_scope(true, "tenant", true, 42);
  const std::vector<ExtraKey> extras = {ExtraKey{3, 9, "image-a"}, ExtraKey{40, 2, "image-b"}};
  std::vector<StoreKey> full(16), digests(16);
  chain_transfer_keys(7, 4, scope, extras, t.data(), 16, full.data());
  chain_transfer_digests(4, scope, extras, t.data(), 16, digests.data());
  for (size_t b = 0; b < 16; ++b) {
    EXPECT_EQ(digests[b].digest, full[b].digest) << b;
    EXPECT_EQ(digests[b].hash, 0u) << b;
  }
}

TEST(TransferKeys, BlobRoundTripsAndEveryFlippedByteIsRefused) {
  const std::vector<int32_t> t = seq(10, 12);
  const TransferKeys k = keys_of(t, 4, 0x1234);
  const std::string blob = encode_transfer_keys(k);
  ASSERT_EQ(blob.size(), transfer_keys_size(3, 4));
  ASSERT_EQ(blob.size(), 32u + 3 * (16 + 40) + 8);
  const auto* p = reinterpret_cast<const unsigned char*>(blob.data());
  EXPECT_EQ(check_transfer_frame(p, blob.size(), 0x1234, 4), 3u);
  EXPECT_NO_THROW(check_transfer_keys(p, k));
  // The digests are those block stores key blocks by (block_record.h).
  ChainDigest parent;
  const ChainDigest scope = scope_chain_digest(encode_scope(false, "", false, 0));
  for (uint64_t b = 0; b < 3; ++b) {
    parent = block_chain_digest(parent, scope, extra_chain_digest(""), t.data() + 4 * b, 4);
    EXPECT_EQ(std::memcmp(p + 32 + 48 + 40 * b, parent.bytes, 32), 0) << b;
  }
  for (size_t i = 0; i < blob.size(); ++i) {
    std::string bad = blob;
    bad[i] = char(bad[i] ^ 0x10);
    const auto* q = reinterpret_cast<const unsigned char*>(bad.data());
    EXPECT_EQ(status_of([&] {
                check_transfer_frame(q, bad.size(), 0x1234, 4);
                check_transfer_keys(q, k);
              }),
              KVC_ERR_INVALID_ARGUMENT)
        << "byte " << i;
  }
  for (size_t n = 0; n < blob.size(); ++n)
    EXPECT_EQ(status_of([&] { check_transfer_frame(p, n, 0x1234, 4); }), KVC_ERR_INVALID_ARGUMENT)
        << n << " bytes";
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
              check_transfer_keys(p, keys_of(other, 4, 0x1234));
            }).find("block 1 differs: token 6 is 16 in the key blob but 99 in tokens"),
            std::string::npos);
  // Same tokens, another scope or extra keys: the digest differs.
  EXPECT_NE(message_of([&] {
              check_transfer_keys(p, keys_of(t, 4, 0x1234, encode_scope(true, "", false, 0)));
            }).find("block 0 differs: its chain digest"),
            std::string::npos);
  const std::vector<ExtraKey> image = {{5, 3, "img"}};
  EXPECT_NE(message_of([&] {
              check_transfer_keys(p,
                                  keys_of(t, 4, 0x1234, encode_scope(false, "", false, 0), image));
            }).find("block 1 differs: its chain digest"),
            std::string::npos);
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
