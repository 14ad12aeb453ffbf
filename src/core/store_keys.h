// The keys block stores (block_store.h) know blocks by: for a tree node, and
// for a prompt's blocks past the tree's match, the portable hash (a record's
// address, events.h) and the SHA-256 chain digest (its full key,
// block_record.h). Both chain on the parent's, so a node's key is memoized
// per node id and forgotten when the node leaves the tree (PrefixIndex
// calls forget): offloading a chain of victims hashes each block once, and
// a lookup starts from the last matched node's key instead of the prompt's
// first block. Computed only when a store is configured.
//
// The record writer's keys (write-through, store_chain.h) land in the same
// table: the writer stores a job's key at its node (key_table()), and the
// key is this node's once the job the node is stamped with is finished
// (attach_writer: the stamps and the finished count, as the serving thread
// last read it). While a node's job is out, its entry is the writer's: it
// is neither read nor written here (a key asked for then is made into
// scratch, not memoized). So the serving thread never reads the writer's
// keys when a job finishes, only when it needs one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/block_key.h"
#include "core/block_record.h"
#include "core/portable_hash.h"

namespace kvc {

class PrefixIndex;

// The keys of prompt blocks [first, first + count) (T tokens each) in the
// scope whose digests are given, with sorted `extras`, chained on `parent`
// (the key of block first - 1; zero for block 0), into out[0, count). The
// one loop that chains keys: StoreKeys::prompt_keys and the transfer key
// blob (transfer_keys.h) both use it. `digests` false: the portable hashes
// only (the digests left as they are: a lookup's first block, whose digest
// only a hit needs).
void chain_prompt_keys(const PortableHasher& hasher, uint32_t T, const StoreKey& parent,
                       uint64_t scope_hash, const ChainDigest& scope_digest,
                       const std::vector<ExtraKey>& extras, const int32_t* tokens, uint64_t first,
                       uint64_t count, StoreKey* out, bool digests = true);

class StoreKeys {
 public:
  static constexpr uint32_t kRootNode = 0;  // RadixTree::kRoot
  // id_bound: the tree's node ids are below it (RadixTree::id_bound()).
  StoreKeys(const PrefixIndex& index, uint32_t id_bound, uint32_t tokens_per_block,
            uint64_t seed);

  // The key of live node `node` (kRoot: the zero key). Every node on its path
  // must be a full block (partial nodes have no children). Valid until the
  // next call.
  const StoreKey& node_key(uint32_t node);
  // node's write job is finished and its stamp about to be cleared
  // (StoreChain::leaving): the key the writer made stays node's, memoized,
  // until forget(); the offer of its eviction finds it (a job that could
  // not key it left it zero: not kept).
  void keep_writer_key(uint32_t node) {
    if (keyed(keys_[node])) valid_[node] = 1;
  }
  void forget(uint32_t node) {
    valid_[node] = 0;
    held_[node] = 0;
  }
  // The stores (bit s: store s of the chain) known to hold node's record
  // already: those an add loaded it from. An eviction's offer skips them
  // (StoreChain::offer). Forgotten with the key, when the node leaves the
  // tree.
  void mark_held(uint32_t node, uint8_t stores) { held_[node] |= stores; }
  uint8_t held_by(uint32_t node) const { return held_[node]; }
  // Whether node_key(node) is memoized (the root's always is): made here,
  // or by the writer for a job that is finished and keyed it.
  bool known(uint32_t node) const {
    if (node == kRootNode) return true;
    if (out(node)) return false;  // the writer's entry
    if (writes_ != nullptr && (*writes_)[node] != 0 && keyed(keys_[node])) return true;
    return valid_[node] != 0;
  }
  // The record writer's key table (open_record_writer), and what says when
  // an entry of it is this node's key: node n's write job stamps[n] (0:
  // none) is finished once it is <= *finished. Both are the caller's and
  // outlive this.
  StoreKey* key_table() { return keys_.data(); }
  size_t key_table_size() const { return keys_.size(); }
  void attach_writer(const std::vector<uint64_t>* stamps, const uint64_t* finished) {
    writes_ = stamps;
    finished_ = finished;
  }

  // The two digests of an encoded scope (portable XXH3 and SHA-256 chain
  // digest), memoized for the last scope asked: a commit's blocks share one.
  struct ScopeKeys {
    uint64_t hash = 0;
    ChainDigest digest;
  };
  const ScopeKeys& scope_keys(const std::string& scope_bytes);
  // The same for a block's encoded extra keys (zero for none).
  ScopeKeys extra_keys(const std::string& extra_bytes) const;

  // Tests: how many node keys node_key() hashed (the serving thread's; a
  // key the writer made, or one memoized, costs none).
  uint64_t node_keys_made() const { return node_keys_made_; }

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
                   uint64_t count, StoreKey* out, bool digests = true);

 private:
  const PrefixIndex& index_;
  const uint32_t T_;
  PortableHasher hasher_;
  // Whether node's write job is out (its table entry the writer's).
  bool out(uint32_t node) const { return writes_ != nullptr && (*writes_)[node] > *finished_; }
  std::vector<StoreKey> keys_;  // per node (also the writer's key table)
  std::vector<uint8_t> valid_;  // per node: made here
  std::vector<uint8_t> held_;   // per node: mark_held()
  std::vector<uint32_t> path_;  // scratch
  std::vector<StoreKey> path_keys_;                // scratch: the path's keys, root-down
  const std::vector<uint64_t>* writes_ = nullptr;  // attach_writer
  const uint64_t* finished_ = nullptr;
  StoreKey root_;
  std::string scope_bytes_;     // the scope scope_ is of
  ScopeKeys scope_;
  bool scope_valid_ = false;
  uint64_t node_keys_made_ = 0;
};

}  // namespace kvc
