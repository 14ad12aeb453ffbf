// Chained bucket hashes of block keys: XXH3-64 keyed with a secret drawn
// at random once per process, so a tenant cannot precompute colliding
// prompts. A hash only picks a bucket; a hit still compares the full key.
// Built with KVCACHE_HASH_BITS=8 every hash is cut to 8 bits, so collisions
// happen all the time and the full-key comparison is what tests exercise.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kvc {

// Bits kept of every bucket hash (64, or 8 in the collision-forcing build).
unsigned bucket_hash_bits();

// Digest of an already encoded byte string (a scope, a block's extra keys).
uint64_t hash_bytes(const void* data, size_t size);

// Hash of one block: its tokens' keyed hash (hash_tokens) chained on the
// parent's hash (chain_hash). Split in two so that the per-block hashes of
// a prompt, which do not depend on each other, can run ahead of the chain.
uint64_t hash_block(uint64_t parent_hash, uint64_t scope_digest, uint64_t extra_digest,
                    const int32_t* tokens, uint32_t num_tokens);
uint64_t hash_tokens(uint64_t scope_digest, uint64_t extra_digest, const int32_t* tokens,
                     uint32_t num_tokens);
uint64_t chain_hash(uint64_t parent_hash, uint64_t tokens_hash);

// The chained hashes of `count` consecutive full blocks of `tokens_per_block`
// tokens with no extra keys, the first chained on `parent_hash`:
//   out[i] = chain_hash(i ? out[i-1] : parent_hash,
//                       hash_tokens(scope_digest, 0, tokens + i * tokens_per_block, tokens_per_block))
// in one call, the way a lookup walks a prompt (the seed is set up once and
// the per-block hashes overlap the chain).
void hash_chain(uint64_t parent_hash, uint64_t scope_digest, const int32_t* tokens,
                uint32_t tokens_per_block, size_t count, uint64_t* out);

// Hash of (parent node, scope, first token): the index of candidates for
// token-by-token (partial) matching. A keyed multiply-fold (XXH3's primitive
// for short inputs) and XXH3's avalanche, inline: every published block
// computes one, so it is a few instructions, not a call into XXH3. Its two
// keys are drawn once per process (first_token_key()), so a tenant cannot
// aim prompts at one table slot.
struct FirstTokenKey {
  uint64_t k0;
  uint64_t k1;
};
FirstTokenKey first_token_key();
inline uint64_t hash_first_token(const FirstTokenKey& key, uint32_t parent_node, uint32_t scope,
                                 int32_t first_token) {
  const uint64_t a = ((uint64_t(parent_node) << 32) | scope) ^ key.k0;
  const uint64_t b = uint64_t(uint32_t(first_token)) ^ key.k1;
  __extension__ typedef unsigned __int128 u128;  // gcc and clang: a 64x64->128 multiply
  const u128 m = static_cast<u128>(a) * b;
  uint64_t h = uint64_t(m) ^ uint64_t(m >> 64);
  h ^= h >> 37;
  h *= 0x165667919e3779f9ull;
  h ^= h >> 32;
  return h;  // all 64 bits; the caller keeps bucket_hash_bits() of them
}

}  // namespace kvc
