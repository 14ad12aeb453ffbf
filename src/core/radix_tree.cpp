#include "core/radix_tree.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

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

// Whether a record's 16 tokens (16-byte aligned: records are 32-byte
// aligned) equal a prompt's.
inline bool same_16_tokens(const int32_t* record, const int32_t* want) {
#if defined(__SSE2__)
  // Four 16-byte compares, one mask.
  const __m128i* x = reinterpret_cast<const __m128i*>(record);
  const __m128i* y = reinterpret_cast<const __m128i*>(want);
  const __m128i e0 = _mm_cmpeq_epi32(_mm_load_si128(x), _mm_loadu_si128(y));
  const __m128i e1 = _mm_cmpeq_epi32(_mm_load_si128(x + 1), _mm_loadu_si128(y + 1));
  const __m128i e2 = _mm_cmpeq_epi32(_mm_load_si128(x + 2), _mm_loadu_si128(y + 2));
  const __m128i e3 = _mm_cmpeq_epi32(_mm_load_si128(x + 3), _mm_loadu_si128(y + 3));
  return _mm_movemask_epi8(_mm_and_si128(_mm_and_si128(e0, e1), _mm_and_si128(e2, e3))) == 0xffff;
#else
  return std::memcmp(record, want, 64) == 0;
#endif
}

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
      stride_(round_up(tokens_per_block + kHeadWords + num_groups, 8)),
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
  // In chunks of blocks, three tight loops a chunk apart: hash each block
  // of the next chunk (fetching its table slot); read each slot of this
  // one (the first entry with the block's tag is its candidate, whose
  // record is fetched); compare this chunk's candidates in order. The
  // chained hashes depend on the prompt only, so a chunk's loads are all
  // in flight at once, a chunk's hashing ahead of its comparison; a prompt
  // that misses early hashes at most two chunks past its cached prefix.
  // The candidate is almost always the node (32-bit tags); when it is not,
  // the slot's run is probed in full.
  constexpr uint32_t kChunk = 32;
  const uint32_t T = tokens_per_block_;
  BlockChain chain(parent_hash, scope_digest, T);
  uint32_t tags[2][kChunk];
  uint32_t candidates[kChunk];
  const uint64_t* const buckets = buckets_.data();
  const uint32_t* const records = records_.data();
  const uint64_t stride = stride_;
  const uint32_t head = head_at_;
  // The lines a record spans: its first and its last (which has the head
  // and the block ids), and any between for blocks of 32 tokens or more.
  const uint32_t last_byte = (head + kHeadWords + num_groups_) * 4 - 1;
  auto chunk_size = [&](uint64_t base) {
    return base < num_blocks ? uint32_t(std::min<uint64_t>(kChunk, num_blocks - base)) : 0;
  };
  auto hash_chunk = [&](uint64_t base, uint32_t* out_tags) {
    const uint32_t n = chunk_size(base);
    for (uint32_t i = 0; i < n; ++i) {
      const uint32_t tag = tag_of(chain.next(tokens + (base + i) * T));
      out_tags[i] = tag;
      __builtin_prefetch(&buckets[home(tag)]);
    }
  };
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
  // `sixteen`: std::true_type when blocks have 16 tokens (one compare
  // sequence, compiled apart), std::false_type for any other size.
  auto is_block = [&](auto sixteen, uint32_t n, const int32_t* want) {
    const uint32_t* r = records + n * stride;
    uint64_t h[2];
    std::memcpy(h, r + head + kParent, sizeof(h));
    if (h[0] != key || h[1] != want_len) return false;
    const int32_t* have = reinterpret_cast<const int32_t*>(r);
    if constexpr (decltype(sixteen)::value) return same_16_tokens(have, want);
    else return std::memcmp(have, want, size_t(T) * sizeof(int32_t)) == 0;
  };
  // Compares a chunk's candidates in order; returns how many are its blocks.
  auto compare_chunk = [&](auto sixteen, uint64_t base, uint32_t n, const uint32_t* chunk_tags,
                           uint32_t* found_at) {
    const int32_t* const chunk = tokens + base * T;
    for (uint32_t i = 0; i < n; ++i) {
      const int32_t* want = chunk + i * T;
      uint32_t found = candidates[i];
      if (found != kNoNode && !is_block(sixteen, found, want)) {
        found = kNoNode;
        for (uint64_t s = home(chunk_tags[i]);; s = next_slot(s)) {
          const uint64_t e = buckets[s];
          if (e == kEmpty) break;
          if (uint32_t(e >> 32) == chunk_tags[i] && is_block(sixteen, uint32_t(e), want)) {
            found = uint32_t(e);
            break;
          }
        }
      }
      if (found == kNoNode) return i;
      found_at[i] = found;
      key = pair(found, scope);
    }
    return n;
  };

  const uint64_t first = out.size();
  out.resize(first + num_blocks);
  uint32_t* const found_at = out.data() + first;
  hash_chunk(0, tags[0]);
  for (uint64_t base = 0, k = 0; base < num_blocks; base += kChunk, k ^= 1) {
    const uint32_t n = chunk_size(base);
    const uint32_t* const chunk_tags = tags[k];
    for (uint32_t i = 0; i < n; ++i) {
      const uint32_t tag = chunk_tags[i];
      uint32_t c = kNoNode;
      for (uint64_t s = home(tag);; s = next_slot(s)) {
        const uint64_t e = buckets[s];
        if (e == kEmpty) break;
        if (uint32_t(e >> 32) == tag) {
          c = uint32_t(e);
          const char* r = reinterpret_cast<const char*>(records + c * stride);
          __builtin_prefetch(r);
          __builtin_prefetch(r + last_byte);
          for (uint32_t at = 64; at + 64 <= last_byte; at += 64) __builtin_prefetch(r + at);
          break;
        }
      }
      candidates[i] = c;
    }
    hash_chunk(base + kChunk, tags[k ^ 1]);  // while the records arrive
    const uint32_t got = T == 16 ? compare_chunk(std::true_type{}, base, n, chunk_tags, found_at + base)
                                 : compare_chunk(std::false_type{}, base, n, chunk_tags, found_at + base);
    if (got < n) {
      out.resize(first + base + got);
      return;
    }
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
