// kvc_cache_make_room: the evictions a call that takes blocks would make,
// made before it. An engine calls it while the device runs a step (its
// scheduler thread waits then), so that the next step's adds and extends
// find their blocks free and evict nothing on the step's critical path.
// The victims, their order and their fates are those the calls would have
// had: the host tier's plan (offload or drop, host nodes leaving to make
// room) for a cache with one, Eviction's order otherwise.
#include <algorithm>

#include "core/block_manager.h"

namespace kvc {

uint64_t BlockManager::make_room(uint64_t sets, void* stream) {
  const size_t P = residency_.num_pools();
  if (residency_.free_sets() >= sets) return residency_.free_sets();
  StoreChain::OfferBatch offers(stores_.get(), stream);
  eviction_.refresh_order();
  // No more than the pools can free: their cached blocks (none is in use).
  uint64_t can = UINT64_MAX;
  for (size_t p = 0; p < P; ++p) {
    const BlockPool& bp = residency_.pool(p);
    can = std::min<uint64_t>(can, (bp.num_free() + bp.num_cached()) / layout_.pool_groups[p]);
  }
  sets = std::min(sets, can);
  if (tier_->enabled() && residency_.free_sets() < sets) {
    room_.begin("making room", Reservation::kNoId, P);
    room_.need_sets(sets, layout_.pool_groups);
    if (residency_.have_blocks(room_)) tier_->prepare(room_, stream);
  }
  // What is still short (no host tier; windowed slots; deferred victims):
  // one victim at a time, as allocation would.
  for (uint32_t p = 0; p < P; ++p)
    while (residency_.pool(p).num_free() < sets * layout_.pool_groups[p] &&
           eviction_.next_victim(p).node != kNoNode)
      eviction_.evict_one(p);
  debug_check();
  return residency_.free_sets();
}

}  // namespace kvc
