#include "core/block_record.h"

#include <algorithm>
#include <cstring>

#ifndef XXH_INLINE_ALL
#define XXH_INLINE_ALL
#endif
#include <xxhash.h>

#include "core/cache_config.h"
#include "core/layer_groups.h"
#include "core/xxh3_stream.h"

namespace kvc {

namespace {

constexpr char kMagic[8] = {'K', 'V', 'C', 'B', 'L', 'K', 'v', '1'};
constexpr size_t kChecksumAt = 80;

void put_u32(unsigned char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
void put_u64(unsigned char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
uint32_t get_u32(const unsigned char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t(p[i]) << (8 * i);
  return v;
}
uint64_t get_u64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t(p[i]) << (8 * i);
  return v;
}

// Appends little-endian integers (the fingerprint's canonical encoding).
struct Bytes {
  std::string s;
  void u32(uint32_t v) {
    unsigned char b[4];
    put_u32(b, v);
    s.append(reinterpret_cast<const char*>(b), 4);
  }
  void u64(uint64_t v) {
    unsigned char b[8];
    put_u64(b, v);
    s.append(reinterpret_cast<const char*>(b), 8);
  }
};

ChainDigest tagged_digest(const char (&tag)[13], const std::string& bytes) {
  Sha256 h;
  h.update(tag, 12);
  h.update(bytes.data(), bytes.size());
  return h.finish();
}

}  // namespace

ChainDigest scope_chain_digest(const std::string& scope_bytes) {
  return tagged_digest("kvc.scope.v1", scope_bytes);
}

ChainDigest extra_chain_digest(const std::string& extra_bytes) {
  if (extra_bytes.empty()) return ChainDigest{};
  return tagged_digest("kvc.extra.v1", extra_bytes);
}

ChainDigest block_chain_digest(const ChainDigest& parent, const ChainDigest& scope,
                               const ChainDigest& extra, const int32_t* tokens,
                               uint32_t num_tokens) {
  Sha256 h;
  h.update("kvc.block.v1", 12);
  h.update(parent.bytes, 32);
  h.update(scope.bytes, 32);
  h.update(extra.bytes, 32);
  unsigned char n[4];
  put_u32(n, num_tokens);
  h.update(n, 4);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  h.update(tokens, 4 * size_t(num_tokens));
#else
  for (uint32_t i = 0; i < num_tokens; ++i) {
    put_u32(n, static_cast<uint32_t>(tokens[i]));
    h.update(n, 4);
  }
#endif
  return h.finish();
}

uint64_t geometry_fingerprint(const CacheConfig& c, const LayerGrouping& g) {
  Bytes b;
  b.s = "kvc.geometry";
  b.u32(kRecordVersion);
  b.u32(c.num_layers);
  for (uint32_t l = 0; l < c.num_layers; ++l) {
    b.u32(c.kv_heads_of(l));
    b.u32(c.window_of(l));
  }
  b.u32(c.head_dim);
  b.u32(static_cast<uint32_t>(c.dtype));
  b.u32(c.kv_factor);
  b.u32(static_cast<uint32_t>(c.layout));
  b.u32(c.tokens_per_block);
  if (c.num_ranks() > 1) b.u32(c.num_ranks());  // one rank: the fingerprint of before
  if (c.mixed_kv_geometry()) {  // one geometry: the fingerprint of before
    for (uint32_t l = 0; l < c.num_layers; ++l) {
      b.u32(c.head_dim_of(l));
      b.u32(static_cast<uint32_t>(c.dtype_of(l)));
      b.u32(c.kv_factor_of(l));
      b.u32(static_cast<uint32_t>(c.layout_of(l)));
    }
  }
  b.u32(static_cast<uint32_t>(g.groups.size()));
  for (const LayerGroup& grp : g.groups) {
    b.u64(g.pools[grp.pool].block_bytes);
    b.u32(static_cast<uint32_t>(grp.layers.size()));
    for (uint32_t l : grp.layers) b.u32(l);
  }
  return XXH3_64bits(b.s.data(), b.s.size());
}

void seal_record(const RecordLayout& layout, const RecordKey& key, uint32_t priority,
                 unsigned char* record) {
  const size_t header = layout.header_bytes();
  std::memset(record, 0, header);
  std::memcpy(record, kMagic, 8);
  put_u32(record + 8, kRecordVersion);
  put_u32(record + 12, static_cast<uint32_t>(header));
  put_u64(record + 16, layout.fingerprint);
  put_u64(record + 24, key.lookup_hash);
  put_u64(record + 32, layout.payload_bytes);
  put_u32(record + 40, layout.tokens_per_block);
  put_u32(record + 44, priority);
  std::memcpy(record + 48, key.digest.bytes, 32);
  unsigned char* t = record + kRecordFixedHeader;
  for (uint32_t i = 0; i < layout.tokens_per_block; ++i)
    put_u32(t + 4 * i, static_cast<uint32_t>(key.tokens[i]));
  put_u64(record + kChecksumAt, record_checksum(record, layout.record_bytes()));
}

RecordHeader read_record_header(const unsigned char* r) {
  RecordHeader h;
  h.magic_ok = std::memcmp(r, kMagic, 8) == 0;
  h.version = get_u32(r + 8);
  h.header_bytes = get_u32(r + 12);
  h.fingerprint = get_u64(r + 16);
  h.lookup_hash = get_u64(r + 24);
  h.payload_bytes = get_u64(r + 32);
  h.num_tokens = get_u32(r + 40);
  h.priority = get_u32(r + 44);
  return h;
}

void RecordChecksum::update(const unsigned char* piece, size_t size) {
  // Bytes [80, 88) (the stored checksum) are not hashed.
  const uint64_t from = at_, to = at_ + size;
  at_ = to;
  if (to <= kChecksumAt || from >= kChecksumAt + 8) {
    stream_.update(piece, size);
    return;
  }
  if (from < kChecksumAt) stream_.update(piece, size_t(kChecksumAt - from));
  if (to > kChecksumAt + 8) {
    const uint64_t skip = std::max<uint64_t>(from, kChecksumAt + 8) - from;
    stream_.update(piece + skip, size_t(size - skip));
  }
}

// XXH3-64 of [0, 80) ++ [88, size), on the CPU's widest path (xxh3_stream.h:
// the same value on every path); RecordChecksum is its only implementation.
uint64_t record_checksum(const unsigned char* record, size_t size) {
  RecordChecksum sum;
  sum.update(record, size);
  return sum.digest();
}

namespace {

// The frame without the checksum: magic, version, fingerprint, sizes.
RecordCheck check_frame_fields(const RecordLayout& layout, const unsigned char* record,
                               size_t size) {
  if (size != layout.record_bytes() || size < kRecordFixedHeader) return RecordCheck::kMalformed;
  const RecordHeader h = read_record_header(record);
  if (!h.magic_ok || h.version != kRecordVersion) return RecordCheck::kMalformed;
  if (h.fingerprint != layout.fingerprint) return RecordCheck::kGeometry;
  if (h.header_bytes != layout.header_bytes() || h.payload_bytes != layout.payload_bytes ||
      h.num_tokens != layout.tokens_per_block)
    return RecordCheck::kMalformed;
  return RecordCheck::kOk;
}

RecordCheck check_key(const RecordLayout& layout, const RecordKey& key,
                      const unsigned char* record) {
  if (get_u64(record + 24) != key.lookup_hash ||
      std::memcmp(record + 48, key.digest.bytes, 32) != 0)
    return RecordCheck::kOtherKey;
  const unsigned char* t = record + kRecordFixedHeader;
  for (uint32_t i = 0; i < layout.tokens_per_block; ++i)
    if (get_u32(t + 4 * i) != static_cast<uint32_t>(key.tokens[i])) return RecordCheck::kOtherKey;
  return RecordCheck::kOk;
}

}  // namespace

RecordCheck check_record_frame(const RecordLayout& layout, const unsigned char* record,
                               size_t size) {
  const RecordCheck fields = check_frame_fields(layout, record, size);
  if (fields != RecordCheck::kOk) return fields;
  if (get_u64(record + kChecksumAt) != record_checksum(record, size)) return RecordCheck::kChecksum;
  return RecordCheck::kOk;
}

RecordCheck check_record(const RecordLayout& layout, const RecordKey& key,
                         const unsigned char* record, size_t size) {
  const RecordCheck frame = check_record_frame(layout, record, size);
  if (frame != RecordCheck::kOk) return frame;
  return check_key(layout, key, record);
}

RecordCheck check_record_summed(const RecordLayout& layout, const RecordKey& key,
                                const unsigned char* record, size_t size, uint64_t sum) {
  const RecordCheck fields = check_frame_fields(layout, record, size);
  if (fields != RecordCheck::kOk) return fields;
  if (get_u64(record + kChecksumAt) != sum) return RecordCheck::kChecksum;
  return check_key(layout, key, record);
}

const char* record_check_name(RecordCheck c) {
  switch (c) {
    case RecordCheck::kOk: return "ok";
    case RecordCheck::kMalformed: return "malformed";
    case RecordCheck::kGeometry: return "geometry";
    case RecordCheck::kChecksum: return "checksum";
    case RecordCheck::kOtherKey: return "other key";
  }
  return "?";
}

}  // namespace kvc
