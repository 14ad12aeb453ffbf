// Inline forms of the chained block hash of block_hash.h, for the lookup
// loops of src/core that hash a prompt block after block (block_hash.cpp
// defines its functions with these). Core sources only: it pulls in xxHash
// and depends on KVC_HASH_BITS, a definition of the library's own build.
#pragma once

#include <cstddef>
#include <cstdint>

#ifndef XXH_INLINE_ALL
#define XXH_INLINE_ALL
#endif
#include <xxhash.h>

#include "core/block_hash.h"

#ifndef KVC_HASH_BITS
#define KVC_HASH_BITS 64
#endif
static_assert(KVC_HASH_BITS == 64 || KVC_HASH_BITS == 8, "KVCACHE_HASH_BITS must be 64 or 8");

namespace kvc {
namespace hash_detail {

constexpr uint64_t kMask = KVC_HASH_BITS == 64 ? ~uint64_t(0) : (uint64_t(1) << KVC_HASH_BITS) - 1;
// Domain tags: a block hash, a byte digest and a first-token index key can
// never be fed the same input.
constexpr uint64_t kBlockTag = 0x316b6c622e63766bull;   // "kvc.blk1"
constexpr uint64_t kFirstTag = 0x317473662e63766bull;   // "kvc.fst1"
constexpr uint32_t kMaxTokens = 1024;                   // CacheConfig's bound

// Everything but the tokens goes into the seed (see hash_tokens).
inline uint64_t tokens_seed(uint64_t scope_digest, uint64_t extra_digest, uint32_t num_tokens) {
  return kBlockTag ^ (scope_digest * 0x9e3779b97f4a7c15ull) ^
         (extra_digest * 0xc2b2ae3d27d4eb4full) ^ (uint64_t(num_tokens) * 0x165667b19e3779f9ull);
}

// chain_hash.
inline uint64_t chain_mix(uint64_t parent_hash, uint64_t tokens_hash) {
  // The block's keyed hash (XXH3 output, already avalanched) xored with a
  // bijective multiply of the parent's hash: order matters, two parents
  // never mix alike, and the chain costs three instructions per block.
  return (tokens_hash ^ ((parent_hash + 0x2545f4914f6cdd1dull) * 0x9fb21c651e98df25ull)) & kMask;
}

// XXH3_64bits_withSeed(input, 64, seed), bit for bit, with the seeded
// secret words computed once: the walk over a prompt hashes every block
// with one seed, and this form is about 35 instructions a block.
class Xxh3Of64Bytes {
 public:
  explicit Xxh3Of64Bytes(uint64_t seed) {
    // XXH3_len_17to128_64b for a length of 64 pairs input bytes 0, 16, 32,
    // 48 with secret bytes 0, 32, 48, 16.
    static constexpr int kSecretAt[4] = {0, 32, 48, 16};
    for (int i = 0; i < 4; ++i) {
      lo_[i] = XXH_readLE64(XXH3_kSecret + kSecretAt[i]) + seed;
      hi_[i] = XXH_readLE64(XXH3_kSecret + kSecretAt[i] + 8) - seed;
    }
  }
  uint64_t operator()(const void* input) const {
    const unsigned char* in = static_cast<const unsigned char*>(input);
    uint64_t acc = 64 * XXH_PRIME64_1;
    for (int i = 0; i < 4; ++i)
      acc += XXH3_mul128_fold64(XXH_readLE64(in + 16 * i) ^ lo_[i],
                                XXH_readLE64(in + 16 * i + 8) ^ hi_[i]);
    return XXH3_avalanche(acc);
  }

 private:
  uint64_t lo_[4];
  uint64_t hi_[4];
};

}  // namespace hash_detail

// The chained hashes of a prompt's full blocks without extra keys, one
// block after another: next(block) == chain_hash(previous, hash_tokens(
// scope_digest, 0, block, tokens_per_block)).
class BlockChain {
 public:
  BlockChain(uint64_t parent_hash, uint64_t scope_digest, uint32_t tokens_per_block)
      : hash_(parent_hash),
        scope_digest_(scope_digest),
        seed_(hash_detail::tokens_seed(scope_digest, 0, tokens_per_block)),
        xxh3_64_(seed_),
        tokens_per_block_(tokens_per_block),
        bytes_(size_t(tokens_per_block < hash_detail::kMaxTokens ? tokens_per_block
                                                                 : hash_detail::kMaxTokens) *
               sizeof(int32_t)) {}

  uint64_t next(const int32_t* block) {
    // Up to XXH3_MIDSIZE_MAX bytes, XXH3_64bits_withSecretandSeed (what
    // hash_tokens calls) hashes exactly as XXH3_64bits_withSeed does (the
    // seed carries the key); a constant length drops the length dispatch.
    uint64_t t;
    if (bytes_ == 64) t = xxh3_64_(block);
    else if (bytes_ <= XXH3_MIDSIZE_MAX) t = XXH3_64bits_withSeed(block, bytes_, seed_);
    else t = hash_tokens(scope_digest_, 0, block, tokens_per_block_);
    hash_ = hash_detail::chain_mix(hash_, t);
    return hash_;
  }

 private:
  uint64_t hash_;
  uint64_t scope_digest_;
  uint64_t seed_;
  hash_detail::Xxh3Of64Bytes xxh3_64_;
  uint32_t tokens_per_block_;
  size_t bytes_;
};

}  // namespace kvc
