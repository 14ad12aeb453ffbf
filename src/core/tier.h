// A tier below the primary one: where cached blocks go when the primary
// pools need room, and come back from when a prompt reuses them (DESIGN.md,
// Tiers). The host tier (host_tier.h) is the first; a disk or a remote tier
// is another class behind this interface. A cache without a secondary tier
// has a NoTier.
//
// What a tier stores: tree nodes whose blocks it holds (TreeNode::tier is
// its id); such a node is never in use, keeps its key and place in the
// tree, and counts among its parent's children in other tiers
// (PrefixIndex::tier_children). How blocks move: a call that takes primary
// blocks lets the tier prepare them first (bring back the nodes the call
// will hold, move the victims that qualify out of the primary pools, in
// batches on the call's stream); commit may find one of its nodes under a
// freshly computed block and take that block instead of a copy. Its own
// eviction: it drops nodes to make room, drops a primary node's children
// when the node leaves the tree, and reverts their retention priorities.
#pragma once

#include <cstdint>
#include <vector>

#include "core/cache_stats.h"
#include "core/reservation.h"

namespace kvc {

class Tier {
 public:
  virtual ~Tier() = default;

  // Whether the cache has this tier (false for NoTier).
  virtual bool enabled() const = 0;
  // The tier's block counts, moves and bytes moved, into a report.
  virtual void add_stats(CacheStats& s) const = 0;

  // --- Moves ---------------------------------------------------------------
  // Nodes of this tier among `nodes` and `partial`, the nodes a call will
  // hold: each comes back into a fresh primary block set.
  virtual uint64_t count_held(const std::vector<uint32_t>& nodes, uint32_t partial) const = 0;
  // Called by every call that takes new primary blocks, after its checks
  // and host allocations (the last step that can fail): brings back the
  // tier's nodes among r.held and r.partial and evicts, moving into this
  // tier what qualifies, until r.sets block sets are free, so that
  // allocation evicts nothing. A failed copy throws Error(KVC_ERR_DEVICE):
  // the nodes whose copy failed stay where they were.
  virtual void prepare(const Reservation& r, void* stream) = 0;
  // Commit found `node`, one of this tier's, under the key of a block a
  // sequence holds alone: the node takes `blocks` (one per group, kNoBlock
  // for a released windowed slot) and is a primary node again, no copy.
  virtual void adopt(uint32_t node, const uint32_t* blocks) = 0;

  // --- Its own eviction ----------------------------------------------------
  // A primary node leaves the tree: its children in this tier go too.
  virtual void drop_children(uint32_t node) = 0;
  // Drops every node of this tier (reset).
  virtual void evict_all() = 0;
  // The retention priority of `node` reverted to the default: if it is one
  // of this tier's queued nodes, requeue it.
  virtual void revert_priority(uint32_t node) = 0;

  // The invariant checker's part for this tier. Throws Error(KVC_ERR_INTERNAL).
  virtual void check() const = 0;
};

class RadixTree;

// No secondary tier: nothing moves, nothing is stored.
class NoTier final : public Tier {
 public:
  explicit NoTier(const RadixTree& tree) : tree_(tree) {}
  bool enabled() const override { return false; }
  void add_stats(CacheStats&) const override {}
  uint64_t count_held(const std::vector<uint32_t>&, uint32_t) const override { return 0; }
  void prepare(const Reservation&, void*) override {}
  void adopt(uint32_t, const uint32_t*) override {}
  void drop_children(uint32_t) override {}
  void evict_all() override {}
  void revert_priority(uint32_t) override {}
  // Every live node is a primary one.
  void check() const override;

 private:
  const RadixTree& tree_;
};

}  // namespace kvc
