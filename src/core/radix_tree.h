// The radix tree of published blocks, shared by all layer groups: a node is
// one block position of some prefix and holds one block slot per group.
// Nodes are found by their full key (parent, scope, tokens, extra keys)
// through a chained bucket table on the block hash; a second index on
// (parent, scope, first token) finds the candidates of a token-by-token
// (partial) match. Storage is preallocated: no allocation after creation
// except for the (rare) extra-key bytes a node carries.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/block_pool.h"

namespace kvc {

struct TreeNode {
  // What a lookup compares first, together.
  uint64_t hash = 0;        // chained bucket hash
  uint32_t parent = kNoNode;
  uint32_t scope = 0;
  uint32_t num_tokens = 0;  // tokens_per_block, or fewer for a partial block
  uint32_t bucket_next = kNoNode;
  std::string extra;        // encoded extra keys overlapping the block
  // Links.
  uint32_t bucket_prev = kNoNode;
  uint32_t first_next = kNoNode;
  uint32_t first_prev = kNoNode;
  uint32_t first_bucket = 0;  // its slot in the first-token index
  uint32_t first_child = kNoNode;
  uint32_t next_sibling = kNoNode;
  uint32_t prev_sibling = kNoNode;
  uint32_t num_children = 0;
  uint8_t priority = 35;    // set by the last owner to release it
  bool live = false;
  uint8_t tier = 0;         // where its blocks are: kPrimaryTier or kHostTier (host_tier.h)
  uint64_t age = 0;         // moment the last owner released it
  // Retention: when the node was published (ms on the retention clock) and
  // how long after that its priority stays before reverting to 35
  // (0: for ever), as the last owner to release it set them.
  uint64_t reusable_at = 0;
  uint64_t duration_ms = 0;
  // Sequences whose published block list names this node, in a model whose
  // groups are all windowed (no full group anchors nodes by its blocks).
  uint32_t holders = 0;
};

class RadixTree {
 public:
  static constexpr uint32_t kRoot = 0;

  // Room for `max_nodes` nodes besides the root.
  RadixTree(uint32_t max_nodes, uint32_t tokens_per_block, uint32_t num_groups);

  // The node with exactly this key, or kNoNode.
  uint32_t find(uint32_t parent, uint32_t scope, const int32_t* tokens, uint32_t num_tokens,
                const std::string& extra, uint64_t hash) const;

  // Calls f(node) for every child of `parent` in `scope` whose first token
  // is `first_token` (and possibly a few others: f must check).
  template <class F>
  void for_each_first_token_match(uint32_t parent, uint32_t scope, int32_t first_token,
                                  F&& f) const;

  // Links a new node; the key must not be present and a node must be free.
  uint32_t insert(uint32_t parent, uint32_t scope, const int32_t* tokens, uint32_t num_tokens,
                  std::string&& extra, uint64_t hash, const uint32_t* blocks);
  // Unlinks a leaf and frees its slot.
  void erase(uint32_t node);

  const TreeNode& node(uint32_t id) const { return nodes_[id]; }
  TreeNode& node(uint32_t id) { return nodes_[id]; }
  const int32_t* tokens(uint32_t id) const { return &tokens_[uint64_t(id) * tokens_per_block_]; }
  uint32_t block(uint32_t id, uint32_t group) const {
    return blocks_[uint64_t(id) * num_groups_ + group];
  }
  // A windowed group's slot empties (kNoBlock) when its block is evicted; a
  // node moving between tiers takes blocks of the other tier's pools.
  void set_block(uint32_t id, uint32_t group, uint32_t block) {
    blocks_[uint64_t(id) * num_groups_ + group] = block;
  }
  bool is_leaf(uint32_t id) const { return nodes_[id].num_children == 0; }
  // Warms the cache for a coming find(hash): the bucket, then its first node.
  void prefetch_bucket(uint64_t hash) const { __builtin_prefetch(&buckets_[bucket_of(hash)]); }
  // Warms what erase(id) will touch besides the node: its two bucket slots.
  void prefetch_erase(uint32_t id) const {
    __builtin_prefetch(&buckets_[bucket_of(nodes_[id].hash)], 1);
    __builtin_prefetch(&first_buckets_[nodes_[id].first_bucket], 1);
  }
  void prefetch_head(uint64_t hash) const {
    const uint32_t n = buckets_[bucket_of(hash)];
    if (n != kNoNode) {
      __builtin_prefetch(&nodes_[n]);
      __builtin_prefetch(tokens(n));
    }
  }

  uint32_t size() const { return size_; }  // nodes besides the root
  uint32_t max_nodes() const { return uint32_t(nodes_.size() - 1); }
  uint32_t id_bound() const { return uint32_t(nodes_.size()); }
  bool full() const { return free_.empty(); }
  uint32_t tokens_per_block() const { return tokens_per_block_; }
  uint32_t num_groups() const { return num_groups_; }

 private:
  uint32_t bucket_of(uint64_t hash) const { return uint32_t(hash & bucket_mask_); }
  uint32_t first_bucket_of(uint32_t parent, uint32_t scope, int32_t first_token) const;

  uint32_t tokens_per_block_;
  uint32_t num_groups_;
  std::vector<TreeNode> nodes_;
  std::vector<int32_t> tokens_;   // tokens_per_block per node
  std::vector<uint32_t> blocks_;  // num_groups per node
  std::vector<uint32_t> free_;    // free node ids
  std::vector<uint32_t> buckets_;
  std::vector<uint32_t> first_buckets_;
  uint64_t bucket_mask_ = 0;
  uint32_t size_ = 0;
};

template <class F>
void RadixTree::for_each_first_token_match(uint32_t parent, uint32_t scope, int32_t first_token,
                                           F&& f) const {
  for (uint32_t n = first_buckets_[first_bucket_of(parent, scope, first_token)]; n != kNoNode;
       n = nodes_[n].first_next) {
    const TreeNode& t = nodes_[n];
    if (t.parent == parent && t.scope == scope && tokens(n)[0] == first_token) f(n);
  }
}

}  // namespace kvc
