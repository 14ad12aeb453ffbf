// The blocks of one pool on one tier and the state of each: free (on the
// free list), in use (ref count > 0) or cached (ref count 0, held by a radix
// tree node, evictable). free + cached + in use == capacity at all times.
// Only bookkeeping lives here; the bytes are in PoolMemory.
//
// A paged pool (one of several whose block bytes differ) owns whole pages
// of a PageArena: its ids span every page, and its capacity is the blocks
// of the pages it owns (page_arena.h). The hot calls test paged() once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "core/big_array.h"
#include "core/page_arena.h"

namespace kvc {

constexpr uint32_t kNoNode = UINT32_MAX;
constexpr uint32_t kNoBlock = UINT32_MAX;

struct BlockInfo {
  uint32_t ref = 0;         // owners: sequences, anchors, pins
  uint32_t node = kNoNode;  // tree node holding it, if any
};

class BlockPool {
 public:
  // Room for max_blocks (a resize's ceiling), num_blocks of them present.
  BlockPool(uint64_t num_blocks, uint64_t max_blocks);
  // A paged pool: ids [0, arena pages * blocks_per_page), no page owned yet.
  BlockPool(PageArena& arena, uint32_t blocks_per_page);

  uint64_t capacity() const { return paged() ? owned_blocks_ : size_; }
  uint64_t id_bound() const { return paged() ? uint64_t(arena_->num_pages()) * bpp_ : size_; }

  // Resizing an unpaged pool (kvc_cache_resize). grow: ids [capacity, n)
  // join free, beneath the free blocks there (handed out after them).
  // shrink: ids [n, capacity) leave; each must be free. Neither allocates.
  void grow(uint64_t n);
  void shrink(uint64_t n);
  // First block in use at or past id `from` (kNoBlock-sized: none).
  uint64_t first_in_use_from(uint64_t from) const {
    for (uint64_t id = from; id < id_bound(); ++id)
      if (blocks_[id].ref != 0) return id;
    return UINT64_MAX;
  }
  uint64_t num_free() const { return free_.size(); }
  uint64_t num_cached() const { return cached_; }
  uint64_t num_in_use() const { return in_use_; }
  bool paged() const { return arena_ != nullptr; }
  uint32_t blocks_per_page() const { return bpp_; }
  bool owns_page(uint32_t page) const { return page_owned_[page] != 0; }
  uint32_t page_in_use(uint32_t page) const { return page_in_use_[page]; }
  uint32_t page_free(uint32_t page) const { return page_free_[page]; }
  bool owns(uint32_t id) const { return !paged() || page_owned_[id / bpp_] != 0; }
  // Takes a page from the arena (one must be free): its blocks become free.
  void take_page();
  // take_page() of a free arena page below `below` (a shrink's new end);
  // false, nothing changed, when there is none.
  bool take_page_below(uint32_t below);
  // A shrink keeps cached blocks that lie past the new end: each
  // moves[i] = (src, dst) gives cached block src's state (its tree node)
  // to free block dst, and src becomes free. The bytes are the caller's.
  void move_cached(const std::vector<std::pair<uint32_t, uint32_t>>& moves);
  // Gives an owned page whose blocks are all free back to the arena.
  void give_page(uint32_t page);

  const BlockInfo& info(uint32_t id) const { return blocks_[id]; }

  // Takes a free block (one must exist) with ref count 1.
  uint32_t acquire_free() {
    const uint32_t id = free_.back();
    free_.pop_back();
    if (paged()) {
      free_pos_[id] = UINT32_MAX;
      --page_free_[id / bpp_];
      ++page_in_use_[id / bpp_];
    }
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
      if (paged()) ++page_in_use_[id / bpp_];
    }
  }
  // add_ref of each of `n` distinct blocks; returns how many were cached.
  uint64_t add_refs(const uint32_t* ids, size_t n) {
    if (paged()) {
      uint64_t before = in_use_;
      for (size_t i = 0; i < n; ++i) add_ref(ids[i]);
      return in_use_ - before;
    }
    uint64_t became_used = 0;  // counted apart: no store-to-load chain through the counters
    for (size_t i = 0; i < n; ++i) became_used += blocks_[ids[i]].ref++ == 0 ? 1 : 0;
    cached_ -= became_used;
    in_use_ += became_used;
    return became_used;
  }
  // One owner fewer. Returns true when the block became cached (ref 0 and
  // in the tree); a block with neither goes back to the free list.
  bool release(uint32_t id) {
    BlockInfo& b = blocks_[id];
    if (--b.ref > 0) return false;
    --in_use_;
    if (paged()) --page_in_use_[id / bpp_];
    if (b.node != kNoNode) {
      ++cached_;
      return true;
    }
    push_free(id);
    return false;
  }
  // The tree takes (node) or lets go of (kNoNode) an in-use block.
  void set_node(uint32_t id, uint32_t node) { blocks_[id].node = node; }
  // Eviction: a cached block leaves the tree and becomes free.
  void evict(uint32_t id) {
    BlockInfo& b = blocks_[id];
    b.node = kNoNode;
    --cached_;
    push_free(id);
  }
  // evict(ids[i]) and acquire_free() at once, for each of `n` cached
  // blocks: they go straight to a new owner, the free list stays as it was.
  void evict_into_use(const uint32_t* ids, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      BlockInfo& b = blocks_[ids[i]];
      b.node = kNoNode;
      b.ref = 1;
      if (paged()) ++page_in_use_[ids[i] / bpp_];
    }
    cached_ -= n;
    in_use_ += n;
  }
  // Warms the state of a block about to be read or changed.
  void prefetch(uint32_t id) const { __builtin_prefetch(&blocks_[id], 1); }
  // The same for an id read speculatively (a record that may be stale):
  // nothing when it is out of range.
  void prefetch_maybe(uint32_t id) const {
    if (id < blocks_.size()) prefetch(id);
  }

  // For the invariant checker.
  const std::vector<uint32_t>& free_list() const { return free_; }

 private:
  void push_free(uint32_t id) {
    if (paged()) {
      free_pos_[id] = uint32_t(free_.size());
      ++page_free_[id / bpp_];
    }
    free_.push_back(id);  // never reallocates: capacity is every block
  }
  void remove_free(uint32_t id);
  void own_page(uint32_t page);

  BigArray<BlockInfo> blocks_;   // sized for the ceiling
  uint64_t size_ = 0;            // unpaged: the ids present
  std::vector<uint32_t> free_;  // stack; capacity reserved for every block
  uint64_t cached_ = 0;
  uint64_t in_use_ = 0;
  // Paged pools only.
  PageArena* arena_ = nullptr;
  uint32_t bpp_ = 1;
  uint64_t owned_blocks_ = 0;
  std::vector<uint32_t> free_pos_;     // index of each free block in free_
  std::vector<uint32_t> page_free_;    // free blocks per page
  std::vector<uint32_t> page_in_use_;  // in-use blocks per page
  std::vector<uint8_t> page_owned_;
};

}  // namespace kvc
