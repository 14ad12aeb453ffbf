#include "core/block_hash.h"

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

namespace {

// Everything but the tokens goes into the seed (see hash_tokens).
inline uint64_t tokens_seed(uint64_t scope_digest, uint64_t extra_digest, uint32_t num_tokens) {
  return kBlockTag ^ (scope_digest * 0x9e3779b97f4a7c15ull) ^
         (extra_digest * 0xc2b2ae3d27d4eb4full) ^ (uint64_t(num_tokens) * 0x165667b19e3779f9ull);
}

inline uint64_t chain_mix(uint64_t parent_hash, uint64_t tokens_hash) {
  // A bijective mix of the parent's hash with the block's keyed hash
  // (rrmxmx): order matters, and the chain costs a few cycles per block.
  uint64_t x = tokens_hash ^ ((parent_hash + 0x2545f4914f6cdd1dull) * 0x9fb21c651e98df25ull);
  x ^= (x >> 49) ^ (x >> 24);
  x *= 0x9fb21c651e98df25ull;
  x ^= x >> 28;
  return x & kMask;
}

}  // namespace

uint64_t hash_tokens(uint64_t scope_digest, uint64_t extra_digest, const int32_t* tokens,
                     uint32_t num_tokens) {
  // The tokens are the input (their count is its length); the scope, the
  // extra keys and the domain tag are folded into the seed, each through its
  // own odd multiplier. No dependency on the parent, so the blocks of a
  // prompt hash in parallel.
  const uint64_t seed = tokens_seed(scope_digest, extra_digest, num_tokens);
  const size_t n = size_t(num_tokens < kMaxTokens ? num_tokens : kMaxTokens);
  return XXH3_64bits_withSecretandSeed(tokens, n * sizeof(int32_t), secret().bytes,
                                       sizeof(secret().bytes), seed);
}

uint64_t chain_hash(uint64_t parent_hash, uint64_t tokens_hash) {
  return chain_mix(parent_hash, tokens_hash);
}

void hash_chain(uint64_t parent_hash, uint64_t scope_digest, const int32_t* tokens,
                uint32_t tokens_per_block, size_t count, uint64_t* out) {
  const uint64_t seed = tokens_seed(scope_digest, 0, tokens_per_block);
  const size_t T = size_t(tokens_per_block < kMaxTokens ? tokens_per_block : kMaxTokens);
  const size_t bytes = T * sizeof(int32_t);
  uint64_t h = parent_hash;
  // XXH3_64bits_withSecretandSeed hashes inputs of up to XXH3_MIDSIZE_MAX
  // bytes exactly as XXH3_64bits_withSeed does (the seed carries the key);
  // calling the latter with a constant length lets the compiler drop the
  // length dispatch and hoist the seeded secret out of the loop.
  static_assert(XXH3_MIDSIZE_MAX >= 64, "64-byte blocks take XXH3's short path");
  if (bytes == 64) {
    for (size_t i = 0; i < count; ++i) {
      h = chain_mix(h, XXH3_64bits_withSeed(tokens + i * 16, 64, seed));
      out[i] = h;
    }
  } else if (bytes <= XXH3_MIDSIZE_MAX) {
    for (size_t i = 0; i < count; ++i) {
      h = chain_mix(h, XXH3_64bits_withSeed(tokens + i * tokens_per_block, bytes, seed));
      out[i] = h;
    }
  } else {
    for (size_t i = 0; i < count; ++i) {
      h = chain_mix(h, XXH3_64bits_withSecretandSeed(tokens + i * tokens_per_block, bytes,
                                                     secret().bytes, sizeof(secret().bytes), seed));
      out[i] = h;
    }
  }
}

uint64_t hash_block(uint64_t parent_hash, uint64_t scope_digest, uint64_t extra_digest,
                    const int32_t* tokens, uint32_t num_tokens) {
  return chain_hash(parent_hash, hash_tokens(scope_digest, extra_digest, tokens, num_tokens));
}

uint64_t hash_first_token(uint32_t parent_node, uint32_t scope, int32_t first_token) {
  const uint64_t in[3] = {kFirstTag, (uint64_t(parent_node) << 32) | scope,
                          uint64_t(uint32_t(first_token))};
  return keyed(in, sizeof(in)) & kMask;
}

}  // namespace kvc
