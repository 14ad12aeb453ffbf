// The invariant checker: recomputes every count and reference from the
// owners (sequences, anchors, pins, the tree) and compares. Debug builds
// run it after every mutation; tests call it directly.
#include <algorithm>
#include <string>
#include <vector>

#include "core/block_hash.h"
#include "core/block_manager.h"
#include "base/error.h"

namespace kvc {

namespace {

[[noreturn]] void broken(const std::string& what) {
  fail(KVC_ERR_INTERNAL, "cache invariant broken: " + what);
}

std::string blk(size_t pool, uint32_t id) {
  return "block " + std::to_string(id) + " of pool " + std::to_string(pool);
}

}  // namespace

void BlockManager::check_invariants() const {
  const uint32_t G = num_groups();
  const size_t P = residency_.num_pools();
  const RadixTree& tree_ = index_.tree();

  // 1. What sequences and pins hold (sequences_check.cpp).
  Holdings h;
  h.refs.resize(P);
  h.group_of.resize(P);  // the group each block serves
  for (size_t p = 0; p < P; ++p) {
    h.refs[p].assign(residency_.pool(p).id_bound(), 0);
    h.group_of[p].assign(residency_.pool(p).id_bound(), UINT32_MAX);
  }
  h.holders.assign(tree_.id_bound(), 0);
  h.scope_refs.assign(index_.scopes().id_bound(), 0);
  seqs_.count_holdings(h);
  if (stores_) stores_->count_holdings(h);  // write-through jobs in flight
  std::vector<std::vector<uint32_t>>& group_of = h.group_of;

  // Cached blocks serve the group of their tree slot.
  for (uint32_t n = 1; n < tree_.id_bound(); ++n) {
    if (!tree_.node(n).live || tree_.node(n).tier != kPrimaryTier) continue;
    for (uint32_t g = 0; g < G; ++g) {
      const uint32_t id = tree_.block(n, g);
      const uint32_t p = layout_.group_pool[g];
      if (id == kNoBlock || id >= residency_.pool(p).id_bound()) continue;  // checked below
      if (group_of[p][id] != UINT32_MAX && group_of[p][id] != g)
        broken(blk(p, id) + " sits in a tree slot of group " + std::to_string(g) +
               " but serves group " + std::to_string(group_of[p][id]));
      group_of[p][id] = g;
    }
  }

  // 2. Per pool: states, counts, free list, reference counts.
  residency_.check(h.refs, h.group_of);

  // 3. The tree: keys, links, slots, holders, scopes (prefix_index_check.cpp).
  index_.check(h.holders, h.scope_refs);

  // 4. Eviction's queues and expiries (eviction_check.cpp), the tier's.
  eviction_.check();
  tier_->check();

  // 5. The event log: its ring, and every node's portable hash (event_snapshot.cpp).
  if (events_) events_->check(index_);
  if (stores_) stores_->keys().check();
}

}  // namespace kvc
