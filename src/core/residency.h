// Where the primary tier's blocks live and who holds them: the pools (free
// lists, reference counts, the tree node a cached block belongs to), the
// page arena that pools of different block bytes share and the page moves
// between them, the per-group counts of blocks in use and cached, and the
// copies between blocks of the tier. Residency frees no cached block on its
// own: when a pool runs dry or a page must be emptied, its Reclaimer (the
// eviction, eviction.h) makes the room.
//
// Every cached block can be evicted (a cached anchor node's subtree holds
// only cached anchors, and every cached windowed slot is queued), so free +
// cached - taken is exactly what a pool can still give a call: have_blocks
// decides a call's fate from the counts alone.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/device.h"
#include "core/block_pool.h"
#include "core/cache_stats.h"
#include "core/group_layout.h"
#include "core/layer_groups.h"
#include "core/page_arena.h"
#include "core/pool_memory.h"
#include "core/rank_pools.h"
#include "core/reservation.h"

namespace kvc {

class Residency {
 public:
  // What residency needs from whoever can evict.
  class Reclaimer {
   public:
    // Makes the victim order current (retention priorities that expired).
    virtual void refresh_order() = 0;
    // Evicts the next victim that frees a block of `pool`.
    virtual void evict_one(uint32_t pool) = 0;
    // Evicts every cached block of an idle page of `pool`.
    virtual void empty_page(uint32_t pool, uint32_t page) = 0;
    // Evicts every cached block with an id in [from, to) of `pool` (none
    // is in use): with a full-attention block its node's whole subtree,
    // leaves first, as eviction always does.
    virtual void empty_range(uint32_t pool, uint64_t from, uint64_t to) = 0;

   protected:
    ~Reclaimer() = default;
  };

  // arena_pages != 0: the pools carve pages of one arena (MemoryPlan).
  // `ranks`: the bytes of every rank (rank_pools.h); the counts come from
  // rank 0's pools, which every rank's equal.
  Residency(const GroupLayout& layout, const LayerGrouping& grouping, const RankPools& ranks,
            uint64_t arena_pages, CacheCounters& counters);
  void set_reclaimer(Reclaimer* reclaimer) { reclaimer_ = reclaimer; }

  size_t num_pools() const { return pools_.size(); }
  const BlockPool& pool(size_t p) const { return pools_[p]; }
  const BlockPool& pool_of(uint32_t g) const { return pools_[layout_.group_pool[g]]; }
  // Group g's pool, to set its blocks' node (BlockPool::set_node) in a
  // loop with the pool looked up once (commit's lean loop); nothing else.
  BlockPool& pool_for_nodes(uint32_t g) { return pools_[layout_.group_pool[g]]; }
  const BlockInfo& info(uint32_t g, uint32_t blk) const { return pool_of(g).info(blk); }
  const PageArena* arena() const { return arena_.get(); }
  const std::vector<std::unique_ptr<PoolMemory>>& memory() const { return memory_; }

  // --- Planning a call ----------------------------------------------------
  // Block sets every pool has free.
  uint64_t free_sets() const;
  // Whether the pools can give r.needed blocks with r.taken of their cached
  // blocks taken into use; if not, the refusal in r says why. With paged
  // pools, plans in r the page moves that cover a shortfall.
  bool have_blocks(Reservation& r) const;
  // Moves the pages r planned (empties idle pages of pools with spare
  // pages, then hands them to the pools short of blocks).
  void move_pages(Reservation& r) {
    if (r.pages_pending) move_planned_pages(r);
  }

  // --- Blocks -------------------------------------------------------------
  // A fresh block of group g (ref 1), evicting through the Reclaimer when
  // its pool has none free.
  uint32_t alloc_block(uint32_t g) {
    BlockPool& pool = pools_[layout_.group_pool[g]];
    if (pool.num_free() == 0) make_room(layout_.group_pool[g]);
    ++counters_.groups[g].in_use_blocks;
    return pool.acquire_free();
  }
  // Pools sharing an arena: carves a free page of it into pool p, as
  // allocation does before it evicts; false when the arena has none (or
  // there is no arena).
  bool take_free_page(uint32_t p) {
    if (!arena_ || arena_->num_free() == 0) return false;
    pools_[p].take_page();
    return true;
  }
  // One block of every group into out[g].
  void alloc_set(uint32_t* out) {
    for (uint32_t g = 0; g < layout_.num_groups(); ++g) out[g] = alloc_block(g);
  }
  // A free block of pool p without eviction (one must be free), its
  // group counts left to whoever takes it into the tree (a tier's onboard).
  uint32_t take_free(uint32_t p) { return pools_[p].acquire_free(); }
  // One owner more for a block of group g; true when it was cached (it
  // leaves the cached set: its queue entry must go).
  bool add_ref(uint32_t g, uint32_t blk) {
    BlockPool& pool = pools_[layout_.group_pool[g]];
    const bool was_cached = pool.info(blk).ref == 0;
    if (was_cached) {
      --counters_.groups[g].cached_blocks;
      ++counters_.groups[g].in_use_blocks;
    }
    pool.add_ref(blk);
    return was_cached;
  }
  // add_ref of n distinct blocks of group g; returns how many were cached.
  uint64_t add_refs(uint32_t g, const uint32_t* blocks, size_t n) {
    const uint64_t was_cached = pools_[layout_.group_pool[g]].add_refs(blocks, n);
    counters_.groups[g].cached_blocks -= was_cached;
    counters_.groups[g].in_use_blocks += was_cached;
    return was_cached;
  }
  // One owner fewer for a block of group g; true when it became cached.
  bool release_block(uint32_t g, uint32_t blk) {
    BlockPool& pool = pools_[layout_.group_pool[g]];
    const bool cached = pool.release(blk);
    if (pool.info(blk).ref == 0) {
      GroupStats& c = counters_.groups[g];
      --c.in_use_blocks;
      if (cached) ++c.cached_blocks;
    }
    return cached;
  }
  // The tree takes (node) or lets go of (kNoNode) a block of group g.
  void set_node(uint32_t g, uint32_t blk, uint32_t node) {
    pools_[layout_.group_pool[g]].set_node(blk, node);
  }
  // A cached block of group g leaves the tree and becomes free: evicted
  // (counted), or moved to another tier (not counted as an eviction).
  void evict_block(uint32_t g, uint32_t blk) {
    drop_cached(g, blk);
    ++counters_.groups[g].evicted_blocks;
  }
  void drop_cached(uint32_t g, uint32_t blk) {
    pools_[layout_.group_pool[g]].evict(blk);
    --counters_.groups[g].cached_blocks;
  }
  // A block taken with take_free joins the tree as node's, cached.
  void cache_taken(uint32_t g, uint32_t blk, uint32_t node) {
    BlockPool& pool = pools_[layout_.group_pool[g]];
    pool.set_node(blk, node);
    pool.release(blk);
    ++counters_.groups[g].cached_blocks;
  }
  // Gives back blocks taken with take_free (one per group, kNoBlock
  // skipped) that never joined the tree (a failed copy).
  void return_taken(const uint32_t* blocks);
  // The eviction fast path (Eviction::alloc_sets_ahead) settles the group
  // counts itself, once per call: the blocks of victims taken out of the
  // tree ahead go straight to a new owner (evict_into_use: one group, the
  // free list untouched) or are freed (evict_uncounted), fresh blocks are
  // taken one by one (acquire_free), and count_taken adds them all.
  void evict_into_use(uint32_t g, const uint32_t* blocks, size_t n) {
    pools_[layout_.group_pool[g]].evict_into_use(blocks, n);
  }
  void evict_uncounted(uint32_t g, uint32_t blk) { pools_[layout_.group_pool[g]].evict(blk); }
  uint32_t acquire_free(uint32_t g) { return pools_[layout_.group_pool[g]].acquire_free(); }
  void count_taken(uint32_t g, uint64_t n) { counters_.groups[g].in_use_blocks += n; }

  // Copies the first `rows` token rows of every group's block src[g] into
  // dst[g] (copy on write, copy on partial reuse), on `stream`.
  void copy_set(const uint32_t* src, const uint32_t* dst, uint32_t rows, void* stream);

  // --- Resizing (kvc_cache_resize) ----------------------------------------
  // Pools end at new_blocks[p] ids (with an arena: the arena at new_pages
  // pages, the pools' ids following). Block ids never change: a shrink
  // cuts the last ids, so it needs every block past the new end free or
  // cached. cut_in_use names the first block in use past it ("" when none).
  std::string cut_in_use(const std::vector<uint64_t>& new_blocks, uint64_t new_pages) const;
  // The bookkeeping of a grow (the memory is backed already); allocates nothing.
  void grow(const std::vector<uint64_t>& new_blocks, uint64_t new_pages);
  // Evicts (through the Reclaimer) every cached block past the new ends,
  // then drops those ids (pages); cut_in_use() must be "".
  void shrink(const std::vector<uint64_t>& new_blocks, uint64_t new_pages);
  // A shrink keeps cached blocks past the new ends by moving them (the
  // manager's pool_shrink.cpp): pool p takes a free arena page below
  // `below` (false: none), the copies of group g's blocks run on `stream`,
  // and move_cached hands each moves[i].first's state to moves[i].second.
  bool take_page_below(uint32_t p, uint32_t below) { return pools_[p].take_page_below(below); }
  void copy_blocks(uint32_t g, const std::vector<BlockCopy>& copies, void* stream) {
    ranks_.copy_blocks(layout_.group_pool[g], grouping_.groups[g].geometry, copies.data(),
                       copies.size(), stream);
  }
  void synchronize(void* stream) { ranks_.synchronize(stream); }
  void move_cached(uint32_t p, const std::vector<std::pair<uint32_t, uint32_t>>& moves) {
    pools_[p].move_cached(moves);
  }

  // Fills the primary block counts of a report.
  void add_stats(CacheStats& s) const;

  // The checker (residency_check.cpp): each pool's states, counts, free
  // list and page counts against `expected` (per pool, per block: the
  // owners found) and `group_of` (the group each block serves), the
  // per-group counts, every page owned once. Throws Error(KVC_ERR_INTERNAL).
  void check(const std::vector<std::vector<uint32_t>>& expected,
             const std::vector<std::vector<uint32_t>>& group_of) const;

 private:
  void make_room(uint32_t pool);
  bool plan_pages(Reservation& r) const;
  void move_planned_pages(Reservation& r);

  const GroupLayout& layout_;
  const LayerGrouping& grouping_;
  const RankPools& ranks_;
  const PoolList& memory_;  // rank 0's
  CacheCounters& counters_;
  Reclaimer* reclaimer_ = nullptr;
  std::unique_ptr<PageArena> arena_;  // pools of different block bytes
  std::vector<BlockPool> pools_;
};

}  // namespace kvc
