// The key blob of a block export (include/kvcache/transfer.h documents the
// format for callers): what a receiving cache checks before it takes KV
// from a peer. It holds the sender's geometry fingerprint
// (block_record.h), tokens per block, the token ids and, per full block,
// the SHA-256 chain digest block stores key blocks by (block_record.h) and
// the portable hash (events.h, the sender's seed). The receiver rebuilds
// the digests from its own tokens and options and takes nothing unless
// every one matches: a peer cannot put KV under another prompt, and salted
// scopes stay apart because the salt is in the digest.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/block_key.h"
#include "core/store_keys.h"

namespace kvc {

constexpr uint32_t kTransferKeysVersion = 1;
constexpr size_t kTransferKeysHeader = 32;  // magic, version, T, fingerprint, num_blocks
constexpr size_t kTransferKeyBytes = 40;    // digest + portable hash, per block

// A prompt's full blocks as the blob names them.
struct TransferKeys {
  uint64_t fingerprint = 0;
  uint32_t tokens_per_block = 0;
  uint64_t num_blocks = 0;
  std::vector<int32_t> tokens;  // num_blocks * tokens_per_block
  std::vector<StoreKey> keys;   // num_blocks
};

// The chained keys (digest and portable hash under `seed`) of the first
// `num_blocks` full blocks of `tokens`, in the scope encoded as
// `scope_bytes` with sorted `extras`, into out[0, num_blocks).
void chain_transfer_keys(uint64_t seed, uint32_t tokens_per_block, const std::string& scope_bytes,
                         const std::vector<ExtraKey>& extras, const int32_t* tokens,
                         uint64_t num_blocks, StoreKey* out);

// The chain digests alone (out[i].hash left 0): what a receiver checks.
// The portable hash the blob carries is for routers and logs; a receiver
// that rebuilt it would compute a hash per block it never compares.
void chain_transfer_digests(uint32_t tokens_per_block, const std::string& scope_bytes,
                            const std::vector<ExtraKey>& extras, const int32_t* tokens,
                            uint64_t num_blocks, StoreKey* out);

// The blob's size for num_blocks blocks of T tokens.
size_t transfer_keys_size(uint64_t num_blocks, uint32_t tokens_per_block);
std::string encode_transfer_keys(const TransferKeys& k);

// The blob's frame: magic, version, tokens per block and fingerprint equal
// to `fingerprint`/`tokens_per_block`, the size its num_blocks implies, the
// checksum. Throws Error(KVC_ERR_INVALID_ARGUMENT) saying which field is
// wrong and both values. Returns num_blocks.
uint64_t check_transfer_frame(const unsigned char* blob, size_t size, uint64_t fingerprint,
                              uint32_t tokens_per_block);
// The blob's tokens and digests against `own` (the receiver's, rebuilt from
// its tokens and options; own.num_blocks == the blob's). Throws
// Error(KVC_ERR_INVALID_ARGUMENT) naming the first block that differs.
void check_transfer_keys(const unsigned char* blob, const TransferKeys& own);

}  // namespace kvc
