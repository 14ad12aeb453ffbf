// The one place a block's key and its bucket hash are built (DESIGN.md,
// Block identity). A block's key is its parent node, the sequence's scope,
// its tokens and the encoded extra keys overlapping it; a hit compares the
// whole key, the hash only picks the bucket. The hash chains the block's
// keyed token hash (scope digest, extra-key digest and token count in its
// seed) on the parent's hash. Every lookup and publish of the prefix index
// and the tree's walk over a prompt take their keys from a KeyBuilder.
//
// Core sources only (block_hash_inline.h: xxHash and the library's
// KVC_HASH_BITS).
#pragma once

#include <cstdint>
#include <string>

#include "core/block_hash.h"
#include "core/block_hash_inline.h"

namespace kvc {

struct BlockKey {
  uint32_t parent;
  uint32_t scope;
  const int32_t* tokens;
  uint32_t num_tokens;
  const std::string* extra;  // encoded extra keys overlapping the block; empty: none
  uint64_t hash;
};

// The keys of the blocks of one scope.
class KeyBuilder {
 public:
  KeyBuilder(uint32_t scope, uint64_t scope_digest, uint32_t tokens_per_block)
      : scope_(scope), digest_(scope_digest), tokens_per_block_(tokens_per_block) {}

  uint32_t scope() const { return scope_; }

  // The key of a block of `num_tokens` tokens under `parent`, whose hash is
  // `parent_hash` (0 for the root). `extra` must outlive the key.
  BlockKey key(uint32_t parent, uint64_t parent_hash, const int32_t* tokens,
               uint32_t num_tokens, const std::string& extra) const {
    const uint64_t extra_digest = extra.empty() ? 0 : hash_bytes(extra.data(), extra.size());
    return BlockKey{parent, scope_, tokens, num_tokens, &extra,
                    hash_block(parent_hash, digest_, extra_digest, tokens, num_tokens)};
  }

  // The hashes of consecutive full blocks without extra keys, the first
  // chained on `parent_hash`: chain.next(tokens) is the hash key() gives
  // such a block, computed the fast way (RadixTree::match_full_blocks).
  BlockChain chain(uint64_t parent_hash) const {
    return BlockChain(parent_hash, digest_, tokens_per_block_);
  }

 private:
  uint32_t scope_;
  uint64_t digest_;
  uint32_t tokens_per_block_;
};

}  // namespace kvc
