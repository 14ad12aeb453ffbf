// The record a block store (block_store.h) keeps for one cached block: a
// fixed header, then the payload (the block's bytes, every layer group's
// block of the tree position, in group order). The format is the same for
// every store (disk files, Redis values), so a store moves opaque bytes and
// the core alone decides whether a record may become KV (check_record).
//
// Identity. A block's full key is its chain digest:
//   scope  = SHA-256("kvc.scope.v1" || encoded scope)           (block_key.h)
//   extra  = SHA-256("kvc.extra.v1" || encoded extra keys), or 32 zero bytes
//            when no extra key overlaps the block
//   digest = SHA-256("kvc.block.v1" || parent digest (32 zero bytes for a
//            first block) || scope || extra || u32 num_tokens || tokens)
// integers little endian. SHA-256, not XXH3-128: a shared store is written
// by other processes, and a prompt crafted so that its blocks' digest equals
// another prompt's would otherwise hand its KV to that prompt's requests
// (prefix-cache poisoning through a collision). The salt, the LoRA id and
// the extra keys are in the digest, so salted scopes never meet. The
// portable hash (events.h, seeded) is the record's address in a store (a
// file name, a Redis key); it never decides a hit.
//
// Layout (little endian; header_bytes is 128 + 4 * tokens_per_block rounded
// up to 64, so the payload starts 64-byte aligned):
//   0   u8[8]  magic "KVCBLKv1"
//   8   u32    format version (kRecordVersion)
//   12  u32    header_bytes
//   16  u64    geometry fingerprint (geometry_fingerprint)
//   24  u64    lookup hash (the portable hash)
//   32  u64    payload_bytes
//   40  u32    num_tokens (== tokens_per_block: only full blocks are stored)
//   44  u32    retention priority when stored (a store's eviction order)
//   48  u8[32] chain digest
//   80  u64    checksum: XXH3-64 (seed 0) of bytes [0, 80) ++ [88, end)
//   88  zeros up to 128
//   128 i32    token ids (num_tokens), then zeros up to header_bytes
// A record is accepted only if the magic, version, sizes and fingerprint are
// this cache's, the checksum holds (a torn or flipped file is a miss), and
// the digest and tokens equal those the caller computed from its own prompt.
// The checksum detects accidents, not forgery: a writer with access to the
// store can plant any payload under a block's true key; the store's access
// control (file permissions, Redis ACLs) is that trust boundary.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/sha256.h"
#include "core/xxh3_stream.h"

namespace kvc {

struct CacheConfig;
struct LayerGrouping;

using ChainDigest = Sha256Digest;

// A block's key in the stores: its portable hash (events.h; a record's
// address) and its SHA-256 chain digest (the full key a record is checked
// against). Both chain on the parent block's key; the root's is zero.
struct StoreKey {
  uint64_t hash = 0;   // portable hash: 0 for the root
  ChainDigest digest;  // zero for the root
};

// Whether a key is a block's: the record writer stores an all-zero key for
// a job it could not key (its parent's key was unknown to it: nothing was
// written; never expected, counted as a drop). A real key's SHA-256 digest
// is never all zero.
inline bool keyed(const StoreKey& key) {
  uint64_t any = 0;
  for (unsigned char b : key.digest.bytes) any |= b;
  return any != 0;
}

constexpr uint32_t kRecordVersion = 1;
constexpr size_t kRecordFixedHeader = 128;

// --- Digests -----------------------------------------------------------------
ChainDigest scope_chain_digest(const std::string& scope_bytes);
// 32 zero bytes for empty extra bytes.
ChainDigest extra_chain_digest(const std::string& extra_bytes);
// `parent`: 32 zero bytes (ChainDigest{}) for a prompt's first block.
ChainDigest block_chain_digest(const ChainDigest& parent, const ChainDigest& scope,
                               const ChainDigest& extra, const int32_t* tokens,
                               uint32_t num_tokens);

// The geometry of the payload: model shape (layers, kv heads and windows per
// layer, head dim, kv factor), dtype, layout, tokens per block, the layer
// groups and their block bytes, and the format version. Records of another
// geometry never load.
uint64_t geometry_fingerprint(const CacheConfig& config, const LayerGrouping& grouping);

// --- Layout --------------------------------------------------------------------
struct RecordLayout {
  uint64_t fingerprint = 0;
  uint32_t tokens_per_block = 0;
  uint64_t payload_bytes = 0;  // the sum of the groups' block bytes

  size_t header_bytes() const { return (kRecordFixedHeader + 4 * size_t(tokens_per_block) + 63) / 64 * 64; }
  size_t record_bytes() const { return header_bytes() + payload_bytes; }
};

// What the caller knows of the block it wants (or stores).
struct RecordKey {
  uint64_t lookup_hash = 0;  // portable hash
  ChainDigest digest;
  const int32_t* tokens = nullptr;  // layout.tokens_per_block of them
};

// Writes the header of `key` into record[0, header_bytes) with its checksum
// over the payload already at record + header_bytes.
void seal_record(const RecordLayout& layout, const RecordKey& key, uint32_t priority,
                 unsigned char* record);

enum class RecordCheck : uint8_t {
  kOk,
  kMalformed,  // magic, version or sizes are not this format's
  kGeometry,   // another geometry's record
  kChecksum,   // torn or corrupted bytes
  kOtherKey,   // a sound record of another block (a lookup-hash collision, a foreign value)
};
const char* record_check_name(RecordCheck c);

// Checks `size` bytes at `record` against `layout` and `key`.
RecordCheck check_record(const RecordLayout& layout, const RecordKey& key,
                         const unsigned char* record, size_t size);

// The record checksum (XXH3-64 of bytes [0, 80) ++ [88, end)) of a record
// given in consecutive pieces from its first byte: a store hashes each piece
// right after it read it, while the bytes are still in the CPU's cache, so
// the check does not read the record from memory a second time
// (bench/results/2026-11-28-disk-reads-vm-2cpu.md). Its digest() over all
// of a record's bytes equals record_checksum() of them.
class RecordChecksum {
 public:
  // The next `size` bytes of the record, which start at `piece`.
  void update(const unsigned char* piece, size_t size);
  uint64_t digest() const { return stream_.digest(); }
  uint64_t bytes() const { return at_; }  // how many were given
  // For the next record.
  void reset() {
    stream_.reset();
    at_ = 0;
  }

 private:
  Xxh3Stream stream_;
  uint64_t at_ = 0;
};
// The record checksum of `size` bytes (>= kRecordFixedHeader) at `record`.
uint64_t record_checksum(const unsigned char* record, size_t size);

// check_record() for a record whose checksum `sum` was computed
// (RecordChecksum, record_checksum) over exactly these `size` bytes, as they
// were put at `record` and not changed since: the same verdict, without
// hashing the bytes again. Everything else is checked here as check_record()
// does (magic, version, sizes, geometry, the checksum stored in the record
// against `sum`, the full key).
RecordCheck check_record_summed(const RecordLayout& layout, const RecordKey& key,
                                const unsigned char* record, size_t size, uint64_t sum);
// The frame only (magic, version, sizes, fingerprint, checksum): what a store
// can check without knowing the prompt (a disk store's index rebuild).
RecordCheck check_record_frame(const RecordLayout& layout, const unsigned char* record,
                               size_t size);

// Header fields, read without any check (size >= kRecordFixedHeader).
struct RecordHeader {
  uint64_t fingerprint = 0;
  uint64_t lookup_hash = 0;
  uint64_t payload_bytes = 0;
  uint32_t version = 0;
  uint32_t header_bytes = 0;
  uint32_t num_tokens = 0;
  uint32_t priority = 0;
  bool magic_ok = false;
};
RecordHeader read_record_header(const unsigned char* record);

}  // namespace kvc
