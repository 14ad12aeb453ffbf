// What one call that takes blocks reserves, planned before it changes
// anything and then carried out: the block sets it allocates, per pool the
// blocks it needs and the cached blocks it takes into use (no longer
// evictable), the page moves that cover a shortfall of paged pools, the
// reused nodes it will hold (which a tier must bring back and eviction must
// spare), and, when the plan fails, why. A call is all or nothing because
// every check reads the plan, and the plan is only applied once it holds.
//
// One Reservation is reused by every call (its vectors keep their
// capacity), so planning does not allocate.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/error.h"
#include "core/block_pool.h"

namespace kvc {

struct Reservation {
  static constexpr uint64_t kNoId = UINT64_MAX;

  Reservation() = default;
  Reservation(const Reservation&) = delete;  // `held` may point into it
  Reservation& operator=(const Reservation&) = delete;

  // Starts the plan of a call: `what` it does (and to which sequence, for
  // the refusal message), on `num_pools` pools.
  void begin(const char* what_, uint64_t id_, size_t num_pools) {
    what = what_;
    id = id_;
    sets = 0;
    needed.assign(num_pools, 0);
    taken.assign(num_pools, 0);
    held = &no_nodes;
    partial = kNoNode;
    window_begin = nullptr;
    pages_pending = false;
  }
  // The call's sets come from fresh blocks of every group.
  void need_sets(uint64_t n, const std::vector<uint32_t>& pool_groups) {
    sets = n;
    for (size_t p = 0; p < needed.size(); ++p) needed[p] = n * pool_groups[p];
  }
  // Refuses the plan (out of blocks); returns false for the caller to return.
  bool refuse(std::string message) {
    refusal.status = KVC_ERR_OUT_OF_BLOCKS;
    refusal.message = std::move(message);
    return false;
  }
  // "adding the prompt", "extending sequence 7", ...
  std::string call_name() const {
    return id == kNoId ? std::string(what) : std::string(what) + " sequence " + std::to_string(id);
  }

  const char* what = "";
  uint64_t id = kNoId;
  uint64_t sets = 0;                    // block sets the call allocates
  std::vector<uint64_t> needed;         // per pool: blocks to allocate
  std::vector<uint64_t> taken;          // per pool: cached blocks taken into use
  // The nodes the call will hold: reused full blocks (root first) and a
  // partially matched one; window_begin[g] is the first position of `held`
  // whose windowed slot of group g the call takes (nullptr: none held).
  const std::vector<uint32_t>* held = &no_nodes;
  uint32_t partial = kNoNode;
  const int64_t* window_begin = nullptr;
  // Paged pools: pages to move to pools short of blocks, decided with the
  // check, moved before the call allocates (Residency::move_pages).
  std::vector<uint64_t> page_deficit;   // per pool, pages to receive
  std::vector<uint64_t> page_budget;    // per pool, pages it can give
  bool pages_pending = false;
  Refusal refusal;                      // why the last plan failed

 private:
  const std::vector<uint32_t> no_nodes{};
};

}  // namespace kvc
