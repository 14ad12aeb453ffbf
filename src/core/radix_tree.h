// The radix tree of published blocks, shared by all layer groups: a node is
// one block position of some prefix and holds one block slot per group.
// Nodes are found by their full key (parent, scope, tokens, extra keys)
// through an open-addressing table on the block hash; a second table on
// (parent, scope, first token) finds the candidates of a token-by-token
// (partial) match. Storage is preallocated: no allocation after creation
// except for the (rare) extra-key bytes a node carries.
//
// A chain's successor is in neither table: a node whose id is its parent's
// plus one (the parent not the root) is found by that id instead, which
// find(), the first-token walk and match_full_blocks try before the tables.
// insert() takes id parent + 1 whenever it is free, so a prompt published
// in one go takes consecutive ids: a commit of a long new prompt writes no
// table slot for most of its nodes (two random cache lines a node fewer)
// and writes its nodes and records in address order, and evicting it
// erases none. Else (a chain start) it takes the first free id at or after
// a cursor that moves on past it: ids are handed out in rising order
// around the id space, like a log. For that to give runs, the id space
// has spare ids (an eighth more than the nodes the tree may hold): at its
// full size the tree had only the few hundred ids of the latest victims
// free, in the short runs their own chains had been given, so breaks lived
// on (half the nodes evicted on the Mooncake trace at 12 MB were not their
// parent's successor, with a stack of freed ids or a cursor alike). With
// spare ids the cursor finds the ids of old nodes, most of them evicted by
// the time it comes round, in long runs (88% successors). One exception
// keeps the ids just evicted in use while their lines are in cache: a
// chain start first takes the run an eviction last freed downwards (a
// chain evicted leaf first), when 16 ids are free there.
//
// Layout, for speed (a lookup of a long cached prompt touches every node on
// its path, in a structure of hundreds of MB):
// - each table entry holds a node id and 32 bits of its hash, so a probe
//   reads no node whose hash differs, and removal (backward shift) needs no
//   node at all;
// - what a lookup compares (tokens, parent, scope, length) and the node's
//   block ids sit together in one 32-byte aligned record (96 bytes on two
//   cache lines for 16-token blocks), apart from the rest (TreeNode: hash,
//   child count, retention and eviction state) that a lookup never reads.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/big_array.h"
#include "core/block_hash.h"
#include "core/block_pool.h"

// The prefetch helpers below only read and prefetch: out of line, the
// compiler may find them free of side effects and drop the calls, so they
// are always inlined.
#if defined(__GNUC__)
#define KVC_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define KVC_ALWAYS_INLINE inline
#endif

namespace kvc {

struct BlockKey;   // key_builder.h
class KeyBuilder;  // key_builder.h

// A node's encoded extra keys: empty for almost every node, so it takes one
// pointer in the node and a heap string only when there are some.
class NodeExtra {
 public:
  bool empty() const { return !bytes_; }
  const char* data() const { return bytes_ ? bytes_->data() : ""; }
  size_t size() const { return bytes_ ? bytes_->size() : 0; }
  operator const std::string&() const { return bytes_ ? *bytes_ : none(); }
  bool operator==(const std::string& s) const { return bytes_ ? *bytes_ == s : s.empty(); }
  void clear() { bytes_.reset(); }
  // Takes `s` (allocates when `s` is not empty).
  void assign(std::string&& s) {
    if (s.empty()) bytes_.reset();
    else bytes_ = std::make_unique<std::string>(std::move(s));
  }

 private:
  static const std::string& none();
  std::unique_ptr<std::string> bytes_;
};

// TreeNode::tier of a node whose blocks are in the primary pools; other
// tiers name theirs (tier.h).
constexpr uint8_t kPrimaryTier = 0;

// What a node holds besides its lookup record: read by eviction, retention
// and checks, never by a lookup. One cache line.
struct alignas(64) TreeNode {
  uint64_t hash = 0;        // chained bucket hash
  uint32_t parent = kNoNode;
  uint32_t scope = 0;
  uint32_t num_tokens = 0;  // tokens_per_block, or fewer for a partial block
  uint32_t num_children = 0;
  uint32_t first_tag = 0;   // its key in the first-token table
  uint8_t priority = 35;    // set by the last owner to release it
  bool live = false;
  uint8_t tier = 0;         // where its blocks are: kPrimaryTier or another tier's id
  uint64_t age = 0;         // moment the last owner released it
  // Retention: when the node was published (ms on the retention clock) and
  // how long after that its priority stays before reverting to 35
  // (0: for ever), as the last owner to release it set them.
  uint64_t reusable_at = 0;
  uint64_t duration_ms = 0;
  NodeExtra extra;          // encoded extra keys overlapping the block
};
static_assert(sizeof(TreeNode) == 64, "a tree node is one cache line");

class RadixTree {
 public:
  static constexpr uint32_t kRoot = 0;

  // Room for `max_nodes` nodes besides the root (node ids up to
  // id_bound(), past max_nodes: spare ids, radix_tree.h). With track_children the
  // tree also links each node's children (first_child, next_sibling), which
  // the host tier and page moves walk; lookups and evictions without them
  // touch no sibling.
  RadixTree(uint32_t max_nodes, uint32_t tokens_per_block, uint32_t num_groups,
            bool track_children = false);

  // The node with exactly this key, or kNoNode.
  uint32_t find(const BlockKey& key) const;
  uint32_t find(uint32_t parent, uint32_t scope, const int32_t* tokens, uint32_t num_tokens,
                const std::string& extra, uint64_t hash) const;

  // Walks a prompt's full blocks without extra keys from `parent` (whose
  // hash is `parent_hash`): appends to `out` the node of each block of
  // `tokens` that is in the tree, up to `num_blocks` blocks, and stops at
  // the first that is not: the nodes find() gives, block after block. Tries
  // the node after the previous block's first (a chain published in one go
  // has consecutive ids), else hashes and probes as find() does, with the
  // hashes, table slots and nodes of the blocks ahead fetched early; the
  // full key decides either way. `keys` builds the hashes (key_builder.h).
  void match_full_blocks(uint32_t parent, uint64_t parent_hash, const KeyBuilder& keys,
                         const int32_t* tokens, uint64_t num_blocks,
                         std::vector<uint32_t>& out) const;
  // The same with the keys of (scope, scope_digest).
  void match_full_blocks(uint32_t parent, uint64_t parent_hash, uint32_t scope,
                         uint64_t scope_digest, const int32_t* tokens, uint64_t num_blocks,
                         std::vector<uint32_t>& out) const;

  // Calls f(node) for every child of `parent` in `scope` whose first token
  // is `first_token`.
  template <class F>
  void for_each_first_token_match(uint32_t parent, uint32_t scope, int32_t first_token,
                                  F&& f) const;

  // Links a new node; the key must not be present and a node must be free.
  uint32_t insert(const BlockKey& key, const uint32_t* blocks);
  // Unlinks a leaf and frees its slot.
  void erase(uint32_t node);
  // insert() of a full block without extra keys under `parent` (not the
  // root), its node published with `priority` at `now_ms` (the fields
  // Eviction::mark_published sets, written at once): the commit loop of a
  // long new prompt, inlined there. The same outcome as insert() then
  // mark_published(); the key must not be present and a node must be free.
  KVC_ALWAYS_INLINE uint32_t insert_plain(uint32_t parent, uint32_t scope, const int32_t* tokens,
                                          uint64_t hash, const uint32_t* blocks, uint8_t priority,
                                          uint64_t now_ms);
  // Inserts that can be made before the tree is full.
  uint32_t num_free() const { return max_nodes_ - size_; }

  const TreeNode& node(uint32_t id) const { return nodes_[id]; }
  TreeNode& node(uint32_t id) { return nodes_[id]; }
  const int32_t* tokens(uint32_t id) const {
    return reinterpret_cast<const int32_t*>(record(id));
  }
  uint32_t block(uint32_t id, uint32_t group) const { return record(id)[blocks_at_ + group]; }
  const uint32_t* blocks(uint32_t id) const { return record(id) + blocks_at_; }
  // out[i] = block(nodes[i], group) for i < n.
  void gather_blocks(const uint32_t* nodes, uint64_t n, uint32_t group, uint32_t* out) const {
    const uint32_t* const at = records_.data() + blocks_at_ + group;
    const uint64_t stride = stride_;
    for (uint64_t i = 0; i < n; ++i) out[i] = at[nodes[i] * stride];
  }
  // A windowed group's slot empties (kNoBlock) when its block is evicted; a
  // node moving between tiers takes blocks of the other tier's pools.
  void set_block(uint32_t id, uint32_t group, uint32_t block) { record(id)[blocks_at_ + group] = block; }
  // A live node's tier (TreeNode::tier) read from its record: where a
  // lookup's nodes are checked one by one (the host tier's onboards, an
  // add's count of the cached blocks it takes), their records are in cache
  // and their TreeNode lines are not.
  uint8_t tier(uint32_t id) const { return uint8_t(record(id)[head_at_ + kFlags] >> kTierShift); }
  // Moves a node to another tier: TreeNode::tier and its record's copy.
  void set_tier(uint32_t id, uint8_t tier) {
    nodes_[id].tier = tier;
    uint32_t& flags = record(id)[head_at_ + kFlags];
    flags = (flags & kFlagsCompared) | uint32_t(tier) << kTierShift;
  }
  // Sequences whose published block list names this node, in a model whose
  // groups are all windowed (no full group anchors nodes by its blocks).
  uint32_t& holders(uint32_t id) { return holders_[id]; }
  // Children of a node (track_children only).
  uint32_t first_child(uint32_t id) const { return links_[id].first_child; }
  uint32_t next_sibling(uint32_t id) const { return links_[id].next_sibling; }
  uint32_t holders(uint32_t id) const { return holders_[id]; }
  bool is_leaf(uint32_t id) const { return nodes_[id].num_children == 0; }

  // Whether node `id` under `parent` has entries in the two tables: all
  // but a chain's successor (id == parent + 1, the parent not the root),
  // which lookups find by its id.
  static bool tabled(uint32_t id, uint32_t parent) {
    return parent == kRoot || id != parent + 1;
  }

  // Warms what erase(id) will touch: the node, its record and table slots.
  // Reads the node (its hash), so it is best called once the node is near.
  KVC_ALWAYS_INLINE void prefetch_erase(uint32_t id) const {
    const TreeNode& t = nodes_[id];
    __builtin_prefetch(blocks_line(id), 1);
    if (!tabled(id, t.parent)) return;  // its parent, id - 1, is near
    // Each slot's line and the next one, where the backward shift may go on.
    const uint64_t b = home(tag_of(t.hash));
    const uint64_t f = home(t.first_tag);
    __builtin_prefetch(&buckets_[b], 1);
    __builtin_prefetch(&buckets_[((b | 7) + 1) & table_mask_], 1);
    __builtin_prefetch(&first_buckets_[f], 1);
    __builtin_prefetch(&first_buckets_[((f | 7) + 1) & table_mask_], 1);
    __builtin_prefetch(&nodes_[t.parent], 1);
  }
  // Fetches the line of node `id`'s record that holds its block ids.
  KVC_ALWAYS_INLINE void prefetch_blocks(uint32_t id) const { __builtin_prefetch(blocks_line(id), 0); }
  // Fetches node `id`'s line (a guess of a node about to be read).
  KVC_ALWAYS_INLINE void prefetch_node(uint32_t id) const { __builtin_prefetch(&nodes_[id], 1); }
  // prefetch_erase of `id` and of its next `depth` ancestors, the usual
  // next victims once `id` is evicted: a chain evicted from its leaf up
  // finds its table slots fetched a few evictions ahead. Returns the last
  // node warmed (kRoot: none).
  KVC_ALWAYS_INLINE uint32_t prefetch_erase_path(uint32_t id, int depth) const {
    uint32_t last = kRoot;
    for (int d = 0; d <= depth && id != kRoot; ++d, id = nodes_[id].parent) {
      prefetch_erase(id);
      last = id;
    }
    // The next ancestor is read by the next call: fetch it now.
    if (id != kRoot) __builtin_prefetch(&nodes_[id], 1);
    return last;
  }

  // Warms what insert() will touch `ahead` inserts from now, for a node
  // keyed `hash` whose first token is `first_token` in `scope`: its bucket
  // table home, the free id it will take, that id's node and record, and
  // (its parent being the id taken one insert earlier) its first-token
  // table home. A commit of a long new prompt inserts thousands of nodes
  // whose every line is a cache miss; fetched a few inserts ahead, the
  // misses overlap instead of following one another.
  // `last` is the parent of the next insert (kNoNode: unknown): when id
  // last + 1 is free, the next inserts are guessed to take the ids that
  // follow (last + 1 + ahead, chain successors without table slots to
  // warm); else the next insert starts a chain at the id the cursor
  // points to, and the later ones are guessed to follow it.
  KVC_ALWAYS_INLINE void prefetch_insert(uint64_t hash, uint32_t scope, int32_t first_token,
                                         uint32_t ahead, uint32_t last) const {
    uint64_t id;
    if (last != kNoNode && last != kRoot && uint64_t(last) + 1 < nodes_.size() &&
        is_free(last + 1)) {
      id = uint64_t(last) + 1 + ahead;
    } else {
      if (ahead >= num_free()) return;
      id = uint64_t(next_start()) + ahead;
      if (ahead == 0) {  // the chain start: tabled
        __builtin_prefetch(&buckets_[home(tag_of(hash))], 1);
        if (last != kNoNode)
          __builtin_prefetch(&first_buckets_[home(first_tag_of(last, scope, first_token))], 1);
      }
    }
    if (id < nodes_.size()) {
      __builtin_prefetch(&nodes_[id], 1);
      __builtin_prefetch(record(uint32_t(id)), 1);
      __builtin_prefetch(record(uint32_t(id)) + 16, 1);
    }
  }

  uint32_t size() const { return size_; }  // nodes besides the root
  uint32_t max_nodes() const { return max_nodes_; }
  // Node ids are below it (spare ids included): per-node arrays' size.
  uint32_t id_bound() const { return uint32_t(nodes_.size()); }
  // The node records' place: node n's at record_words() + n *
  // record_stride(), its tokens first, its parent's id at word
  // record_parent_at(), its group g block id at word record_blocks_at() + g
  // (the record writer reads a written node's there: block_store.h,
  // NodeRecords). Fixed for the tree's life.
  const uint32_t* record_words() const { return records_.data(); }
  uint32_t record_stride() const { return stride_; }
  uint32_t record_parent_at() const { return head_at_ + kParent; }
  uint32_t record_blocks_at() const { return blocks_at_; }
  bool full() const { return size_ == max_nodes_; }
  uint32_t tokens_per_block() const { return tokens_per_block_; }
  uint32_t num_groups() const { return num_groups_; }

  // The checker's part (radix_tree_check.cpp): every table entry names a
  // live, tabled node under its own tag, once, and every live tabled node
  // has one entry in each table; every live node is found once by the
  // first-token walk; the free bits are set for the dead ids alone, and
  // the word bits for the words with a free id. Throws
  // Error(KVC_ERR_INTERNAL).
  void check_tables() const;

 private:
  uint32_t max_nodes_;  // live nodes the tree may hold besides the root
  // A node's lookup record, in 32-bit words: tokens_per_block tokens, then
  // parent, scope, num_tokens, flags, then one block id per group. Flags:
  // bit 0 set when the node has extra keys (kHasExtraKeys); bits 8-15 its
  // tier, a copy of TreeNode::tier on the line a lookup has just read
  // (tier()), which the lookup's compares leave out (kFlagsCompared).
  enum : uint32_t { kParent = 0, kScope = 1, kNumTokens = 2, kFlags = 3, kHeadWords = 4 };
  static constexpr uint32_t kHasExtraKeys = 1;
  static constexpr uint32_t kTierShift = 8;
  static constexpr uint32_t kFlagsCompared = ~(uint32_t(0xff) << kTierShift);
  const void* blocks_line(uint32_t id) const { return record(id) + blocks_at_; }
  const uint32_t* record(uint32_t id) const { return records_.data() + uint64_t(id) * stride_; }
  uint32_t* record(uint32_t id) { return records_.data() + uint64_t(id) * stride_; }

  // Table entries: node id (low half) and tag (high half); the tag is the
  // top 32 bits of the hash times an odd constant, its top bits the home
  // slot, so homes spread over the table even when hashes have 8 bits.
  static constexpr uint64_t kEmpty = ~uint64_t(0);
  static uint32_t tag_of(uint64_t hash) {
    return uint32_t((hash * 0x9e3779b97f4a7c15ull) >> 32);
  }
  uint64_t home(uint32_t tag) const { return tag >> table_shift_; }
  uint64_t next_slot(uint64_t i) const { return (i + 1) & table_mask_; }
  uint32_t first_tag_of(uint32_t parent, uint32_t scope, int32_t first_token) const {
    return tag_of(hash_first_token(first_key_, parent, scope, first_token) & hash_mask_);
  }
  static void table_insert(BigArray<uint64_t>& table, uint64_t start, uint64_t mask,
                           uint64_t entry);
  void table_erase(BigArray<uint64_t>& table, uint32_t tag, uint32_t node);

  uint32_t tokens_per_block_;
  uint32_t num_groups_;
  uint32_t head_at_;    // word offset of the record head
  uint32_t blocks_at_;  // word offset of the block ids
  uint32_t stride_;     // words per record (a multiple of 8)
  BigArray<TreeNode> nodes_;
  BigArray<uint32_t> records_;  // stride_ words per node, 32-byte aligned
  BigArray<uint32_t> holders_;  // per node (windowed-only models)
  struct ChildLinks {
    uint32_t first_child = kNoNode;
    uint32_t next_sibling = kNoNode;
    uint32_t prev_sibling = kNoNode;
  };
  BigArray<ChildLinks> links_;  // per node, with track_children
  // Free node ids (spare ones included: there is always one while the
  // tree is not full): a bit each (set: free), and a bit per word of those
  // (set: the word has a free id), by which a search skips full words.
  std::vector<uint64_t> free_bits_;
  std::vector<uint64_t> free_words_;
  uint32_t cursor_ = 1;  // where the search for the next chain start begins
  uint32_t recent_ = kNoNode;  // the id freed last (kNoNode: none since a chain start)
  bool is_free(uint32_t id) const { return (free_bits_[id >> 6] >> (id & 63)) & 1; }
  void take_free(uint32_t id) {
    uint64_t& w = free_bits_[id >> 6];
    w &= ~(uint64_t(1) << (id & 63));
    if (w == 0) free_words_[id >> 12] &= ~(uint64_t(1) << ((id >> 6) & 63));
  }
  void put_free(uint32_t id) {
    uint64_t& w = free_bits_[id >> 6];
    if (w == 0) free_words_[id >> 12] |= uint64_t(1) << ((id >> 6) & 63);
    w |= uint64_t(1) << (id & 63);
  }
  // The first free id at or after `from`, around the id space (one must
  // be free).
  uint32_t first_free_from(uint32_t from) const;
  // Whether ids id .. id + 15 are free.
  bool free_run_at(uint32_t id) const;
  // The id a chain start takes next: the id freed last when a run of 16
  // free ids starts there (a chain evicted whole, its lowest id freed last,
  // is taken back whole while its lines are still in cache), else the
  // first free id at the cursor.
  uint32_t next_start() const { return recent_run() ? recent_ : first_free_from(cursor_); }
  // Whether next_start() is the id freed last (a run of 16 free ids starts there).
  bool recent_run() const { return recent_ != kNoNode && free_run_at(recent_); }
  // Takes next_start() for a chain start (a node whose parent's successor
  // is not free); the cursor moves past an id it gave.
  uint32_t take_start();
  // insert()'s and insert_plain()'s common steps. The id of a new child of
  // `parent`: the chain successor's when it is free, else a chain start's.
  KVC_ALWAYS_INLINE uint32_t take_id(uint32_t parent) {
    if (parent != kRoot && uint64_t(parent) + 1 < nodes_.size() && is_free(parent + 1)) {
      take_free(parent + 1);
      return parent + 1;
    }
    return take_start();
  }
  // New node `id` becomes a child of `parent` (its count and links).
  KVC_ALWAYS_INLINE void link_child(uint32_t id, uint32_t parent) {
    ++nodes_[parent].num_children;
    if (links_.empty()) return;
    ChildLinks& l = links_[id];
    l = ChildLinks{};
    l.next_sibling = links_[parent].first_child;
    if (l.next_sibling != kNoNode) links_[l.next_sibling].prev_sibling = id;
    links_[parent].first_child = id;
  }
  // New node `id` enters both tables (a chain start: tabled()).
  KVC_ALWAYS_INLINE void table_insert_node(uint32_t id, uint64_t hash, uint32_t first_tag) {
    const uint32_t tag = tag_of(hash);
    table_insert(buckets_, home(tag), table_mask_, (uint64_t(tag) << 32) | id);
    table_insert(first_buckets_, home(first_tag), table_mask_, (uint64_t(first_tag) << 32) | id);
  }
  BigArray<uint64_t> buckets_;        // by block hash
  BigArray<uint64_t> first_buckets_;  // by (parent, scope, first token)
  FirstTokenKey first_key_;
  uint64_t hash_mask_;  // bucket_hash_bits() of a hash kept
  uint64_t table_mask_ = 0;
  uint32_t table_shift_ = 0;  // 32 - log2(table size)
  uint32_t size_ = 0;
};

KVC_ALWAYS_INLINE uint32_t RadixTree::insert_plain(uint32_t parent, uint32_t scope,
                                                   const int32_t* tokens, uint64_t hash,
                                                   const uint32_t* blocks, uint8_t priority,
                                                   uint64_t now_ms) {
  const uint32_t id = take_id(parent);  // (parent is not the root)
  TreeNode* const nodes = nodes_.data();
  ++size_;
  const uint32_t T = tokens_per_block_;
  const bool in_tables = id != parent + 1;
  TreeNode& t = nodes[id];
  t.hash = hash;
  t.parent = parent;
  t.scope = scope;
  t.num_tokens = T;
  t.num_children = 0;
  t.first_tag = in_tables ? first_tag_of(parent, scope, tokens[0]) : 0;
  t.priority = priority;
  t.live = true;
  t.tier = kPrimaryTier;
  t.age = 0;
  t.reusable_at = now_ms;
  t.duration_ms = 0;
  // t.extra: empty already (erase cleared it; no extra keys here).
  uint32_t* r = record(id);
  if (T == 16) std::memcpy(r, tokens, 16 * sizeof(int32_t));
  else std::memcpy(r, tokens, size_t(T) * sizeof(int32_t));
  const uint32_t head[kHeadWords] = {parent, scope, T, uint32_t(kPrimaryTier) << kTierShift};
  std::memcpy(r + head_at_, head, sizeof(head));
  for (uint32_t g = 0; g < num_groups_; ++g) r[blocks_at_ + g] = blocks[g];
  link_child(id, parent);
  if (in_tables) table_insert_node(id, hash, t.first_tag);
  return id;
}

template <class F>
void RadixTree::for_each_first_token_match(uint32_t parent, uint32_t scope, int32_t first_token,
                                           F&& f) const {
  // The chain successor first (in no table).
  if (parent != kRoot && uint64_t(parent) + 1 < id_bound()) {
    const uint32_t n = parent + 1;
    const uint32_t* r = record(n);
    if (r[head_at_ + kParent] == parent && r[head_at_ + kScope] == scope &&
        tokens(n)[0] == first_token)
      f(n);
  }
  const uint32_t tag = first_tag_of(parent, scope, first_token);
  for (uint64_t i = home(tag);; i = next_slot(i)) {
    const uint64_t e = first_buckets_[i];
    if (e == kEmpty) return;
    if (uint32_t(e >> 32) != tag) continue;
    const uint32_t n = uint32_t(e);
    const uint32_t* r = record(n);
    if (r[head_at_ + kParent] == parent && r[head_at_ + kScope] == scope &&
        tokens(n)[0] == first_token)
      f(n);
  }
}

}  // namespace kvc
