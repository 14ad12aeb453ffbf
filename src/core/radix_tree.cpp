#include "core/radix_tree.h"

#include <algorithm>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "core/block_hash.h"
#include "core/block_hash_inline.h"

namespace kvc {

namespace {

// Table slots: a power of two, at least twice the nodes (linear probing at
// a load of at most 1/2), and at most 2^32 (a tag's top bits pick the home).
uint32_t table_bits_for(uint32_t max_nodes) {
  uint32_t bits = 8;
  while (bits < 32 && (uint64_t(1) << bits) < 2ull * max_nodes) ++bits;
  return bits;
}

uint32_t round_up(uint32_t n, uint32_t to) { return (n + to - 1) / to * to; }

}  // namespace

const std::string& NodeExtra::none() {
  static const std::string empty;
  return empty;
}

RadixTree::RadixTree(uint32_t max_nodes, uint32_t tokens_per_block, uint32_t num_groups,
                     bool track_children)
    : tokens_per_block_(tokens_per_block),
      num_groups_(num_groups),
      head_at_(tokens_per_block),
      blocks_at_(tokens_per_block + kHeadWords),
      stride_(round_up(tokens_per_block + kHeadWords + num_groups, 16)),
      nodes_(uint64_t(max_nodes) + 1),
      records_((uint64_t(max_nodes) + 1) * stride_),
      holders_(uint64_t(max_nodes) + 1, 0),
      links_(track_children ? uint64_t(max_nodes) + 1 : 0) {
  for (uint64_t id = 0; id <= max_nodes; ++id) {
    uint32_t* r = record(uint32_t(id));
    r[head_at_ + kParent] = kNoNode;
    std::fill(r + blocks_at_, r + blocks_at_ + num_groups_, kNoBlock);
  }
  const uint32_t bits = table_bits_for(max_nodes);
  buckets_ = BigArray<uint64_t>(uint64_t(1) << bits, kEmpty);
  first_buckets_ = BigArray<uint64_t>(uint64_t(1) << bits, kEmpty);
  table_mask_ = (uint64_t(1) << bits) - 1;
  table_shift_ = 32 - bits;
  free_.reserve(max_nodes);
  for (uint32_t i = max_nodes; i > 0; --i) free_.push_back(i);
  nodes_[kRoot].live = true;
}

uint32_t RadixTree::first_tag_of(uint32_t parent, uint32_t scope, int32_t first_token) {
  return tag_of(hash_first_token(parent, scope, first_token));
}

void RadixTree::table_insert(BigArray<uint64_t>& table, uint64_t start, uint64_t mask,
                             uint64_t entry) {
  uint64_t i = start;
  while (table[i] != kEmpty) i = (i + 1) & mask;
  table[i] = entry;
}

void RadixTree::table_erase(BigArray<uint64_t>& table, uint32_t tag, uint32_t node) {
  const uint64_t mask = table_mask_;
  uint64_t i = home(tag);
  while (uint32_t(table[i]) != node) i = (i + 1) & mask;
  // Backward shift: move up every later entry of the run that may sit
  // closer to its home, so no lookup ever stops early at the hole i. An
  // entry moves when it is at least as far from its home as from the hole
  // (its home is not in (i, j], cyclically). Whether it moves is a coin
  // toss to the branch predictor: it is computed without a branch, with
  // what table[i] holds in `at_i` and the mask in a local (a store to the
  // table could alias the member).
  uint64_t at_i = table[i];
  for (uint64_t j = (i + 1) & mask;; j = (j + 1) & mask) {
    const uint64_t e = table[j];
    if (e == kEmpty) break;
    const uint64_t k = home(uint32_t(e >> 32));
    const uint64_t moves = uint64_t(0) - uint64_t(((j - k) & mask) >= ((j - i) & mask));
    at_i = (e & moves) | (at_i & ~moves);
    table[i] = at_i;
    i = (j & moves) | (i & ~moves);
  }
  table[i] = kEmpty;
}

bool RadixTree::same_tokens(const int32_t* a, const int32_t* b) const {
  if (tokens_per_block_ == 16) {
#if defined(__SSE2__)
    // Four 16-byte compares, one mask.
    const __m128i* x = reinterpret_cast<const __m128i*>(a);
    const __m128i* y = reinterpret_cast<const __m128i*>(b);
    const __m128i e0 = _mm_cmpeq_epi32(_mm_loadu_si128(x), _mm_loadu_si128(y));
    const __m128i e1 = _mm_cmpeq_epi32(_mm_loadu_si128(x + 1), _mm_loadu_si128(y + 1));
    const __m128i e2 = _mm_cmpeq_epi32(_mm_loadu_si128(x + 2), _mm_loadu_si128(y + 2));
    const __m128i e3 = _mm_cmpeq_epi32(_mm_loadu_si128(x + 3), _mm_loadu_si128(y + 3));
    return _mm_movemask_epi8(_mm_and_si128(_mm_and_si128(e0, e1), _mm_and_si128(e2, e3))) == 0xffff;
#else
    return std::memcmp(a, b, 64) == 0;
#endif
  }
  return std::memcmp(a, b, size_t(tokens_per_block_) * sizeof(int32_t)) == 0;
}

uint32_t RadixTree::find(uint32_t parent, uint32_t scope, const int32_t* tokens,
                         uint32_t num_tokens, const std::string& extra, uint64_t hash) const {
  const uint32_t tag = tag_of(hash);
  for (uint64_t i = home(tag);; i = next_slot(i)) {
    const uint64_t e = buckets_[i];
    if (e == kEmpty) return kNoNode;
    if (uint32_t(e >> 32) != tag) continue;
    // The hash picks the slot; the full key decides.
    const uint32_t n = uint32_t(e);
    const uint32_t* r = record(n);
    if (r[head_at_ + kParent] == parent && r[head_at_ + kScope] == scope &&
        r[head_at_ + kNumTokens] == num_tokens &&
        std::memcmp(this->tokens(n), tokens, size_t(num_tokens) * sizeof(int32_t)) == 0 &&
        (r[head_at_ + kHasExtra] != 0 ? nodes_[n].extra == extra : extra.empty()))
      return n;
  }
}

void RadixTree::match_full_blocks(uint32_t parent, uint64_t parent_hash, uint32_t scope,
                                  uint64_t scope_digest, const int32_t* tokens,
                                  uint64_t num_blocks, std::vector<uint32_t>& out) const {
  // A pipeline over the blocks: each one is hashed (and its table slot
  // fetched) 16 blocks ahead of its comparison, and its candidate node
  // fetched 8 ahead. The chained hashes depend on the prompt only, not on
  // the nodes found, and hashing one block per step hides the chain's
  // latency behind the comparisons.
  constexpr uint64_t kSlotLead = 16;
  constexpr uint64_t kNodeLead = 8;
  constexpr uint64_t kRing = 32;  // > kSlotLead, a power of two
  const uint32_t T = tokens_per_block_;
  BlockChain chain(parent_hash, scope_digest, T);
  uint32_t tags[kRing];
  uint64_t hashed = 0;
  auto hash_next = [&] {
    const uint32_t tag = tag_of(chain.next(tokens + hashed * T));
    tags[hashed % kRing] = tag;
    __builtin_prefetch(&buckets_[home(tag)]);
    ++hashed;
  };
  while (hashed < num_blocks && hashed < kSlotLead) hash_next();
  for (uint64_t b = 0; b < kNodeLead && b < hashed; ++b) prefetch_candidate(tags[b]);
  // What a full block's record head must hold, compared as two 8-byte
  // words: (parent, scope), then (tokens_per_block tokens, no extra keys).
  auto pair = [](uint32_t lo, uint32_t hi) {
    const uint32_t w[2] = {lo, hi};
    uint64_t v;
    std::memcpy(&v, w, sizeof(v));
    return v;
  };
  uint64_t key = pair(parent, scope);
  const uint64_t want_len = pair(T, 0);
  static_assert(kScope == kParent + 1 && kNumTokens == kParent + 2 && kHasExtra == kParent + 3,
                "head word order");
  for (uint64_t b = 0; b < num_blocks; ++b) {
    if (hashed < num_blocks) hash_next();
    if (b + kNodeLead < hashed) prefetch_candidate(tags[(b + kNodeLead) % kRing]);
    const uint32_t tag = tags[b % kRing];
    const int32_t* want = tokens + b * T;
    uint32_t found = kNoNode;
    for (uint64_t i = home(tag);; i = next_slot(i)) {
      const uint64_t e = buckets_[i];
      if (e == kEmpty) break;
      if (uint32_t(e >> 32) != tag) continue;
      const uint32_t n = uint32_t(e);
      const uint32_t* r = record(n);
      uint64_t head[2];
      std::memcpy(head, r + head_at_ + kParent, sizeof(head));
      if (head[0] == key && head[1] == want_len && same_tokens(this->tokens(n), want)) {
        found = n;
        break;
      }
    }
    if (found == kNoNode) return;
    out.push_back(found);
    key = pair(found, scope);
  }
}

uint32_t RadixTree::insert(uint32_t parent, uint32_t scope, const int32_t* tokens,
                           uint32_t num_tokens, std::string&& extra, uint64_t hash,
                           const uint32_t* blocks) {
  NodeExtra key_extra;
  key_extra.assign(std::move(extra));  // the only allocation, before any change
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
  t.extra = std::move(key_extra);
  t.first_tag = first_tag_of(parent, scope, tokens[0]);

  uint32_t* r = record(id);
  std::memcpy(r, tokens, size_t(num_tokens) * sizeof(int32_t));
  r[head_at_ + kParent] = parent;
  r[head_at_ + kScope] = scope;
  r[head_at_ + kNumTokens] = num_tokens;
  r[head_at_ + kHasExtra] = t.extra.empty() ? 0 : 1;
  std::memcpy(r + blocks_at_, blocks, size_t(num_groups_) * sizeof(uint32_t));
  ++nodes_[parent].num_children;
  if (!links_.empty()) {
    ChildLinks& l = links_[id];
    l = ChildLinks{};
    l.next_sibling = links_[parent].first_child;
    if (l.next_sibling != kNoNode) links_[l.next_sibling].prev_sibling = id;
    links_[parent].first_child = id;
  }

  const uint32_t tag = tag_of(hash);
  table_insert(buckets_, home(tag), table_mask_, (uint64_t(tag) << 32) | id);
  table_insert(first_buckets_, home(t.first_tag), table_mask_,
               (uint64_t(t.first_tag) << 32) | id);
  return id;
}

void RadixTree::erase(uint32_t id) {
  TreeNode& t = nodes_[id];
  --nodes_[t.parent].num_children;
  if (!links_.empty()) {
    const ChildLinks& l = links_[id];
    if (l.prev_sibling != kNoNode) links_[l.prev_sibling].next_sibling = l.next_sibling;
    else links_[t.parent].first_child = l.next_sibling;
    if (l.next_sibling != kNoNode) links_[l.next_sibling].prev_sibling = l.prev_sibling;
  }
  table_erase(buckets_, tag_of(t.hash), id);
  table_erase(first_buckets_, t.first_tag, id);
  uint32_t* r = record(id);
  std::fill(r + blocks_at_, r + blocks_at_ + num_groups_, kNoBlock);
  t.extra.clear();
  t.live = false;
  free_.push_back(id);  // capacity reserved for every node
  --size_;
}

}  // namespace kvc
