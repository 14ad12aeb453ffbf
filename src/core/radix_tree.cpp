#include "core/radix_tree.h"

#include <cstring>

#include "core/block_hash.h"

namespace kvc {

namespace {

uint64_t bucket_count_for(uint32_t max_nodes) {
  uint64_t n = 256;
  while (n < 2ull * max_nodes) n <<= 1;
  return n;
}

}  // namespace

RadixTree::RadixTree(uint32_t max_nodes, uint32_t tokens_per_block, uint32_t num_groups)
    : tokens_per_block_(tokens_per_block),
      num_groups_(num_groups),
      nodes_(uint64_t(max_nodes) + 1),
      tokens_((uint64_t(max_nodes) + 1) * tokens_per_block),
      blocks_((uint64_t(max_nodes) + 1) * num_groups, kNoBlock) {
  const uint64_t buckets = bucket_count_for(max_nodes);
  buckets_.assign(buckets, kNoNode);
  first_buckets_.assign(buckets, kNoNode);
  bucket_mask_ = buckets - 1;
  free_.reserve(max_nodes);
  for (uint32_t i = max_nodes; i > 0; --i) free_.push_back(i);
  nodes_[kRoot].live = true;
}

uint32_t RadixTree::first_bucket_of(uint32_t parent, uint32_t scope, int32_t first_token) const {
  return uint32_t(hash_first_token(parent, scope, first_token) & bucket_mask_);
}

uint32_t RadixTree::find(uint32_t parent, uint32_t scope, const int32_t* tokens,
                         uint32_t num_tokens, const std::string& extra, uint64_t hash) const {
  for (uint32_t n = buckets_[bucket_of(hash)]; n != kNoNode; n = nodes_[n].bucket_next) {
    const TreeNode& t = nodes_[n];
    // The hash picks the bucket; the full key decides.
    if (t.hash == hash && t.parent == parent && t.scope == scope &&
        t.num_tokens == num_tokens &&
        std::memcmp(this->tokens(n), tokens, size_t(num_tokens) * sizeof(int32_t)) == 0 &&
        t.extra == extra)
      return n;
  }
  return kNoNode;
}

uint32_t RadixTree::insert(uint32_t parent, uint32_t scope, const int32_t* tokens,
                           uint32_t num_tokens, std::string&& extra, uint64_t hash,
                           const uint32_t* blocks) {
  const uint32_t id = free_.back();
  free_.pop_back();
  ++size_;
  TreeNode& t = nodes_[id];
  t = TreeNode{};
  t.live = true;
  t.parent = parent;
  t.scope = scope;
  t.num_tokens = num_tokens;
  t.hash = hash;
  t.extra = std::move(extra);
  std::memcpy(&tokens_[uint64_t(id) * tokens_per_block_], tokens,
              size_t(num_tokens) * sizeof(int32_t));
  std::memcpy(&blocks_[uint64_t(id) * num_groups_], blocks, size_t(num_groups_) * sizeof(uint32_t));

  TreeNode& p = nodes_[parent];
  t.next_sibling = p.first_child;
  if (p.first_child != kNoNode) nodes_[p.first_child].prev_sibling = id;
  p.first_child = id;
  ++p.num_children;

  uint32_t& head = buckets_[bucket_of(hash)];
  t.bucket_next = head;
  if (head != kNoNode) nodes_[head].bucket_prev = id;
  head = id;

  t.first_bucket = first_bucket_of(parent, scope, tokens[0]);
  uint32_t& first = first_buckets_[t.first_bucket];
  t.first_next = first;
  if (first != kNoNode) nodes_[first].first_prev = id;
  first = id;
  return id;
}

void RadixTree::erase(uint32_t id) {
  TreeNode& t = nodes_[id];
  TreeNode& p = nodes_[t.parent];
  if (t.prev_sibling != kNoNode) nodes_[t.prev_sibling].next_sibling = t.next_sibling;
  else p.first_child = t.next_sibling;
  if (t.next_sibling != kNoNode) nodes_[t.next_sibling].prev_sibling = t.prev_sibling;
  --p.num_children;

  if (t.bucket_prev != kNoNode) nodes_[t.bucket_prev].bucket_next = t.bucket_next;
  else buckets_[bucket_of(t.hash)] = t.bucket_next;
  if (t.bucket_next != kNoNode) nodes_[t.bucket_next].bucket_prev = t.bucket_prev;

  if (t.first_prev != kNoNode) nodes_[t.first_prev].first_next = t.first_next;
  else first_buckets_[t.first_bucket] = t.first_next;
  if (t.first_next != kNoNode) nodes_[t.first_next].first_prev = t.first_prev;

  for (uint32_t g = 0; g < num_groups_; ++g) blocks_[uint64_t(id) * num_groups_ + g] = kNoBlock;
  t.extra.clear();
  t.live = false;
  free_.push_back(id);  // capacity reserved for every node
  --size_;
}

}  // namespace kvc
