// One sequence (a request, a beam): its tokens, its scope and priorities,
// and per layer group the blocks it reads and writes.
#pragma once

#include <cstdint>
#include <vector>

#include "core/block_key.h"
#include "core/block_pool.h"
#include "core/retention.h"

namespace kvc {

// The fields a decode step reads and writes (extend_batch) come first, on
// the first two cache lines of the (line-aligned) object.
struct alignas(64) Sequence {
  uint64_t batch_mark = 0;  // duplicate detection inside one batch call
  // Tokens from token_base on; the ones before it are those of published
  // blocks, kept by the tree (so adding a long cached prompt copies little).
  uint64_t token_base = 0;
  std::vector<int32_t> tokens;
  // nodes[b]: the tree node published (or found) for full block b, kNoNode
  // if none. When its blocks are not this sequence's own (the key was
  // already cached when this sequence committed), the sequence also holds
  // a reference to them, an anchor, so that a node in use always has every
  // ancestor in use.
  std::vector<uint32_t> nodes;
  // True when the tail block is known to be this sequence's alone and out
  // of the tree, so a write needs no copy and no look at the pool. Only
  // fork and rewind can make it shared or published; they clear it.
  bool tail_private = false;
  // blocks[g][b]: block of group g holding tokens [b*T, (b+1)*T); kNoBlock
  // for b < window_begin[g], blocks a windowed group released.
  std::vector<std::vector<uint32_t>> blocks;
  uint64_t id = 0;
  uint32_t scope = 0;  // interned scope id
  uint8_t prompt_priority = 35;
  uint8_t decode_priority = 35;
  uint64_t decode_duration_ms = kNoDuration;
  std::vector<RetentionRange> retention;  // prompt token ranges, checked
  uint64_t prompt_len = 0;
  uint64_t cached = 0;     // tokens reused at add (not to be written)
  uint64_t committed = 0;  // tokens whose KV the caller has written
  std::vector<ExtraKey> extra_keys;  // sorted
  // Per group: the first block position still held (0 in a full group).
  // A windowed group releases the blocks no token from `committed` on
  // can attend to.
  std::vector<uint64_t> window_begin;
  // nodes[b] is set exactly for b < published. A new node is only ever
  // made from a block this sequence alone holds, so every holder of a
  // published block also holds its ancestors.
  uint64_t published = 0;
  // Per group: tokens already reported by a slot mapping.
  std::vector<uint64_t> slot_cursor;

  // Back to a new sequence's state, keeping the vectors' capacity: a
  // sequence recycled this way serves the next add without allocating (and
  // without touching fresh pages).
  void reset() {
    std::vector<int32_t> t = std::move(tokens);
    std::vector<uint32_t> n = std::move(nodes);
    std::vector<std::vector<uint32_t>> b = std::move(blocks);
    std::vector<RetentionRange> r = std::move(retention);
    std::vector<ExtraKey> e = std::move(extra_keys);
    std::vector<uint64_t> w = std::move(window_begin), c = std::move(slot_cursor);
    *this = Sequence{};
    t.clear(), n.clear(), r.clear(), e.clear(), w.clear(), c.clear();
    for (auto& g : b) g.clear();
    tokens = std::move(t), nodes = std::move(n), blocks = std::move(b);
    retention = std::move(r), extra_keys = std::move(e);
    window_begin = std::move(w), slot_cursor = std::move(c);
  }

  uint64_t length() const { return token_base + tokens.size(); }
  const int32_t* token_at(uint64_t pos) const { return tokens.data() + (pos - token_base); }
  size_t num_blocks() const { return nodes.size(); }
  // A prompt block takes the range holding its first token, else the
  // prompt priority; a block starting past the prompt, the decode setting.
  BlockRetention retention_of_block(uint64_t b, uint32_t tokens_per_block) const {
    const uint64_t first = b * tokens_per_block;
    if (first >= prompt_len) return {decode_priority, decode_duration_ms};
    if (retention.empty()) return {prompt_priority, kNoDuration};  // no call on the commit path
    const RetentionRange* r = range_holding(retention, first);
    if (r == nullptr) return {prompt_priority, kNoDuration};
    return {uint8_t(r->priority), r->duration_ms};
  }
  uint8_t priority_of_block(uint64_t b, uint32_t tokens_per_block) const {
    return retention_of_block(b, tokens_per_block).priority;
  }
};

}  // namespace kvc
