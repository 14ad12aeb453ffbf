// kvc_cache_resize's shrink: which cached blocks stay, and where.
//
// The pools lose their last ids (with a page arena, its last pages), and a
// block in use never moves (block tables and CUDA graphs name it), so the
// cut must hold no block in use (resize_refusal). Within that, the shrink
// honours the eviction order, not the position of a block:
//  1. make_room_below evicts cached blocks in the usual victim order (the
//     host tier takes those that qualify, as in any call that needs room)
//     until what is left fits below the new ends;
//  2. move_cached_below copies every cached block that lies past an end
//     into a free block below it and points its tree node there. A cached
//     block belongs to no sequence, so no caller holds its id; its key,
//     bytes, priority and age stay;
//  3. Residency::shrink drops the ids past the ends, evicting whatever
//     could not move (a failed copy; a page arena whose free blocks below
//     the end lie in other pools' pages).
#include <algorithm>
#include <utility>
#include <vector>

#include "core/block_manager.h"

namespace kvc {

void BlockManager::shrink_pools(const std::vector<uint64_t>& pool_blocks, uint64_t num_pages) {
  eviction_.refresh_order();
  make_room_below(pool_blocks, num_pages);
  move_cached_below(pool_blocks, num_pages);
  residency_.shrink(pool_blocks, num_pages);
  debug_check();
}

void BlockManager::make_room_below(const std::vector<uint64_t>& pool_blocks, uint64_t num_pages) {
  const size_t P = residency_.num_pools();
  if (const PageArena* arena = residency_.arena()) {
    if (num_pages >= arena->num_pages()) return;
    // The pages the blocks left need, each pool rounding up to its pages.
    auto pages_needed = [&] {
      uint64_t pages = 0;
      for (size_t p = 0; p < P; ++p) {
        const BlockPool& bp = residency_.pool(p);
        const uint64_t held = bp.num_in_use() + bp.num_cached();
        pages += (held + bp.blocks_per_page() - 1) / bp.blocks_per_page();
      }
      return pages;
    };
    // The lowest (priority, age) victim of all pools goes first.
    while (pages_needed() > num_pages) {
      uint32_t best = UINT32_MAX;
      Eviction::Victim lowest;
      for (uint32_t p = 0; p < P; ++p) {
        const Eviction::Victim v = eviction_.next_victim(p);
        if (v.node == kNoNode) continue;
        if (v.priority < lowest.priority || (v.priority == lowest.priority && v.age < lowest.age)) {
          lowest = v;
          best = p;
        }
      }
      if (best == UINT32_MAX) return;  // only blocks in use left: they fit (resize_refusal)
      eviction_.evict_one(best);
    }
    return;
  }
  // Blocks of pool p that must be free before its last ids go.
  auto short_of = [&](size_t p) -> uint64_t {
    const BlockPool& bp = residency_.pool(p);
    if (pool_blocks[p] >= bp.capacity()) return 0;
    const uint64_t cut = bp.capacity() - pool_blocks[p];
    return bp.num_free() >= cut ? 0 : cut - bp.num_free();
  };
  if (tier_->enabled()) {
    // The host tier's own preparation: the victims in order, offloaded
    // where they qualify, until the sets the cut removes are free.
    Reservation r;
    r.begin("resizing the primary pools", Reservation::kNoId, P);
    uint64_t sets = 0;
    for (size_t p = 0; p < P; ++p) {
      const BlockPool& bp = residency_.pool(p);
      if (pool_blocks[p] < bp.capacity())
        sets = std::max<uint64_t>(sets, (bp.capacity() - pool_blocks[p]) / layout_.pool_groups[p]);
    }
    r.need_sets(sets, layout_.pool_groups);
    try {
      tier_->prepare(r, nullptr);
      residency_.synchronize(nullptr);  // the offload copies read blocks the cut returns
    } catch (const Error&) {
      // A failed copy left its victims in place: the loop below evicts them.
    }
  }
  for (bool again = true; again;) {
    again = false;
    for (uint32_t p = 0; p < P; ++p)
      while (short_of(p) > 0) {
        eviction_.evict_one(p);
        again = true;  // an evicted node frees blocks of other pools too
      }
  }
}

void BlockManager::move_cached_below(const std::vector<uint64_t>& pool_blocks,
                                     uint64_t num_pages) {
  const size_t P = residency_.num_pools();
  const PageArena* arena = residency_.arena();
  if (arena != nullptr && num_pages >= arena->num_pages()) return;
  const RadixTree& tree = index_.tree();
  std::vector<std::pair<uint32_t, uint32_t>> moves;
  std::vector<uint32_t> srcs, dsts;
  for (uint32_t p = 0; p < P; ++p) {
    const BlockPool& bp = residency_.pool(p);
    const uint64_t end = arena ? num_pages * bp.blocks_per_page() : pool_blocks[p];
    if (end >= bp.id_bound()) continue;
    srcs.clear();
    for (uint64_t id = end; id < bp.id_bound(); ++id)
      if (bp.owns(uint32_t(id)) && bp.info(uint32_t(id)).node != kNoNode)
        srcs.push_back(uint32_t(id));  // cached: nothing past the end is in use
    if (srcs.empty()) continue;
    auto collect_free = [&] {
      dsts.clear();
      for (uint32_t id : bp.free_list())
        if (id < end) dsts.push_back(id);
    };
    collect_free();
    while (dsts.size() < srcs.size() && arena != nullptr &&
           residency_.take_page_below(p, uint32_t(num_pages)))
      collect_free();
    if (dsts.size() < srcs.size()) {
      // Not all can stay (a page arena's free room lies in other pools):
      // the most valuable move, the rest are evicted with the cut.
      std::sort(srcs.begin(), srcs.end(), [&](uint32_t a, uint32_t b) {
        const TreeNode& x = tree.node(bp.info(a).node);
        const TreeNode& y = tree.node(bp.info(b).node);
        return x.priority != y.priority ? x.priority > y.priority : x.age > y.age;
      });
      srcs.resize(dsts.size());
    }
    // The copies of each group of the pool, then the bookkeeping.
    moves.clear();
    std::vector<std::vector<BlockCopy>> copies(layout_.num_groups());
    std::vector<uint32_t> group_of(srcs.size());
    for (size_t i = 0; i < srcs.size(); ++i) {
      const uint32_t node = bp.info(srcs[i]).node;
      uint32_t group = 0;
      while (layout_.group_pool[group] != p || tree.block(node, group) != srcs[i]) ++group;
      group_of[i] = group;
      copies[group].push_back(BlockCopy{srcs[i], dsts[i], layout_.T});
      moves.emplace_back(srcs[i], dsts[i]);
    }
    try {
      for (uint32_t g = 0; g < layout_.num_groups(); ++g)
        if (!copies[g].empty()) residency_.copy_blocks(g, copies[g], nullptr);
      residency_.synchronize(nullptr);
    } catch (const Error&) {
      continue;  // nothing moved: the cut evicts these blocks
    }
    for (size_t i = 0; i < srcs.size(); ++i) {
      const uint32_t node = bp.info(srcs[i]).node;
      // A written node's block is renamed: its write job is finished (the
      // resize settled the writer first), and leaving() clears its stamp
      // (the rule, store_chain.h: nothing renames a stamped node).
      if (stores_) stores_->leaving(node);
      index_.set_block(node, group_of[i], dsts[i]);
    }
    residency_.move_cached(p, moves);
  }
}

}  // namespace kvc
