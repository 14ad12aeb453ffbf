#include "core/block_hash.h"

#include <random>

#include "core/block_hash_inline.h"

namespace kvc {

namespace {

using hash_detail::kBlockTag;
using hash_detail::kFirstTag;
using hash_detail::kMask;
using hash_detail::kMaxTokens;
using hash_detail::tokens_seed;
using hash_detail::chain_mix;

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
  BlockChain chain(parent_hash, scope_digest, tokens_per_block);
  for (size_t i = 0; i < count; ++i) out[i] = chain.next(tokens + i * tokens_per_block);
}

uint64_t hash_block(uint64_t parent_hash, uint64_t scope_digest, uint64_t extra_digest,
                    const int32_t* tokens, uint32_t num_tokens) {
  return chain_hash(parent_hash, hash_tokens(scope_digest, extra_digest, tokens, num_tokens));
}

FirstTokenKey first_token_key() {
  // The last 16 bytes of the process's secret, which hashes of inputs up
  // to 240 bytes (every key but long scope strings) never read.
  static_assert(XXH3_SECRET_DEFAULT_SIZE >= 176 + 16, "secret size");
  FirstTokenKey k;
  k.k0 = XXH_readLE64(secret().bytes + 176) ^ kFirstTag;
  k.k1 = XXH_readLE64(secret().bytes + 184);
  return k;
}

}  // namespace kvc
