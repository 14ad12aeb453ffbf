#include "core/residency.h"

#include <algorithm>
#include <string>

#include "base/error.h"

namespace kvc {

Residency::Residency(const GroupLayout& layout, const LayerGrouping& grouping,
                     const RankPools& ranks, uint64_t arena_pages, CacheCounters& counters)
    : layout_(layout),
      grouping_(grouping),
      ranks_(ranks),
      memory_(ranks.pools(0)),
      counters_(counters) {
  const PoolList& memory = memory_;
  if (arena_pages != 0) {
    const uint64_t bpp0 = memory[0]->num_blocks() / arena_pages;
    arena_ = std::make_unique<PageArena>(uint32_t(arena_pages),
                                         uint32_t(memory[0]->max_blocks() / bpp0));
  }
  for (size_t p = 0; p < grouping.pools.size(); ++p) {
    if (arena_) pools_.emplace_back(*arena_, uint32_t(memory[p]->num_blocks() / arena_pages));
    else pools_.emplace_back(memory[p]->num_blocks(), memory[p]->max_blocks());
  }
}

uint64_t Residency::free_sets() const {
  uint64_t n = UINT64_MAX;
  for (size_t p = 0; p < pools_.size(); ++p)
    n = std::min<uint64_t>(n, pools_[p].num_free() / layout_.pool_groups[p]);
  return n;
}

bool Residency::have_blocks(Reservation& r) const {
  if (arena_) return plan_pages(r);
  const uint64_t* needed = r.needed.data();
  const uint64_t* taken = r.taken.data();
  const std::vector<uint32_t>& pool_groups = layout_.pool_groups;
  for (size_t p = 0; p < pools_.size(); ++p) {
    const uint64_t free = pools_[p].num_free();
    const uint64_t evictable = pools_[p].num_cached() - taken[p];
    if (needed[p] <= free + evictable) continue;
    if (layout_.windowed.empty()) {
      // Every group needs the same count: say it per group, as a user thinks.
      const uint64_t per = needed[p] / pool_groups[p];
      const uint64_t f = free_sets();
      uint64_t e = UINT64_MAX;
      for (size_t q = 0; q < pools_.size(); ++q)
        e = std::min<uint64_t>(e, (pools_[q].num_cached() - taken[q]) / pool_groups[q]);
      return r.refuse(r.call_name() + " needs " + std::to_string(per) +
                      " blocks per layer group but only " +
                      std::to_string(std::min(f + e, (free + evictable) / pool_groups[p])) +
                      " are free (" + std::to_string(f) + ") or evictable (" + std::to_string(e) +
                      ")");
    }
    return r.refuse(r.call_name() + " needs " + std::to_string(needed[p]) + " blocks of pool " +
                    std::to_string(p) + " (" + std::to_string(pool_groups[p]) +
                    " layer groups) but only " + std::to_string(free + evictable) +
                    " are free (" + std::to_string(free) + ") or evictable (" +
                    std::to_string(evictable) + ")");
  }
  return true;
}

bool Residency::plan_pages(Reservation& r) const {
  const uint64_t* needed = r.needed.data();
  const uint64_t* taken = r.taken.data();
  r.pages_pending = false;
  r.page_deficit.resize(pools_.size());
  r.page_budget.resize(pools_.size());
  uint64_t short_pages = 0;
  for (size_t p = 0; p < pools_.size(); ++p) {
    const BlockPool& pool = pools_[p];
    const uint64_t have = pool.num_free() + pool.num_cached() - taken[p];
    const uint64_t bpp = pool.blocks_per_page();
    r.page_deficit[p] = needed[p] > have ? (needed[p] - have + bpp - 1) / bpp : 0;
    short_pages += r.page_deficit[p];
  }
  if (short_pages == 0) return true;
  // Spare pages: the arena's, then idle pages (no block in use) of pools
  // that keep enough for this call. A taken block may sit in an idle page:
  // count one page fewer per taken block.
  uint64_t supply = arena_->num_free();
  for (size_t q = 0; q < pools_.size(); ++q) {
    r.page_budget[q] = 0;
    if (r.page_deficit[q] != 0) continue;
    const BlockPool& pool = pools_[q];
    uint64_t idle = 0;
    for (uint32_t page = 0; page < arena_->num_pages(); ++page)
      idle += pool.owns_page(page) && pool.page_in_use(page) == 0 ? 1 : 0;
    idle = idle > taken[q] ? idle - taken[q] : 0;
    const uint64_t spare = pool.num_free() + pool.num_cached() - taken[q] - needed[q];
    r.page_budget[q] = std::min<uint64_t>(idle, spare / pool.blocks_per_page());
    supply += r.page_budget[q];
  }
  if (short_pages > supply) {
    size_t p = 0;
    while (r.page_deficit[p] == 0) ++p;
    return r.refuse(r.call_name() + " needs " + std::to_string(needed[p]) + " blocks of pool " +
                    std::to_string(p) + " but only " +
                    std::to_string(pools_[p].num_free() + pools_[p].num_cached() - taken[p]) +
                    " are free or evictable in it, and the pools need " +
                    std::to_string(short_pages) + " more pages than the " +
                    std::to_string(supply) + " free or idle pages others can give");
  }
  r.pages_pending = true;
  return true;
}

void Residency::move_planned_pages(Reservation& r) {
  r.pages_pending = false;
  for (size_t p = 0; p < pools_.size(); ++p) {
    for (; r.page_deficit[p] > 0; --r.page_deficit[p]) {
      if (arena_->num_free() == 0) {
        // Empty an idle page of a pool with spare pages.
        size_t q = 0;
        while (r.page_budget[q] == 0) ++q;
        --r.page_budget[q];
        uint32_t page = 0;
        while (!pools_[q].owns_page(page) || pools_[q].page_in_use(page) != 0) ++page;
        reclaimer_->empty_page(uint32_t(q), page);
        pools_[q].give_page(page);
      }
      pools_[p].take_page();
    }
  }
}

void Residency::make_room(uint32_t p) {
  BlockPool& pool = pools_[p];
  reclaimer_->refresh_order();  // the victim order must be current
  while (pool.num_free() == 0)
    if (!take_free_page(p)) reclaimer_->evict_one(p);  // free memory first
}

void Residency::return_taken(const uint32_t* blocks) {
  for (uint32_t g = 0; g < layout_.num_groups(); ++g)
    if (blocks[g] != kNoBlock) pools_[layout_.group_pool[g]].release(blocks[g]);
}

void Residency::copy_set(const uint32_t* src, const uint32_t* dst, uint32_t rows, void* stream) {
  for (uint32_t g = 0; g < layout_.num_groups(); ++g) {
    const BlockCopy c{src[g], dst[g], rows};
    ranks_.copy_blocks(layout_.group_pool[g], grouping_.groups[g].geometry, &c,
                        1, stream);
  }
}

std::string Residency::cut_in_use(const std::vector<uint64_t>& new_blocks,
                                  uint64_t new_pages) const {
  for (size_t p = 0; p < pools_.size(); ++p) {
    const BlockPool& pool = pools_[p];
    const uint64_t end = arena_ ? new_pages * pool.blocks_per_page() : new_blocks[p];
    if (end >= pool.id_bound()) continue;
    const uint64_t id = pool.first_in_use_from(end);
    if (id == UINT64_MAX) continue;
    uint32_t group = 0;
    while (layout_.group_pool[group] != p) ++group;
    return "block " + std::to_string(id) + " of pool " + std::to_string(p) + " (layer group " +
           std::to_string(group) + (layout_.pool_groups[p] > 1 ? " and others" : "") +
           ") is in use and lies past the new end of the pool (" + std::to_string(end) +
           " blocks); block ids never move, so the pool can shrink below it only once the "
           "sequences holding it are removed";
  }
  return "";
}

void Residency::grow(const std::vector<uint64_t>& new_blocks, uint64_t new_pages) {
  if (arena_) {
    if (new_pages > arena_->num_pages()) arena_->grow(uint32_t(new_pages));
    return;
  }
  for (size_t p = 0; p < pools_.size(); ++p)
    if (new_blocks[p] > pools_[p].capacity()) pools_[p].grow(new_blocks[p]);
}

void Residency::shrink(const std::vector<uint64_t>& new_blocks, uint64_t new_pages) {
  reclaimer_->refresh_order();
  if (arena_) {
    if (new_pages >= arena_->num_pages()) return;
    for (uint32_t page = arena_->num_pages(); page > new_pages; --page)
      for (size_t p = 0; p < pools_.size(); ++p) {
        if (!pools_[p].owns_page(page - 1)) continue;
        reclaimer_->empty_page(uint32_t(p), page - 1);
        pools_[p].give_page(page - 1);
      }
    arena_->shrink(uint32_t(new_pages));
    return;
  }
  for (size_t p = 0; p < pools_.size(); ++p) {
    if (new_blocks[p] >= pools_[p].capacity()) continue;
    reclaimer_->empty_range(uint32_t(p), new_blocks[p], pools_[p].capacity());
    pools_[p].shrink(new_blocks[p]);
  }
}

void Residency::add_stats(CacheStats& s) const {
  for (const BlockPool& p : pools_) {
    s.num_blocks += p.capacity();
    s.free_blocks += p.num_free();
    s.cached_blocks += p.num_cached();
    s.in_use_blocks += p.num_in_use();
  }
  if (arena_) {
    // Pages no pool owns count as blocks of the pool with the largest blocks.
    uint64_t per_page = UINT64_MAX;
    for (const BlockPool& p : pools_) per_page = std::min<uint64_t>(per_page, p.blocks_per_page());
    s.num_blocks += arena_->num_free() * per_page;
    s.free_blocks += arena_->num_free() * per_page;
  }
}

}  // namespace kvc
