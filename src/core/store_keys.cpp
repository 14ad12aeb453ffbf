#include "core/store_keys.h"

#include <string>

#include "base/error.h"
#include "core/prefix_index.h"

namespace kvc {

static_assert(StoreKeys::kRootNode == RadixTree::kRoot, "StoreKeys names the root by its id");

StoreKeys::StoreKeys(const PrefixIndex& index, uint32_t id_bound, uint32_t tokens_per_block,
                     uint64_t seed)
    : index_(index),
      T_(tokens_per_block),
      hasher_(seed),
      keys_(id_bound),
      valid_(id_bound, 0),
      held_(id_bound, 0) {}

const StoreKey& StoreKeys::node_key(uint32_t node) {
  if (node == RadixTree::kRoot) return root_;
  const RadixTree& tree = index_.tree();
  path_.clear();
  for (uint32_t n = node; n != RadixTree::kRoot && !known(n); n = tree.node(n).parent)
    path_.push_back(n);
  if (path_.empty()) return keys_[node];
  // Root-down: each node chains on its parent's key. Nodes of one path share
  // a scope; its digests are made once. A node whose write job is out keeps
  // its key in path_keys_ only (its table entry is the writer's).
  path_keys_.resize(path_.size());
  node_keys_made_ += path_.size();
  uint32_t scope = UINT32_MAX;
  ScopeKeys sk;
  const TreeNode& top = tree.node(path_.back());
  const StoreKey* parent = top.parent == RadixTree::kRoot ? &root_ : &keys_[top.parent];
  for (size_t i = path_.size(); i > 0; --i) {
    const uint32_t n = path_[i - 1];
    const TreeNode& t = tree.node(n);
    if (t.scope != scope) {
      scope = t.scope;
      sk = scope_keys(index_.scope_bytes(scope));
    }
    const std::string& extra = t.extra;
    StoreKey& k = path_keys_[i - 1];
    k.hash = hasher_.block(parent->hash, sk.hash, hasher_.extra_digest(extra), tree.tokens(n),
                           t.num_tokens);
    k.digest = block_chain_digest(parent->digest, sk.digest, extra_chain_digest(extra),
                                  tree.tokens(n), t.num_tokens);
    if (!out(n)) {
      keys_[n] = k;
      valid_[n] = 1;
    }
    parent = &k;
  }
  return path_keys_[0];
}

const StoreKeys::ScopeKeys& StoreKeys::scope_keys(const std::string& scope_bytes) {
  if (!scope_valid_ || scope_bytes != scope_bytes_) {
    scope_.hash = hasher_.scope_digest(scope_bytes);
    scope_.digest = scope_chain_digest(scope_bytes);
    scope_bytes_ = scope_bytes;
    scope_valid_ = true;
  }
  return scope_;
}

StoreKeys::ScopeKeys StoreKeys::extra_keys(const std::string& extra_bytes) const {
  ScopeKeys k;
  k.hash = hasher_.extra_digest(extra_bytes);
  k.digest = extra_chain_digest(extra_bytes);
  return k;
}

void chain_prompt_keys(const PortableHasher& hasher, uint32_t T, const StoreKey& parent,
                       uint64_t scope_hash, const ChainDigest& scope_digest,
                       const std::vector<ExtraKey>& extras, const int32_t* tokens, uint64_t first,
                       uint64_t count, StoreKey* out, bool digests) {
  std::string extra;
  const StoreKey* prev = &parent;
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t begin = (first + i) * T;
    encode_block_extras(extras, begin, begin + T, extra);
    out[i].hash = hasher.block(prev->hash, scope_hash, hasher.extra_digest(extra), tokens + begin, T);
    if (digests)
      out[i].digest = block_chain_digest(prev->digest, scope_digest, extra_chain_digest(extra),
                                         tokens + begin, T);
    prev = &out[i];
  }
}

void StoreKeys::prompt_keys(const StoreKey& parent, const std::string& scope_bytes,
                            const std::vector<ExtraKey>& extras, const int32_t* tokens,
                            uint64_t first, uint64_t count, StoreKey* out, bool digests) {
  if (count == 0) return;
  const ScopeKeys sk = scope_keys(scope_bytes);
  chain_prompt_keys(hasher_, T_, parent, sk.hash, sk.digest, extras, tokens, first, count, out,
                    digests);
}

void StoreKeys::check() const {
  const RadixTree& tree = index_.tree();
  for (uint32_t n = 1; n < valid_.size(); ++n) {
    if (held_[n] != 0 && !tree.node(n).live)
      fail(KVC_ERR_INTERNAL,
           "node " + std::to_string(n) + " is marked held by a store after it left the tree");
    if (!known(n)) continue;  // none, or the writer's (out)
    const TreeNode& t = tree.node(n);
    if (!t.live) fail(KVC_ERR_INTERNAL, "store key of node " + std::to_string(n) + " outlived it");
    // Rebuilt from the root with the portable code path's own functions.
    std::vector<uint32_t> path;
    for (uint32_t m = n; m != RadixTree::kRoot; m = tree.node(m).parent) path.push_back(m);
    StoreKey k;
    for (size_t i = path.size(); i > 0; --i) {
      const TreeNode& p = tree.node(path[i - 1]);
      const std::string& scope = index_.scope_bytes(p.scope);
      const std::string& extra = p.extra;
      k.hash = hasher_.block(k.hash, hasher_.scope_digest(scope), hasher_.extra_digest(extra),
                             tree.tokens(path[i - 1]), p.num_tokens);
      k.digest = block_chain_digest(k.digest, scope_chain_digest(scope), extra_chain_digest(extra),
                                    tree.tokens(path[i - 1]), p.num_tokens);
    }
    if (k.hash != keys_[n].hash || k.digest != keys_[n].digest)
      fail(KVC_ERR_INTERNAL, "store key of node " + std::to_string(n) +
                                 " differs from the key rebuilt from its path");
  }
}

}  // namespace kvc
