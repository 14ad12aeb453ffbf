// kvc_cache_make_room: the evictions a call that takes blocks would make,
// made before it. An engine calls it while the device runs a step (its
// scheduler thread waits then), so that the next step's adds and extends
// find their blocks free and evict nothing on the step's critical path.
// The victims, their order and their fates are those the calls would have
// had: the host tier's plan (offload or drop, host nodes leaving to make
// room) for a cache with one, Eviction's order otherwise. Between steps
// too: the record writer's finished jobs give their places back and a
// deeply sleeping writer is woken for the step's commits
// (StoreChain::between_steps).
#include <algorithm>

#include "core/block_manager.h"

namespace kvc {

uint64_t BlockManager::make_room(uint64_t sets, void* stream) {
  const size_t P = residency_.num_pools();
  if (stores_) stores_->between_steps();
  if (residency_.free_sets() >= sets) return residency_.free_sets();
  StoreChain::OfferBatch offers(stores_.get(), stream);
  eviction_.refresh_order();
  // As a call that takes `sets` block sets plans them: the host tier's
  // victims and fates, then (pools sharing one arena's pages) the idle
  // pages moved to the pools short of blocks. More than the pools can give
  // is cut to what their free and cached blocks make.
  for (size_t p = 0; p < P; ++p)  // (no count below overflows)
    sets = std::min<uint64_t>(sets, residency_.pool(p).id_bound() / layout_.pool_groups[p]);
  room_.begin("making room", Reservation::kNoId, P);
  room_.need_sets(sets, layout_.pool_groups);
  bool planned = residency_.have_blocks(room_);
  if (!planned) {
    uint64_t can = UINT64_MAX;
    for (size_t p = 0; p < P; ++p) {
      const BlockPool& bp = residency_.pool(p);
      can = std::min<uint64_t>(can, (bp.num_free() + bp.num_cached()) / layout_.pool_groups[p]);
    }
    sets = std::min(sets, can);
    room_.need_sets(sets, layout_.pool_groups);
    planned = residency_.have_blocks(room_);
  }
  if (planned) {
    tier_->prepare(room_, stream);
    residency_.move_pages(room_);
  }
  // What is still short (no host tier; windowed slots; deferred victims;
  // an arena's pages): block set after block set, group after group, as
  // allocation takes them: a free block, else a free page, else a victim.
  const uint32_t G = layout_.num_groups();
  room_.needed.assign(P, 0);  // blocks wanted free per pool so far
  for (uint64_t i = residency_.free_sets() >= sets ? sets : 0; i < sets; ++i)
    for (uint32_t g = 0; g < G; ++g) {
      const uint32_t p = layout_.group_pool[g];
      const uint64_t want = ++room_.needed[p];
      while (residency_.pool(p).num_free() < want && !residency_.take_free_page(p)) {
        if (eviction_.next_victim(p).node == kNoNode) {  // nothing evictable left
          debug_check();
          return residency_.free_sets();
        }
        eviction_.evict_one(p);
      }
    }
  debug_check();
  return residency_.free_sets();
}

}  // namespace kvc
