// Publishing: commit makes a sequence's full computed blocks reusable (a
// node each in the prefix index, or the node already there); remove
// publishes a partial tail with partial reuse on (publish_tail).
#include <algorithm>
#include <optional>
#include <string>

#include "core/key_builder.h"
#include "core/sequences.h"

namespace kvc {

// The chained hashes of the blocks one commit publishes (blocks [first,
// end)), kept in `out` (out[b - first]). Without extra keys they are made
// as the publishing loops reach them, a few blocks ahead of each insert:
// a block's hash is arithmetic (about 35 instructions), an insert mostly
// waits on stores into cold lines, and made in the same loop the two
// overlap, where a pass of hashing first ran on its own (bench_core's
// commit of a new 32K prompt: a quarter of its time).
class CommitHashes {
 public:
  // All of them already in `out` (blocks with extra keys: hash_blocks_with_extras).
  // No chain is seeded then: upto() never makes one.
  CommitHashes(uint64_t* out, uint64_t first, uint64_t end)
      : out_(out), s_(nullptr), first_(first), end_(end), done_(end), T_(0) {}
  // Made on demand (upto) from the hash of block first - 1's key.
  CommitHashes(uint64_t* out, const Sequence& s, uint64_t first, uint64_t end,
               uint64_t parent_hash, uint64_t scope_digest, uint32_t tokens_per_block)
      : out_(out), s_(&s), first_(first), end_(end), done_(first), T_(tokens_per_block) {
    chain_.emplace(parent_hash, scope_digest, tokens_per_block);
  }
  // Makes the hashes of every block before b (at most end).
  KVC_ALWAYS_INLINE void upto(uint64_t b) {
    if (b > end_) b = end_;
    for (; done_ < b; ++done_) out_[done_ - first_] = chain_->next(s_->token_at(done_ * T_));
  }
  // Block b's (b < a bound given to upto).
  uint64_t operator[](uint64_t b) const { return out_[b - first_]; }

 private:
  uint64_t* out_;
  const Sequence* s_;
  uint64_t first_, end_, done_;
  uint32_t T_;
  std::optional<BlockChain> chain_;
};

void Sequences::commit(uint64_t id, uint64_t num_computed, bool loaded) {
  if (stores_ != nullptr) stores_->prefetch_for_commit();
  // Plan: checks, and the extra keys of every block to publish encoded
  // first (the only allocation); their chained hashes with them, or (no
  // extra keys) as the apply loops reach them (CommitHashes).
  Sequence& s = sequence(id);
  if (num_computed > s.length())
    invalid_argument("num_computed (" + std::to_string(num_computed) + ") exceeds the length (" +
                     std::to_string(s.length()) + " tokens) of " + name(id));
  const uint64_t committed = std::max(s.committed, num_computed);
  const uint64_t first = s.published;
  const uint64_t end = cfg_.block_reuse ? committed / T_ : first;
  const bool extras = !s.extra_keys.empty();
  if (end > first) {
    const uint64_t n = end - first;
    if (block_hashes_.size() < n) block_hashes_.resize(n);
    // Without extra keys every block's are empty: none encoded (nor a
    // string per block cleared), one empty string passed for all.
    if (extras) {
      if (block_extras_.size() < n) block_extras_.resize(n);
      for (uint64_t b = first; b < end; ++b)
        encode_block_extras(s.extra_keys, b * T_, (b + 1) * T_, block_extras_[b - first]);
      hash_blocks_with_extras(s, first, end);
    }
  }
  CommitHashes hashes =
      extras || end <= first
          ? CommitHashes(block_hashes_.data(), first, end)
          : CommitHashes(block_hashes_.data(), s, first, end, chain_start_hash(s, first),
                         index_.scope_digest(s.scope), T_);
  // Apply: publish every full computed block not yet published, in order
  // (also ones an earlier commit had to leave while a fork sibling shared
  // them), until one cannot be.
  const uint64_t now = eviction_.now_ms();
  constexpr uint64_t kAhead = 8;  // inserts whose lines are fetched early
  // And the pool line of each group's block (publish reads and sets its
  // owner count and node), further ahead: block ids are in no order.
  constexpr uint64_t kBlocksAhead = 16;
  const uint32_t G = layout_.num_groups();
  auto prefetch_blocks = [&](uint64_t b) {
    for (uint32_t g = 0; g < G; ++g) {
      const uint32_t blk = s.blocks[g][b];
      if (blk != kNoBlock) __builtin_prefetch(&residency_.info(g, blk), 1);
    }
  };
  const uint32_t before = s.published == 0 ? kNoNode : s.nodes[s.published - 1];
  hashes.upto(s.published + kAhead);
  for (uint64_t b = s.published; b < std::min(end, s.published + kAhead); ++b)
    tree_.prefetch_insert(hashes[b], s.scope, s.token_at(b * T_)[0], uint32_t(b - s.published),
                          before);
  for (uint64_t b = s.published; b < std::min(end, s.published + kBlocksAhead); ++b)
    prefetch_blocks(b);
  static const std::string kNoExtra;
  // The common case of a long new prompt, in a model without windowed
  // groups, extra keys or events: block b's parent is the node just made
  // for block b-1 (childless: nothing to find), so publishing it is
  // link_new_node's work alone, done here without publish_full's other
  // branches (any block that is not such a case takes publish_full).
  const bool lean = !extras && layout_.windowed.empty() && !layout_.anchors.empty() &&
                    index_.events() == nullptr;
  // The first stretch commit_chain linked (new plain nodes of this
  // sequence's blocks, each the child of the one before): the write-through
  // takes it without looking at each node (StoreChain::committed).
  uint64_t chain_begin = 0, chain_end = 0;
  while (s.published < end) {
    if (lean && s.published > 0 && tree_.node(s.nodes[s.published - 1]).num_children == 0) {
      const uint64_t from = s.published;
      commit_chain(s, hashes, end, now);
      if (chain_end == chain_begin) {
        chain_begin = from;
        chain_end = s.published;
      }
      if (s.published == end) break;
    }
    const uint64_t next = s.published + kAhead;
    hashes.upto(next + 1);
    if (next < end)
      tree_.prefetch_insert(hashes[next], s.scope, s.token_at(next * T_)[0], uint32_t(kAhead),
                            s.published == 0 ? kNoNode : s.nodes[s.published - 1]);
    if (s.published + kBlocksAhead < end) prefetch_blocks(s.published + kBlocksAhead);
    if (!publish_full(s, s.published, extras ? block_extras_[s.published - first] : kNoExtra,
                      hashes[s.published], now))
      break;
    ++s.published;
  }
  s.committed = committed;
  // Write-through to the block stores: one call per commit (store_chain.h),
  // none for blocks they just gave (an add's loaded blocks).
  if (stores_ != nullptr && !loaded)
    stores_->committed(s, first, s.published, chain_begin, chain_end);
  if (!layout_.windowed.empty()) release_out_of_window(s);
}

void Sequences::commit_chain(Sequence& s, CommitHashes& hashes, uint64_t end, uint64_t now) {
  // Block b's parent is the node made for block b-1, childless (the caller
  // checked the first; each later one was just made): no node to find, so
  // each block is link_new_node's work alone (insert, the pool lines' node,
  // the priority and publish time), inlined, while the tree has room and
  // the sequence holds the block alone (else publish_full decides).
  constexpr uint64_t kAhead = 8;        // inserts whose lines are fetched early
  constexpr uint64_t kBlocksAhead = 16;  // pool lines fetched early
  const uint32_t G = layout_.num_groups();
  const uint64_t start = s.published;
  const uint64_t stop = std::min<uint64_t>(end, start + tree_.num_free());
  const uint32_t scope = s.scope;
  uint32_t* const nodes = s.nodes.data();
  uint32_t parent = nodes[start - 1];
  uint64_t b = start;
  if (G == 1) {
    // One group (its blocks' pool lines read and written through one pointer).
    const uint32_t* const blocks = s.blocks[0].data();
    BlockPool& pool = residency_.pool_for_nodes(0);
    for (; b < stop; ++b) {
      hashes.upto(b + kAhead + 1);
      if (b + kAhead < end)
        tree_.prefetch_insert(hashes[b + kAhead], scope, s.token_at((b + kAhead) * T_)[0],
                              uint32_t(kAhead), parent);
      if (b + kBlocksAhead < end) {
        const uint32_t ahead = blocks[b + kBlocksAhead];
        if (ahead != kNoBlock) pool.prefetch(ahead);
      }
      const uint32_t blk = blocks[b];
      if (blk == kNoBlock) break;  // nothing to publish
      const BlockInfo& info = pool.info(blk);
      if (info.ref != 1 || info.node != kNoNode) break;  // not held alone
      const uint32_t node = index_.insert_plain(parent, scope, s.token_at(b * T_), hashes[b], &blk,
                                                s.priority_of_block(b, T_), now);
      pool.set_node(blk, node);
      nodes[b] = node;
      parent = node;
    }
  } else {
    for (; b < stop; ++b) {
      hashes.upto(b + kAhead + 1);
      if (b + kAhead < end)
        tree_.prefetch_insert(hashes[b + kAhead], scope, s.token_at((b + kAhead) * T_)[0],
                              uint32_t(kAhead), parent);
      if (b + kBlocksAhead < end)
        for (uint32_t g = 0; g < G; ++g) {
          const uint32_t ahead = s.blocks[g][b + kBlocksAhead];
          if (ahead != kNoBlock) __builtin_prefetch(&residency_.info(g, ahead), 1);
        }
      if (lead_group(s, b) == UINT32_MAX || !holds_alone(s, b)) break;
      const uint32_t* blocks = position(s, b);
      const uint32_t node = index_.insert_plain(parent, scope, s.token_at(b * T_), hashes[b],
                                                blocks, s.priority_of_block(b, T_), now);
      for (uint32_t g = 0; g < G; ++g)
        if (blocks[g] != kNoBlock) residency_.set_node(g, blocks[g], node);
      nodes[b] = node;
      parent = node;
    }
  }
  index_.ref_scope(scope, uint32_t(b - start));
  s.published = b;
}

uint64_t Sequences::chain_start_hash(const Sequence& s, uint64_t first) const {
  // Block first's hash chains on its parent's, which is the hash of block
  // first-1's key (a node found or made under that key carries it).
  return first == 0 ? 0 : tree_.node(s.nodes[first - 1]).hash;
}

void Sequences::hash_blocks_with_extras(const Sequence& s, uint64_t first, uint64_t end) {
  const uint64_t digest = index_.scope_digest(s.scope);
  uint64_t h = chain_start_hash(s, first);
  for (uint64_t b = first; b < end; ++b) {
    const std::string& extra = block_extras_[b - first];
    const uint64_t extra_digest = extra.empty() ? 0 : hash_bytes(extra.data(), extra.size());
    h = hash_block(h, digest, extra_digest, s.token_at(b * T_), T_);
    block_hashes_[b - first] = h;
  }
}

uint32_t Sequences::link_new_node(Sequence& s, uint64_t b, const BlockKey& key, uint64_t now_ms) {
  const uint32_t* blocks = position(s, b);
  const uint32_t node = index_.insert(key, blocks);
  for (uint32_t g = 0; g < layout_.num_groups(); ++g)
    if (blocks[g] != kNoBlock) residency_.set_node(g, blocks[g], node);
  const uint8_t priority = s.priority_of_block(b, T_);
  eviction_.mark_published(node, priority, now_ms);
  if (EventLog* ev = index_.events())
    ev->stored(node, key.parent, index_.scope_bytes(s.scope), *key.extra, key.tokens,
               key.num_tokens, index_.group_mask(node), priority);
  return node;
}

bool Sequences::publish_full(Sequence& s, uint64_t b, const std::string& extra, uint64_t hash,
                             uint64_t now_ms) {
  const uint32_t parent = b == 0 ? RadixTree::kRoot : s.nodes[b - 1];
  const BlockKey key{parent, s.scope, s.token_at(b * T_), T_, &extra, hash};
  // A parent without children (one this commit just made, mostly) has no
  // node under any key.
  const bool childless = parent != RadixTree::kRoot && tree_.node(parent).num_children == 0;
  const uint32_t found = childless ? kNoNode : index_.find(key);
  if (found != kNoNode && !index_.in_primary(found)) {
    // In another tier: the node takes this sequence's (equal) blocks and
    // comes back without a copy, if the sequence holds them alone (as for
    // a new node: publish waits).
    if (lead_group(s, b) == UINT32_MAX || !holds_alone(s, b)) return false;
    tier_.adopt(found, position(s, b));
    s.nodes[b] = found;
    return true;
  }
  if (found != kNoNode) {
    // Already cached: keep our own copy, anchor the cached one.
    s.nodes[b] = found;
    if (holds_anchor(s, b)) eviction_.hold_anchor(found);
    // A windowed slot the node lost to eviction takes this sequence's block,
    // so the prefix is reusable again in that group; only a block this
    // sequence holds alone (a fork sibling may not hold the node's anchor).
    for (uint32_t g : layout_.windowed) {
      const uint32_t own = s.blocks[g][b];
      if (own == kNoBlock || tree_.block(found, g) != kNoBlock) continue;
      const BlockInfo& info = residency_.info(g, own);
      if (info.ref != 1 || info.node != kNoNode) continue;
      index_.set_block(found, g, own);
      residency_.set_node(g, own, found);
      if (EventLog* ev = index_.events())
        ev->stored_groups(found, parent, index_.scope_bytes(s.scope), key.tokens, key.num_tokens,
                          uint64_t(1) << g, tree_.node(found).priority);
    }
    return true;
  }
  // A block shared with a fork sibling or a pin waits until this sequence
  // holds it alone: the sibling may not hold the ancestors it would be
  // linked under.
  if (lead_group(s, b) == UINT32_MAX || tree_.full()) return false;  // nothing to publish / no room
  if (!holds_alone(s, b)) return false;
  const uint32_t node = link_new_node(s, b, key, now_ms);
  s.nodes[b] = node;
  if (layout_.anchors.empty()) ++index_.holders(node);
  return true;
}

void Sequences::publish_tail(Sequence& s) {
  const uint64_t b = s.committed / T_;
  const uint32_t rows = uint32_t(s.committed % T_);
  if (rows == 0 || b >= s.num_blocks()) return;
  const uint32_t parent = b == 0 ? RadixTree::kRoot : s.nodes[b - 1];
  if (parent == kNoNode) return;
  if (b != s.published) return;  // its parent is not published
  if (tree_.full()) return;
  if (!holds_alone(s, b)) return;  // shared or already in the tree
  if (any_extra_overlaps(s.extra_keys, b * T_, b * T_ + rows)) return;
  const std::string no_extra;
  const BlockKey key = index_.key(parent, s.scope, s.token_at(b * T_), rows, no_extra);
  if (index_.find(key) != kNoNode) return;
  link_new_node(s, b, key, eviction_.now_ms());
}

}  // namespace kvc
