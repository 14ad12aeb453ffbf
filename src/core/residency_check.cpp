// Residency's part of the invariant checker (BlockManager::check_invariants
// gathers what every owner holds and calls it): per pool, every block is
// exactly one of free, cached, in use, its reference count is the number of
// owners found, the counts and the free list agree with the blocks; the
// per-group counts and the per-page counts of paged pools are exact; every
// page of the arena is free or owned by exactly one pool.
#include <string>
#include <vector>

#include "base/error.h"
#include "core/residency.h"

namespace kvc {

namespace {

[[noreturn]] void broken(const std::string& what) {
  fail(KVC_ERR_INTERNAL, "cache invariant broken: " + what);
}

std::string blk(size_t pool, uint32_t id) {
  return "block " + std::to_string(id) + " of pool " + std::to_string(pool);
}

}  // namespace

void Residency::check(const std::vector<std::vector<uint32_t>>& expected,
                      const std::vector<std::vector<uint32_t>>& group_of) const {
  const uint32_t G = layout_.num_groups();
  const size_t P = pools_.size();
  std::vector<uint64_t> group_in_use(G, 0), group_cached(G, 0);
  for (size_t p = 0; p < P; ++p) {
    const BlockPool& pool = pools_[p];
    uint64_t n_free = 0, n_cached = 0, n_in_use = 0;
    std::vector<uint32_t> page_in_use(pool.paged() ? arena_->num_pages() : 0, 0);
    for (uint32_t id = 0; id < pool.id_bound(); ++id) {
      const BlockInfo& b = pool.info(id);
      if (!pool.owns(id)) {
        if (b.ref != 0 || b.node != kNoNode || expected[p][id] != 0)
          broken(blk(p, id) + " is used but its page belongs to no pool " + std::to_string(p));
        continue;
      }
      if (pool.paged() && b.ref > 0) ++page_in_use[id / pool.blocks_per_page()];
      if (b.ref != expected[p][id])
        broken(blk(p, id) + " has ref count " + std::to_string(b.ref) + " but " +
               std::to_string(expected[p][id]) + " owners");
      if (b.ref > 0) ++n_in_use;
      else if (b.node != kNoNode) ++n_cached;
      else ++n_free;
      if (b.ref > 0 || b.node != kNoNode) {
        const uint32_t g = group_of[p][id];
        if (g == UINT32_MAX) broken(blk(p, id) + " is not free but serves no layer group");
        ++(b.ref > 0 ? group_in_use : group_cached)[g];
      }
    }
    if (n_free + n_cached + n_in_use != pool.capacity())
      broken("pool " + std::to_string(p) + ": free + cached + in use != capacity");
    if (n_free != pool.num_free() || n_cached != pool.num_cached() || n_in_use != pool.num_in_use())
      broken("pool " + std::to_string(p) + " counts (free " + std::to_string(pool.num_free()) +
             ", cached " + std::to_string(pool.num_cached()) + ", in use " +
             std::to_string(pool.num_in_use()) + ") differ from its blocks (" +
             std::to_string(n_free) + ", " + std::to_string(n_cached) + ", " +
             std::to_string(n_in_use) + ")");
    for (size_t page = 0; page < page_in_use.size(); ++page)
      if (pool.owns_page(uint32_t(page)) && pool.page_in_use(uint32_t(page)) != page_in_use[page])
        broken("pool " + std::to_string(p) + " page " + std::to_string(page) +
               " counts a wrong number of blocks in use");
    std::vector<char> seen(pool.id_bound(), 0);
    for (uint32_t id : pool.free_list()) {
      if (id >= pool.id_bound() || !pool.owns(id)) broken("pool free list holds out-of-range id");
      if (seen[id]++) broken(blk(p, id) + " is on the free list twice");
      const BlockInfo& b = pool.info(id);
      if (b.ref != 0 || b.node != kNoNode) broken(blk(p, id) + " is on the free list but not free");
    }
  }

  for (uint32_t g = 0; g < G; ++g)
    if (counters_.groups[g].in_use_blocks != group_in_use[g] ||
        counters_.groups[g].cached_blocks != group_cached[g])
      broken("layer group " + std::to_string(g) + " counts (in use " +
             std::to_string(counters_.groups[g].in_use_blocks) + ", cached " +
             std::to_string(counters_.groups[g].cached_blocks) + ") differ from its blocks (" +
             std::to_string(group_in_use[g]) + ", " + std::to_string(group_cached[g]) + ")");

  if (arena_) {
    // Every page is free in the arena or owned by exactly one pool.
    std::vector<uint32_t> owners(arena_->num_pages(), 0);
    for (uint32_t page : arena_->free_pages()) ++owners[page];
    for (size_t p = 0; p < P; ++p)
      for (uint32_t page = 0; page < arena_->num_pages(); ++page)
        owners[page] += pools_[p].owns_page(page) ? 1 : 0;
    for (uint32_t page = 0; page < arena_->num_pages(); ++page)
      if (owners[page] != 1)
        broken("page " + std::to_string(page) + " has " + std::to_string(owners[page]) +
               " owners (arena and pools)");
  }
}

}  // namespace kvc
