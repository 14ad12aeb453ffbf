#include "core/block_hash.h"

#include <cstring>
#include <random>

#define XXH_INLINE_ALL
#include <xxhash.h>

#ifndef KVC_HASH_BITS
#define KVC_HASH_BITS 64
#endif
static_assert(KVC_HASH_BITS == 64 || KVC_HASH_BITS == 8, "KVCACHE_HASH_BITS must be 64 or 8");

namespace kvc {

namespace {

constexpr uint64_t kMask = KVC_HASH_BITS == 64 ? ~uint64_t(0) : (uint64_t(1) << KVC_HASH_BITS) - 1;
// Domain tags: a block hash, a byte digest and a first-token index key can
// never be fed the same input.
constexpr uint64_t kBlockTag = 0x316b6c622e63766bull;   // "kvc.blk1"
constexpr uint64_t kFirstTag = 0x317473662e63766bull;   // "kvc.fst1"
constexpr uint32_t kMaxTokens = 1024;                   // CacheConfig's bound

struct Secret {
  alignas(64) unsigned char bytes[XXH3_SECRET_DEFAULT_SIZE];
  Secret() {
    std::random_device rd;
    uint32_t seed[8];
    for (uint32_t& s : seed) s = rd();
    XXH3_generateSecret(bytes, sizeof(bytes), seed, sizeof(seed));
  }
};

const Secret& secret() {
  static const Secret s;  // once per process
  return s;
}

inline uint64_t keyed(const void* data, size_t size) {
  return XXH3_64bits_withSecret(data, size, secret().bytes, sizeof(secret().bytes));
}

}  // namespace

unsigned bucket_hash_bits() { return KVC_HASH_BITS; }

uint64_t hash_bytes(const void* data, size_t size) { return keyed(data, size); }

uint64_t hash_block(uint64_t parent_hash, uint64_t scope_digest, uint64_t extra_digest,
                    const int32_t* tokens, uint32_t num_tokens) {
  // [tag][parent][scope][extra][count][tokens...], all little-endian words.
  unsigned char buf[5 * sizeof(uint64_t) + kMaxTokens * sizeof(int32_t)];
  const uint64_t head[5] = {kBlockTag, parent_hash, scope_digest, extra_digest, num_tokens};
  std::memcpy(buf, head, sizeof(head));
  const uint32_t n = num_tokens < kMaxTokens ? num_tokens : kMaxTokens;
  std::memcpy(buf + sizeof(head), tokens, size_t(n) * sizeof(int32_t));
  return keyed(buf, sizeof(head) + size_t(n) * sizeof(int32_t)) & kMask;
}

uint64_t hash_first_token(uint32_t parent_node, uint32_t scope, int32_t first_token) {
  const uint64_t in[3] = {kFirstTag, (uint64_t(parent_node) << 32) | scope,
                          uint64_t(uint32_t(first_token))};
  return keyed(in, sizeof(in)) & kMask;
}

}  // namespace kvc
