#include "core/radix_tree.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "core/block_hash.h"
#include "core/block_hash_inline.h"
#include "core/key_builder.h"

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

// Node ids for a tree of `max_nodes` nodes besides the root: an eighth
// more (radix_tree.h: spare ids make chain ids consecutive), below kNoNode.
uint64_t ids_for(uint32_t max_nodes) {
  return std::min<uint64_t>(uint64_t(max_nodes) + max_nodes / 8, kNoNode - 2);
}

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
    : max_nodes_(max_nodes),
      tokens_per_block_(tokens_per_block),
      num_groups_(num_groups),
      head_at_(tokens_per_block),
      blocks_at_(tokens_per_block + kHeadWords),
      stride_(round_up(tokens_per_block + kHeadWords + num_groups, 8)),
      nodes_(ids_for(max_nodes) + 1),
      records_((ids_for(max_nodes) + 1) * stride_),
      holders_(ids_for(max_nodes) + 1, 0),
      links_(track_children ? ids_for(max_nodes) + 1 : 0),
      first_key_(first_token_key()),
      hash_mask_(bucket_hash_bits() == 64 ? ~uint64_t(0) : (uint64_t(1) << bucket_hash_bits()) - 1) {
  const uint64_t ids = ids_for(max_nodes);
  for (uint64_t id = 0; id <= ids; ++id) {
    uint32_t* r = record(uint32_t(id));
    r[head_at_ + kParent] = kNoNode;
    std::fill(r + blocks_at_, r + blocks_at_ + num_groups_, kNoBlock);
  }
  const uint32_t bits = table_bits_for(max_nodes);
  buckets_ = BigArray<uint64_t>(uint64_t(1) << bits, kEmpty);
  first_buckets_ = BigArray<uint64_t>(uint64_t(1) << bits, kEmpty);
  table_mask_ = (uint64_t(1) << bits) - 1;
  table_shift_ = 32 - bits;
  const uint64_t words = (ids + 1 + 63) / 64;
  free_bits_.assign(words, 0);
  free_words_.assign((words + 63) / 64, 0);
  for (uint64_t id = 1; id <= ids; ++id) put_free(uint32_t(id));
  nodes_[kRoot].live = true;
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

uint32_t RadixTree::first_free_from(uint32_t from) const {
  uint64_t w = from >> 6;
  const uint64_t at = free_bits_[w] & (~uint64_t(0) << (from & 63));
  if (at != 0) return uint32_t(w * 64 + uint64_t(__builtin_ctzll(at)));
  // The next word with a free id, by the word bits, around once (back to
  // word w itself, whose ids below `from` come last).
  const uint64_t num_words = free_bits_.size(), num_sums = free_words_.size();
  w = w + 1 == num_words ? 0 : w + 1;
  uint64_t s = w >> 6;
  uint64_t sums = free_words_[s] & (~uint64_t(0) << (w & 63));
  for (uint64_t i = 0; i <= num_sums; ++i) {
    if (sums != 0) {
      const uint64_t word = s * 64 + uint64_t(__builtin_ctzll(sums));
      return uint32_t(word * 64 + uint64_t(__builtin_ctzll(free_bits_[word])));
    }
    s = s + 1 == num_sums ? 0 : s + 1;
    sums = free_words_[s];
  }
  return kNoNode;
}

bool RadixTree::free_run_at(uint32_t id) const {
  const uint64_t w = id >> 6, s = id & 63;
  uint64_t bits = free_bits_[w] >> s;
  if (s > 48) bits |= w + 1 < free_bits_.size() ? free_bits_[w + 1] << (64 - s) : 0;
  return (bits & 0xffff) == 0xffff;
}

uint32_t RadixTree::take_start() {
  uint32_t id = recent_;
  if (!recent_run()) {  // next_start() from the cursor, which moves past it
    id = first_free_from(cursor_);
    cursor_ = id + 1 < id_bound() ? id + 1 : 1;
  }
  recent_ = kNoNode;
  take_free(id);
  return id;
}

uint32_t RadixTree::find(uint32_t parent, uint32_t scope, const int32_t* tokens,
                         uint32_t num_tokens, const std::string& extra, uint64_t hash) const {
  // The full key decides (a dead record's parent is kNoNode: never a match).
  auto is_key = [&](uint32_t n) {
    const uint32_t* r = record(n);
    return r[head_at_ + kParent] == parent && r[head_at_ + kScope] == scope &&
           r[head_at_ + kNumTokens] == num_tokens &&
           std::memcmp(this->tokens(n), tokens, size_t(num_tokens) * sizeof(int32_t)) == 0 &&
           ((r[head_at_ + kFlags] & kHasExtraKeys) != 0 ? nodes_[n].extra == extra : extra.empty());
  };
  // The chain successor, in no table.
  if (parent != kRoot && uint64_t(parent) + 1 < id_bound() && is_key(parent + 1)) return parent + 1;
  const uint32_t tag = tag_of(hash);
  for (uint64_t i = home(tag);; i = next_slot(i)) {
    const uint64_t e = buckets_[i];
    if (e == kEmpty) return kNoNode;
    if (uint32_t(e >> 32) != tag) continue;
    // The hash picks the slot; the full key decides.
    if (is_key(uint32_t(e))) return uint32_t(e);
  }
}

uint32_t RadixTree::find(const BlockKey& key) const {
  return find(key.parent, key.scope, key.tokens, key.num_tokens, *key.extra, key.hash);
}

void RadixTree::match_full_blocks(uint32_t parent, uint64_t parent_hash, uint32_t scope,
                                  uint64_t scope_digest, const int32_t* tokens,
                                  uint64_t num_blocks, std::vector<uint32_t>& out) const {
  match_full_blocks(parent, parent_hash, KeyBuilder(scope, scope_digest, tokens_per_block_),
                    tokens, num_blocks, out);
}

void RadixTree::match_full_blocks(uint32_t parent, uint64_t parent_hash, const KeyBuilder& keys,
                                  const int32_t* tokens, uint64_t num_blocks,
                                  std::vector<uint32_t>& out) const {
  const uint32_t scope = keys.scope();
  // Two ways to find each block's node, the full key deciding either way
  // (parent, scope, tokens, no extra keys: keys are unique, so both give
  // the same node):
  // - the successor guess: a prompt published in one go took consecutive
  //   node ids where it could (insert takes parent + 1 when it is free,
  //   and a chain start the first free id at a cursor that sweeps the ids
  //   in order: radix_tree.h), so block b's node is most often the one after
  //   block b-1's. A wrong guess costs one record read; a dead record
  //   never matches (erase clears its parent). A chain successor (node
  //   parent + 1) is in no table: the hashed walk tries it when the table
  //   has no match.
  // - the hashed walk, in chunks, with three tight loops a chunk apart:
  //   hash each block of the next chunk (fetching its table slot); read
  //   each slot of this one (the first entry with the block's tag is its
  //   candidate, whose record is fetched); compare this chunk's candidates
  //   in order. The chained hashes depend on the prompt only, so a chunk's
  //   loads are all in flight at once. The candidate is almost always the
  //   node (32-bit tags); when it is not, the slot's run is probed in full.
  // Guessing runs while it hits; after a miss the walk hashes until a
  // chunk ends on consecutive ids, then guesses again.
  constexpr uint32_t kChunk = 32;
  constexpr uint32_t kGuessAhead = 8;  // records fetched ahead of a guess
  const uint32_t T = tokens_per_block_;
  uint32_t tags[2][kChunk];
  uint32_t candidates[kChunk];
  const uint64_t* const buckets = buckets_.data();
  const uint32_t* const records = records_.data();
  const uint64_t stride = stride_;
  const uint32_t head = head_at_;
  const uint32_t bound = id_bound();
  // The lines a record spans: its first and its last (which has the head
  // and the block ids), and any between for blocks of 32 tokens or more.
  const uint32_t last_byte = (head + kHeadWords + num_groups_) * 4 - 1;
  auto prefetch_lines = [&](uint32_t n) {
    const char* r = reinterpret_cast<const char*>(records + n * stride);
    __builtin_prefetch(r);
    __builtin_prefetch(r + last_byte);
    for (uint32_t at = 64; at + 64 <= last_byte; at += 64) __builtin_prefetch(r + at);
  };
  // What a full block's record head must hold, compared as two 8-byte
  // words: (parent, scope), then (tokens_per_block tokens, no extra keys),
  // the flags' tier left out.
  auto pair = [](uint32_t lo, uint32_t hi) {
    const uint32_t w[2] = {lo, hi};
    uint64_t v;
    std::memcpy(&v, w, sizeof(v));
    return v;
  };
  uint64_t key = pair(parent, scope);
  const uint64_t want_len = pair(T, 0);
  const uint64_t len_compared = pair(~uint32_t(0), kFlagsCompared);
  static_assert(kScope == kParent + 1 && kNumTokens == kParent + 2 && kFlags == kParent + 3,
                "head word order");
  // `sixteen`: std::true_type when blocks have 16 tokens (one compare
  // sequence, compiled apart), std::false_type for any other size.
  auto is_block = [&](auto sixteen, uint32_t n, const int32_t* want) {
    const uint32_t* r = records + n * stride;
    uint64_t h[2];
    std::memcpy(h, r + head + kParent, sizeof(h));
    if (h[0] != key || (h[1] & len_compared) != want_len) return false;
    const int32_t* have = reinterpret_cast<const int32_t*>(r);
    if constexpr (decltype(sixteen)::value) return same_16_tokens(have, want);
    else return std::memcmp(have, want, size_t(T) * sizeof(int32_t)) == 0;
  };

  const uint64_t first = out.size();
  out.resize(first + num_blocks);
  uint32_t* const found_at = out.data() + first;
  uint64_t b = 0;          // blocks found so far
  uint32_t prev = parent;  // block b-1's node
  // Guesses from block b on while they hit.
  auto guess_run = [&](auto sixteen) {
    for (uint32_t a = 1; a <= kGuessAhead && prev + a < bound; ++a) prefetch_lines(prev + a);
    while (b < num_blocks && prev + 1 < bound) {
      const uint32_t g = prev + 1;
      if (g + kGuessAhead < bound) prefetch_lines(g + kGuessAhead);
      if (!is_block(sixteen, g, tokens + b * T)) break;
      found_at[b++] = g;
      prev = g;
      key = pair(g, scope);
    }
  };
  // Hashes blocks from b on, chained on prev's hash, until one is missing
  // (false), the last block, or a chunk that ends on consecutive ids (back
  // to guessing; the next chunk, already hashed, is dropped).
  auto hashed_run = [&](auto sixteen, uint64_t prev_hash) {
    BlockChain chain = keys.chain(prev_hash);
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
    hash_chunk(b, tags[0]);
    for (uint32_t k = 0; b < num_blocks; k ^= 1) {
      const uint64_t base = b;
      const uint32_t n = chunk_size(base);
      const uint32_t* const chunk_tags = tags[k];
      // A block with no entry is guessed to be a chain successor: the id
      // after the last candidate's (block base - 1's node: prev).
      uint64_t known = prev, known_at = 0;  // candidate of block base + known_at - 1
      for (uint32_t i = 0; i < n; ++i) {
        const uint32_t tag = chunk_tags[i];
        uint32_t c = kNoNode;
        for (uint64_t slot = home(tag);; slot = next_slot(slot)) {
          const uint64_t e = buckets[slot];
          if (e == kEmpty) break;
          if (uint32_t(e >> 32) == tag) {
            c = uint32_t(e);
            break;
          }
        }
        if (c != kNoNode) {
          known = c;
          known_at = i + 1;
        } else if (known != kRoot && known + (i + 1 - known_at) < bound) {
          c = uint32_t(known + (i + 1 - known_at));
        }
        if (c != kNoNode) prefetch_lines(c);
        candidates[i] = c;
      }
      hash_chunk(base + kChunk, tags[k ^ 1]);  // while the records arrive
      for (uint32_t i = 0; i < n; ++i) {
        const int32_t* want = tokens + (base + i) * T;
        uint32_t found = candidates[i];
        if (found != kNoNode && !is_block(sixteen, found, want)) {
          found = kNoNode;
          for (uint64_t slot = home(chunk_tags[i]);; slot = next_slot(slot)) {
            const uint64_t e = buckets[slot];
            if (e == kEmpty) break;
            if (uint32_t(e >> 32) == chunk_tags[i] && is_block(sixteen, uint32_t(e), want)) {
              found = uint32_t(e);
              break;
            }
          }
        }
        // Not in the table: the chain successor, if it is the block.
        if (found == kNoNode && prev != kRoot && uint64_t(prev) + 1 < bound &&
            is_block(sixteen, prev + 1, want))
          found = prev + 1;
        if (found == kNoNode) return false;
        found_at[b++] = found;
        prev = found;
        key = pair(found, scope);
      }
      if (n == kChunk && found_at[b - 1] == found_at[b - 2] + 1) return true;
    }
    return true;
  };
  auto walk = [&](auto sixteen) {
    bool guess = parent != kRoot;  // the root's children are not in sequence
    while (b < num_blocks) {
      if (guess) guess_run(sixteen);
      if (b == num_blocks) return;
      if (!hashed_run(sixteen, prev == parent ? parent_hash : nodes_[prev].hash)) return;
      guess = true;
    }
  };
  if (T == 16) walk(std::true_type{});
  else walk(std::false_type{});
  out.resize(first + b);
}

uint32_t RadixTree::insert(const BlockKey& key, const uint32_t* blocks) {
  NodeExtra extra;
  if (!key.extra->empty()) extra.assign(std::string(*key.extra));  // the only allocation, before any change
  const uint32_t parent = key.parent;
  const uint32_t id = take_id(parent);
  ++size_;
  // Every field written once (a publish run writes millions of nodes).
  TreeNode& t = nodes_[id];
  t.hash = key.hash;
  t.parent = parent;
  t.scope = key.scope;
  t.num_tokens = key.num_tokens;
  t.num_children = 0;
  const bool in_tables = tabled(id, parent);
  t.first_tag = in_tables ? first_tag_of(parent, key.scope, key.tokens[0]) : 0;
  t.priority = TreeNode{}.priority;
  t.live = true;
  t.tier = kPrimaryTier;
  t.age = 0;
  t.reusable_at = 0;
  t.duration_ms = 0;
  const bool has_extra = !extra.empty();
  t.extra = std::move(extra);

  uint32_t* r = record(id);
  // Copies of a known size (16 tokens, one group: the common case) are
  // inlined stores, not library calls.
  if (key.num_tokens == 16) std::memcpy(r, key.tokens, 16 * sizeof(int32_t));
  else std::memcpy(r, key.tokens, size_t(key.num_tokens) * sizeof(int32_t));
  r[head_at_ + kParent] = parent;
  r[head_at_ + kScope] = key.scope;
  r[head_at_ + kNumTokens] = key.num_tokens;
  r[head_at_ + kFlags] = (has_extra ? kHasExtraKeys : 0) | uint32_t(kPrimaryTier) << kTierShift;
  for (uint32_t g = 0; g < num_groups_; ++g) r[blocks_at_ + g] = blocks[g];
  link_child(id, parent);
  if (in_tables) table_insert_node(id, key.hash, t.first_tag);
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
  if (tabled(id, t.parent)) {
    table_erase(buckets_, tag_of(t.hash), id);
    table_erase(first_buckets_, t.first_tag, id);
  }
  uint32_t* r = record(id);
  std::fill(r + blocks_at_, r + blocks_at_ + num_groups_, kNoBlock);
  r[head_at_ + kParent] = kNoNode;  // a successor guess never matches a dead record
  t.extra.clear();
  t.live = false;
  // A chain evicted leaf first frees its ids downwards: the lowest id of
  // the run so extended is the next chain start's first choice (the ids
  // just evicted, still in cache); an id freed alone keeps it.
  if (recent_ == kNoNode || !is_free(recent_) || (id + 1 < id_bound() && is_free(id + 1)))
    recent_ = id;
  put_free(id);
  --size_;
}

}  // namespace kvc
