#include "core/transfer_keys.h"

#include <xxhash.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "base/error.h"
#include "core/block_record.h"
#include "core/portable_hash.h"
#include "core/store_keys.h"

namespace kvc {

namespace {

const char kMagic[8] = {'K', 'V', 'C', 'X', 'F', 'E', 'R', 'K'};

void put_u32(std::string& s, uint32_t v) {
  for (int i = 0; i < 4; ++i) s.push_back(char((v >> (8 * i)) & 0xff));
}
void put_u64(std::string& s, uint64_t v) {
  for (int i = 0; i < 8; ++i) s.push_back(char((v >> (8 * i)) & 0xff));
}
uint32_t get_u32(const unsigned char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
uint64_t get_u64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

std::string hex(uint64_t v) {
  char buf[19];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

void chain_transfer_keys(uint64_t seed, uint32_t T, const std::string& scope_bytes,
                         const std::vector<ExtraKey>& extras, const int32_t* tokens,
                         uint64_t num_blocks, StoreKey* out) {
  const PortableHasher hasher(seed);
  chain_prompt_keys(hasher, T, StoreKey{}, hasher.scope_digest(scope_bytes),
                    scope_chain_digest(scope_bytes), extras, tokens, 0, num_blocks, out);
}

void chain_transfer_digests(uint32_t T, const std::string& scope_bytes,
                            const std::vector<ExtraKey>& extras, const int32_t* tokens,
                            uint64_t num_blocks, StoreKey* out) {
  const ChainDigest scope = scope_chain_digest(scope_bytes);
  std::string extra;
  ChainDigest prev{};
  for (uint64_t i = 0; i < num_blocks; ++i) {
    encode_block_extras(extras, i * T, (i + 1) * T, extra);
    out[i].hash = 0;
    out[i].digest = block_chain_digest(prev, scope, extra_chain_digest(extra), tokens + i * T, T);
    prev = out[i].digest;
  }
}

size_t transfer_keys_size(uint64_t num_blocks, uint32_t T) {
  return kTransferKeysHeader + num_blocks * (4 * uint64_t(T) + kTransferKeyBytes) + 8;
}

std::string encode_transfer_keys(const TransferKeys& k) {
  std::string s;
  s.reserve(transfer_keys_size(k.num_blocks, k.tokens_per_block));
  s.append(kMagic, 8);
  put_u32(s, kTransferKeysVersion);
  put_u32(s, k.tokens_per_block);
  put_u64(s, k.fingerprint);
  put_u64(s, k.num_blocks);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  // The host's layout is the blob's: the token ids in one copy.
  s.append(reinterpret_cast<const char*>(k.tokens.data()), 4 * k.tokens.size());
#else
  for (int32_t t : k.tokens) put_u32(s, static_cast<uint32_t>(t));
#endif
  for (const StoreKey& key : k.keys) {
    s.append(reinterpret_cast<const char*>(key.digest.bytes), sizeof key.digest.bytes);
    put_u64(s, key.hash);
  }
  put_u64(s, XXH3_64bits(s.data(), s.size()));
  return s;
}

uint64_t check_transfer_frame(const unsigned char* blob, size_t size, uint64_t fingerprint,
                              uint32_t T) {
  if (size < kTransferKeysHeader + 8)
    invalid_argument("keys_size (" + std::to_string(size) +
                     " bytes) is shorter than a key blob's " +
                     std::to_string(kTransferKeysHeader + 8) + "-byte frame: truncated");
  if (std::memcmp(blob, kMagic, 8) != 0)
    invalid_argument("keys is not a kvcache key blob (its first 8 bytes are not \"KVCXFERK\")");
  const uint32_t version = get_u32(blob + 8);
  if (version != kTransferKeysVersion)
    invalid_argument("the key blob has format version " + std::to_string(version) +
                     "; this cache reads version " + std::to_string(kTransferKeysVersion));
  const uint32_t their_t = get_u32(blob + 12);
  if (their_t != T)
    invalid_argument("the key blob's tokens_per_block is " + std::to_string(their_t) +
                     "; this cache's is " + std::to_string(T));
  const uint64_t their_fp = get_u64(blob + 16);
  if (their_fp != fingerprint)
    invalid_argument("the key blob's geometry fingerprint " + hex(their_fp) +
                     " differs from this "
                     "cache's " +
                     hex(fingerprint) +
                     " (another model shape, dtype, layout, kv heads or layer grouping)");
  const uint64_t n = get_u64(blob + 24);
  const uint64_t per_block = 4 * uint64_t(T) + kTransferKeyBytes;
  if (n > (size - kTransferKeysHeader - 8) / per_block || transfer_keys_size(n, T) != size)
    invalid_argument(
        "keys_size is " + std::to_string(size) + " bytes but a key blob of " + std::to_string(n) +
        " blocks takes " +
        (n > (uint64_t(1) << 40) ? std::string("more") : std::to_string(transfer_keys_size(n, T))) +
        " (truncated or corrupted)");
  const uint64_t sum = get_u64(blob + size - 8);
  if (XXH3_64bits(blob, size - 8) != sum)
    invalid_argument("the key blob's checksum does not match its bytes (corrupted in transit)");
  return n;
}

void check_transfer_keys(const unsigned char* blob, const TransferKeys& own) {
  const uint32_t T = own.tokens_per_block;
  const unsigned char* tokens = blob + kTransferKeysHeader;
  const unsigned char* keys = tokens + 4 * own.num_blocks * T;
  for (uint64_t b = 0; b < own.num_blocks; ++b) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    // Equal tokens in one compare; a difference is named below.
    const bool same_tokens =
        std::memcmp(tokens + 4 * b * T, own.tokens.data() + b * T, 4 * size_t(T)) == 0;
#else
    const bool same_tokens = false;
#endif
    for (uint32_t i = 0; !same_tokens && i < T; ++i) {
      const uint64_t pos = b * T + i;
      const int32_t theirs = static_cast<int32_t>(get_u32(tokens + 4 * pos));
      if (theirs != own.tokens[pos])
        invalid_argument("block " + std::to_string(b) + " differs: token " + std::to_string(pos) +
                         " is " + std::to_string(theirs) + " in the key blob but " +
                         std::to_string(own.tokens[pos]) + " in tokens");
    }
    if (std::memcmp(keys + b * kTransferKeyBytes, own.keys[b].digest.bytes, 32) != 0)
      invalid_argument("block " + std::to_string(b) +
                       " differs: its chain digest in the key blob is not the one rebuilt from "
                       "tokens and options (another cache salt, LoRA id or extra keys)");
  }
}

}  // namespace kvc
