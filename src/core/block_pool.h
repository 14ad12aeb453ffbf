// The blocks of one pool on one tier and the state of each: free (on the
// free list), in use (ref count > 0) or cached (ref count 0, held by a radix
// tree node, evictable). free + cached + in use == capacity at all times.
// Only bookkeeping lives here; the bytes are in PoolMemory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/big_array.h"

namespace kvc {

constexpr uint32_t kNoNode = UINT32_MAX;
constexpr uint32_t kNoBlock = UINT32_MAX;

struct BlockInfo {
  uint32_t ref = 0;         // owners: sequences, anchors, pins
  uint32_t node = kNoNode;  // tree node holding it, if any
};

class BlockPool {
 public:
  explicit BlockPool(uint64_t num_blocks);

  uint64_t capacity() const { return blocks_.size(); }
  uint64_t num_free() const { return free_.size(); }
  uint64_t num_cached() const { return cached_; }
  uint64_t num_in_use() const { return in_use_; }

  const BlockInfo& info(uint32_t id) const { return blocks_[id]; }

  // Takes a free block (one must exist) with ref count 1.
  uint32_t acquire_free() {
    const uint32_t id = free_.back();
    free_.pop_back();
    blocks_[id].ref = 1;
    ++in_use_;
    return id;
  }
  // One more owner; a cached block becomes in use.
  void add_ref(uint32_t id) {
    BlockInfo& b = blocks_[id];
    if (b.ref++ == 0) {
      --cached_;  // only a cached block can have ref 0 and an owner-to-be
      ++in_use_;
    }
  }
  // add_ref of each of `n` distinct blocks.
  void add_refs(const uint32_t* ids, size_t n) {
    uint64_t became_used = 0;  // counted apart: no store-to-load chain through the counters
    for (size_t i = 0; i < n; ++i) became_used += blocks_[ids[i]].ref++ == 0 ? 1 : 0;
    cached_ -= became_used;
    in_use_ += became_used;
  }
  // One owner fewer. Returns true when the block became cached (ref 0 and
  // in the tree); a block with neither goes back to the free list.
  bool release(uint32_t id) {
    BlockInfo& b = blocks_[id];
    if (--b.ref > 0) return false;
    --in_use_;
    if (b.node != kNoNode) {
      ++cached_;
      return true;
    }
    free_.push_back(id);  // never reallocates: capacity is every block
    return false;
  }
  // The tree takes (node) or lets go of (kNoNode) an in-use block.
  void set_node(uint32_t id, uint32_t node) { blocks_[id].node = node; }
  // Eviction: a cached block leaves the tree and becomes free.
  void evict(uint32_t id) {
    BlockInfo& b = blocks_[id];
    b.node = kNoNode;
    --cached_;
    free_.push_back(id);
  }
  // Warms the state of a block about to be read or changed.
  void prefetch(uint32_t id) const { __builtin_prefetch(&blocks_[id], 1); }

  // For the invariant checker.
  const std::vector<uint32_t>& free_list() const { return free_; }

 private:
  BigArray<BlockInfo> blocks_;
  std::vector<uint32_t> free_;  // stack; capacity reserved for every block
  uint64_t cached_ = 0;
  uint64_t in_use_ = 0;
};

}  // namespace kvc
