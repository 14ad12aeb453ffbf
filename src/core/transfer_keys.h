// The key blob of a block export (include/kvcache/transfer.h documents the
// format for callers): what a receiving cache checks before it takes KV
// from a peer. It holds the sender's geometry fingerprint
// (block_record.h), tokens per block, one scope-check digest (the scope's
// salt and LoRA id and the extra keys overlapping the exported tokens),
// the token ids and, per full block, the portable hash (events.h, the
// sender's seed) for routers and logs. The receiver computes the
// scope-check digest from its own options and compares it and the tokens:
// a peer cannot put KV under another prompt, and salted scopes stay apart
// because the salt is in the scope check.
//
// Why one digest is as strong as version 1's chain digest per block: block
// b's chain digest (block_record.h) is a function of T, the tokens of
// blocks 0..b, the encoded scope and the encoded extra keys overlapping
// block b. T and the tokens are compared directly. encode_block_extras
// writes each key overlapping a range with its offset, length and data
// (tagged, length-prefixed: the encoding parses back to the sorted keys),
// so equal encodings of the keys overlapping [0, N*T) mean equal sets of
// (offset, length, data) overlapping it, hence equal keys overlapping each
// block of it (a key overlapping a block of the range overlaps the range);
// and a key that differs for some block differs in that set. The version 1
// check refused exactly the blobs this one refuses.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/block_key.h"
#include "core/block_record.h"

namespace kvc {

constexpr uint32_t kTransferKeysVersion = 2;
// magic, version, T, fingerprint, num_blocks, then the scope check
constexpr size_t kTransferKeysHeader = 64;
constexpr size_t kTransferScopeCheckAt = 32;
constexpr size_t kTransferKeyBytes = 8;  // the portable hash, per block

// A prompt's full blocks as the blob names them.
struct TransferKeys {
  uint64_t fingerprint = 0;
  uint32_t tokens_per_block = 0;
  uint64_t num_blocks = 0;
  ChainDigest scope_check;       // transfer_scope_check
  std::vector<int32_t> tokens;   // num_blocks * tokens_per_block
  std::vector<uint64_t> hashes;  // num_blocks portable hashes (the sender's)
};

// SHA-256("kvc.xfer.scope.v2" || u64 size || `scope_bytes` || u64 size ||
// the encoded extra keys (encode_block_extras, sorted `extras`)
// overlapping tokens [0, num_tokens)).
ChainDigest transfer_scope_check(const std::string& scope_bytes,
                                 const std::vector<ExtraKey>& extras, uint64_t num_tokens);

// The sender's keys of its first `num_blocks` full blocks of `tokens` in
// the scope encoded as `scope_bytes` with sorted `extras`: the scope check
// and the chained portable hashes under `seed` (no chain digest).
void fill_transfer_keys(uint64_t seed, const std::string& scope_bytes,
                        const std::vector<ExtraKey>& extras, TransferKeys& k);

// The blob's size for num_blocks blocks of T tokens.
size_t transfer_keys_size(uint64_t num_blocks, uint32_t tokens_per_block);
std::string encode_transfer_keys(const TransferKeys& k);

// The blob's frame: magic, version, tokens per block and fingerprint equal
// to `fingerprint`/`tokens_per_block`, the size its num_blocks implies, the
// checksum. Throws Error(KVC_ERR_INVALID_ARGUMENT) saying which field is
// wrong and both values. Returns num_blocks.
uint64_t check_transfer_frame(const unsigned char* blob, size_t size, uint64_t fingerprint,
                              uint32_t tokens_per_block);
// The blob's scope check and tokens against the receiver's: `scope_check`
// (transfer_scope_check of its options over the blob's num_blocks * T
// tokens) and `tokens` (at least num_blocks * T of them). Throws
// Error(KVC_ERR_INVALID_ARGUMENT): another scope, or the first block and
// token that differ.
void check_transfer_keys(const unsigned char* blob, uint64_t num_blocks, uint32_t tokens_per_block,
                         const ChainDigest& scope_check, const int32_t* tokens);

}  // namespace kvc
