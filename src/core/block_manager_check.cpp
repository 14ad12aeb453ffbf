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

  // 1b. Write-through stamps (the rule, store_chain.h): the writer reads a
  // stamped node's record and blocks until its job is finished, so every
  // block a stamped node names must still be that node's, owned by its
  // pool and off the free list (a block freed, moved or reused without
  // StoreChain::leaving() first would be read, or overwritten, under the
  // writer). count_holdings checked that a stamped node is live, primary
  // and full; PrefixIndex::erase/set_block refuse a stamped node inline.
  if (stores_ && stores_->stamps() != nullptr) {
    std::vector<std::vector<uint8_t>> on_free(P);
    for (uint32_t n = 1; n < tree_.id_bound(); ++n) {
      const uint64_t job = stores_->stamp(n);
      if (job == 0) continue;
      const std::string who = "tree node " + std::to_string(n) + " (write job " +
                              std::to_string(job) +
                              (stores_->stamp_live(n) ? ", not finished)" : ", finished)");
      for (uint32_t g = 0; g < G; ++g) {
        const uint32_t id = tree_.block(n, g);
        const uint32_t p = layout_.group_pool[g];
        const BlockPool& bp = residency_.pool(p);
        if (id == kNoBlock || id >= bp.id_bound() || !bp.owns(id))
          broken(who + " names group " + std::to_string(g) + " block " + std::to_string(id) +
                 ", not a block of pool " + std::to_string(p));
        if (bp.info(id).node != n)
          broken(who + " names " + blk(p, id) + " of group " + std::to_string(g) +
                 ", which the pool gives to node " + std::to_string(bp.info(id).node) +
                 " (freed, moved or reused while stamped)");
        if (on_free[p].empty()) {
          on_free[p].assign(bp.id_bound(), 0);
          for (uint32_t f : bp.free_list()) on_free[p][f] = 1;
        }
        if (on_free[p][id]) broken(who + " names " + blk(p, id) + ", which is on the free list");
      }
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
