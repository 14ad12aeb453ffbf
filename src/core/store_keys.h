// The keys block stores (block_store.h) know blocks by: for a tree node, and
// for a prompt's blocks past the tree's match, the portable hash (a record's
// address, events.h) and the SHA-256 chain digest (its full key,
// block_record.h). Both chain on the parent's, so a node's key is memoized
// per node id and forgotten when the node leaves the tree (PrefixIndex
// calls forget): offloading a chain of victims hashes each block once, and
// a lookup starts from the last matched node's key instead of the prompt's
// first block. Computed only when a store is configured.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/block_key.h"
#include "core/block_record.h"
#include "core/portable_hash.h"

namespace kvc {

class PrefixIndex;

struct StoreKey {
  uint64_t hash = 0;   // portable hash: 0 for the root
  ChainDigest digest;  // zero for the root
};

class StoreKeys {
 public:
  StoreKeys(const PrefixIndex& index, uint32_t max_nodes, uint32_t tokens_per_block,
            uint64_t seed);

  // The key of live node `node` (kRoot: the zero key). Every node on its path
  // must be a full block (partial nodes have no children).
  const StoreKey& node_key(uint32_t node);
  void forget(uint32_t node) { valid_[node] = 0; }

  // The checker: every memoized key belongs to a live node and equals the
  // key rebuilt from its parent's (memoized or rebuilt) key and its own
  // tree key: a stale key would store a block under another's name.
  // Throws Error(KVC_ERR_INTERNAL).
  void check() const;

  // The keys of the full blocks [first, first + count) of a prompt in the
  // scope encoded as `scope_bytes` with sorted `extras`, chained on `parent`
  // (the key of block first - 1), into out[0, count).
  void prompt_keys(const StoreKey& parent, const std::string& scope_bytes,
                   const std::vector<ExtraKey>& extras, const int32_t* tokens, uint64_t first,
                   uint64_t count, StoreKey* out);

 private:
  const PrefixIndex& index_;
  const uint32_t T_;
  PortableHasher hasher_;
  std::vector<StoreKey> keys_;  // per node
  std::vector<uint8_t> valid_;  // per node
  std::vector<uint32_t> path_;  // scratch
  std::string extra_;           // scratch
  StoreKey root_;
};

}  // namespace kvc
