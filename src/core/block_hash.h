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
// token-by-token (partial) matching.
uint64_t hash_first_token(uint32_t parent_node, uint32_t scope, int32_t first_token);

}  // namespace kvc
