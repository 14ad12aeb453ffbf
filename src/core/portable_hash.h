// Portable block hashes (include/kvcache/events.h states the algorithm):
// the hashes KV events name blocks by and kvc_block_hashes() computes for a
// router, equal in every process for equal tokens, scope and seed. Unlike
// the radix tree's bucket hash (block_hash.h, keyed by a per-process
// secret) they never decide a lookup; they are labels for other processes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/block_key.h"

namespace kvc {

class PortableHasher {
 public:
  explicit PortableHasher(uint64_t seed) : seed_(seed) {}

  uint64_t seed() const { return seed_; }
  // The digest of an encoded scope (encode_scope) or of a block's encoded
  // extra keys (encode_block_extras; empty: 0, no extra key).
  uint64_t scope_digest(const std::string& scope_bytes) const;
  uint64_t extra_digest(const std::string& extra_bytes) const;
  // The hash of a block of `num_tokens` tokens under a block hashed
  // `parent_hash` (0: the prompt's first block).
  uint64_t block(uint64_t parent_hash, uint64_t scope_digest, uint64_t extra_digest,
                 const int32_t* tokens, uint32_t num_tokens) const;

  // The hashes of the full blocks of a prompt (n / tokens_per_block of
  // them) in `scope_bytes` with sorted extra keys, into `out`.
  void prompt(const int32_t* tokens, uint64_t n, uint32_t tokens_per_block,
              const std::string& scope_bytes, const std::vector<ExtraKey>& extras,
              uint64_t* out) const;

 private:
  uint64_t seed_;
};

// The LoRA id an encoded scope names, if any (encode_scope's layout).
bool scope_lora(const std::string& scope_bytes, uint64_t* lora_id);

}  // namespace kvc
