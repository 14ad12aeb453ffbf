#include "core/transfer_keys.h"

#include <xxhash.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "base/error.h"
#include "core/block_record.h"
#include "core/portable_hash.h"
#include "core/sha256.h"

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

ChainDigest transfer_scope_check(const std::string& scope_bytes,
                                 const std::vector<ExtraKey>& extras, uint64_t num_tokens) {
  static const char kTag[] = "kvc.xfer.scope.v2";
  std::string extra;
  encode_block_extras(extras, 0, num_tokens, extra);
  std::string size;
  Sha256 h;
  h.update(kTag, sizeof kTag - 1);
  put_u64(size, scope_bytes.size());
  h.update(size.data(), 8);
  h.update(scope_bytes.data(), scope_bytes.size());
  size.clear();
  put_u64(size, extra.size());
  h.update(size.data(), 8);
  h.update(extra.data(), extra.size());
  return h.finish();
}

void fill_transfer_keys(uint64_t seed, const std::string& scope_bytes,
                        const std::vector<ExtraKey>& extras, TransferKeys& k) {
  const uint64_t T = k.tokens_per_block;
  k.scope_check = transfer_scope_check(scope_bytes, extras, k.num_blocks * T);
  k.hashes.resize(k.num_blocks);
  PortableHasher(seed).prompt(k.tokens.data(), k.num_blocks * T, k.tokens_per_block, scope_bytes,
                              extras, k.hashes.data());
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
  s.append(reinterpret_cast<const char*>(k.scope_check.bytes), sizeof k.scope_check.bytes);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  // The host's layout is the blob's: the token ids and the hashes in one
  // copy each.
  s.append(reinterpret_cast<const char*>(k.tokens.data()), 4 * k.tokens.size());
  s.append(reinterpret_cast<const char*>(k.hashes.data()), 8 * k.hashes.size());
#else
  for (int32_t t : k.tokens) put_u32(s, static_cast<uint32_t>(t));
  for (uint64_t h : k.hashes) put_u64(s, h);
#endif
  put_u64(s, XXH3_64bits(s.data(), s.size()));
  return s;
}

uint64_t check_transfer_frame(const unsigned char* blob, size_t size, uint64_t fingerprint,
                              uint32_t T) {
  // Magic and version first: a blob of another version is named as such.
  const auto truncated = [&] {
    invalid_argument("keys_size (" + std::to_string(size) +
                     " bytes) is shorter than a key blob's " +
                     std::to_string(kTransferKeysHeader + 8) + "-byte frame: truncated");
  };
  if (size < 12) truncated();
  if (std::memcmp(blob, kMagic, 8) != 0)
    invalid_argument("keys is not a kvcache key blob (its first 8 bytes are not \"KVCXFERK\")");
  const uint32_t version = get_u32(blob + 8);
  if (version == 1)
    invalid_argument("the key blob has format version 1 (a chain digest per block); this cache "
                     "reads version " +
                     std::to_string(kTransferKeysVersion) +
                     " only (one scope check per blob): export it again with this version");
  if (version != kTransferKeysVersion)
    invalid_argument("the key blob has format version " + std::to_string(version) +
                     "; this cache reads version " + std::to_string(kTransferKeysVersion));
  if (size < kTransferKeysHeader + 8) truncated();
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

void check_transfer_keys(const unsigned char* blob, uint64_t num_blocks, uint32_t T,
                         const ChainDigest& scope_check, const int32_t* own) {
  if (std::memcmp(blob + kTransferScopeCheckAt, scope_check.bytes, sizeof scope_check.bytes) != 0)
    invalid_argument(
        "the key blob's scope check differs from the one computed from options over its " +
        std::to_string(num_blocks * T) +
        " tokens (another cache salt, LoRA id or extra keys): its blocks belong to another scope");
  const unsigned char* tokens = blob + kTransferKeysHeader;
  const uint64_t n = num_blocks * T;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  // Equal tokens in one compare; a difference is named below.
  if (std::memcmp(tokens, own, 4 * n) == 0) return;
#endif
  for (uint64_t pos = 0; pos < n; ++pos) {
    const int32_t theirs = static_cast<int32_t>(get_u32(tokens + 4 * pos));
    if (theirs != own[pos])
      invalid_argument("block " + std::to_string(pos / T) + " differs: token " +
                       std::to_string(pos) + " is " + std::to_string(theirs) +
                       " in the key blob but " + std::to_string(own[pos]) + " in tokens");
  }
}

}  // namespace kvc
