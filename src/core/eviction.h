// Eviction: which cached block goes first, and every path that evicts. It
// owns the prioritized LRU queues (one over cached anchor leaves, one per
// windowed group over its cached slots), the retention clock and the heap
// of priorities that revert when their duration runs out, and the moment
// counter that ages releases. Because a block's queue entry exists exactly
// while the block is cached, the hold and release of tree blocks are made
// here: a hold takes a cached block out of its queue, a release queues a
// block that became cached.
//
// The rule (DESIGN.md, Eviction): the victim is the lowest (priority, age)
// entry; every block of a lower priority goes before any of a higher one.
// In a full-attention group only leaves are evicted (a child is useless
// without its parent), for primary eviction a node whose children all live
// in other tiers counts as a leaf; a windowed slot is evicted on its own,
// interior nodes included. next_victim() states the choice, retire() what
// leaving the tree does; evict_node, evict_ahead (the fast path of an add
// that evicts many whole nodes) and tier planning all call them.
#pragma once

#include <cstdint>
#include <vector>

#include "core/cache_stats.h"
#include "core/eviction_policy.h"
#include "core/expiry_heap.h"
#include "core/group_layout.h"
#include "core/prefix_index.h"
#include "core/residency.h"
#include "core/retention.h"
#include "core/retention_clock.h"
#include "core/store_chain.h"
#include "core/tier.h"

namespace kvc {

class Eviction final : public Residency::Reclaimer {
 public:
  Eviction(const GroupLayout& layout, PrefixIndex& index, Residency& residency,
           CacheCounters& counters, bool manual_clock);
  // The tier evictions offload to (NoTier without one); set once.
  void set_tier(Tier& tier) { tier_ = &tier; }
  // The block stores a node leaving the tree is offered to (nullptr: none);
  // set once.
  void set_stores(StoreChain* stores) { stores_ = stores; }

  const EvictionPolicy& policy() const { return policy_; }  // cached anchor leaves
  const EvictionPolicy& window_policy(uint32_t k) const { return window_policies_[k]; }
  const ExpiryHeap& expiries() const { return expiry_; }
  const RetentionClock& clock() const { return time_; }

  // --- Holding and releasing tree blocks ----------------------------------
  void hold_slot(uint32_t node, uint32_t g);
  void hold_node(uint32_t node);    // every slot present
  void hold_anchor(uint32_t node);  // the anchor groups' slots (or a holder)
  // Holds a chain of reused nodes, root first, in a model without windowed
  // groups: blocks[g] gets each node's block of group g appended (within
  // its capacity). Only cached leaves are queued, and every node of the
  // chain but the last has its successor for a primary child: only the
  // last can be queued.
  void hold_chain(const uint32_t* nodes, uint64_t n, std::vector<std::vector<uint32_t>>& blocks);
  void release_anchor(uint32_t node, BlockRetention r);
  // One owner fewer for blocks[g * stride] of every group (kNoBlock
  // skipped); the ones that became cached join their queues.
  void release_set(const uint32_t* blocks, size_t stride, BlockRetention r);
  void release_node(uint32_t node, BlockRetention r);
  // One owner fewer for a windowed group's block that left a sequence's window.
  void release_window_block(uint32_t g, uint32_t blk, BlockRetention r) {
    if (residency_.release_block(g, blk)) on_window_cached(residency_.info(g, blk).node, g, r);
  }

  // --- Retention ------------------------------------------------------------
  // A node published at now_ms() (read once per call) with the priority of
  // the block that made it.
  void mark_published(uint32_t node, uint8_t priority, uint64_t now_ms);
  uint64_t now_ms() const { return time_.now_ms(); }
  // Moves the manual clock forward (the caller checked it is manual).
  void advance_clock(uint64_t ms) {
    time_.advance(ms);
    expire_due();
  }
  // Reverts the priority of every cached entry whose duration has run out.
  void expire_due();
  void cancel_expiry(uint32_t node) { expiry_.cancel(expiry_key(node, 0)); }

  // --- Evicting -------------------------------------------------------------
  struct Victim {
    uint32_t node = kNoNode;
    uint32_t group = kAnchor;  // kAnchor: a whole node; else the windowed group of a slot
    uint32_t priority = UINT32_MAX;
    uint64_t age = 0;
  };
  static constexpr uint32_t kAnchor = UINT32_MAX;
  // The rule: the lowest (priority, age) entry among the anchor queue (if
  // the pool serves an anchor group) and the queues of the pool's windowed
  // groups; node kNoNode when none is queued.
  Victim next_victim(uint32_t pool) const;
  // Evicts a cached anchor node (with its queued windowed slots and its
  // children in other tiers).
  void evict_node(uint32_t node);
  void evict_window_slot(uint32_t node, uint32_t g);
  // Without anchor groups: erases a node left with nothing, then its
  // ancestors likewise.
  void erase_if_unused(uint32_t node);
  // Whether an add may take its victims ahead (alloc_sets_ahead): every
  // eviction takes whole nodes (no windowed group, page arena or tier) and
  // offers nothing to the stores (none, or writing through at commit).
  bool can_evict_ahead() const {
    return layout_.windowed.empty() && residency_.arena() == nullptr && !tier_->enabled() &&
           (stores_ == nullptr || !stores_->offers_at_eviction());
  }
  // blocks[g][first + i] = a fresh block of group g for i < count, the
  // victims taken out of the tree ahead, a chunk at a time, each one's
  // blocks joining the free lists (with one group: going straight to the
  // caller) at the moment alloc_block would have evicted it: the same
  // victims in the same order, the same blocks.
  void alloc_sets_ahead(std::vector<std::vector<uint32_t>>& blocks, uint64_t first,
                        uint64_t count);
  // Drops every cached block (primary and other tiers); not counted as
  // evictions.
  void evict_all();

  // Residency::Reclaimer.
  void refresh_order() override { expire_due(); }
  void evict_one(uint32_t pool) override;
  void empty_page(uint32_t pool, uint32_t page) override;
  void empty_range(uint32_t pool, uint64_t from, uint64_t to) override;

  // --- What tiers do to the queues ------------------------------------------
  // An anchor victim moved to another tier (its primary blocks freed, none
  // reused yet; a write-through job still reading them is waited for,
  // StoreChain::leaving): it leaves the anchor queue and
  // its windowed slots' queues (the node's retention expiry stays); its
  // parent may become an evictable leaf. Call after the move.
  // parent_leaves: the caller moves or evicts the parent next, in the same
  // call (a chain leaving leaf first): it is not queued in between.
  void on_moved_out(uint32_t node, const uint32_t* slots, bool parent_leaves = false);
  // `node` is about to move out of the primary tier (its block ids change
  // before on_moved_out): waits for its write-through job, which reads the
  // node's block ids from its record (StoreChain::leaving).
  void before_move_out(uint32_t node);
  // A node of another tier is primary again with blocks[g] (kNoBlock: an
  // empty slot), all cached: it joins the queues; its parent has a primary
  // child again.
  void on_moved_in(uint32_t node, const uint32_t* blocks);
  // Planning (a tier's look ahead at the victims of a call): entries taken
  // out of or put back into the anchor queue (kAnchor) or a windowed
  // group's queue, each change undone by undo_trial() in reverse order.
  void trial_take_out(uint32_t node, uint32_t group);
  void trial_put_in(uint32_t node, uint32_t group);  // at the node's priority and age
  bool queued(uint32_t node, uint32_t group) const { return queue(group).contains(node); }
  void undo_trial();

  // A victim deferred by the stores (StoreChain::defer: its write job was
  // not finished) whose job is finished: queued again as the newest of its
  // priority if it is still a cached primary leaf and not queued.
  void requeue(uint32_t node);

  // The checker (eviction_check.cpp): queues hold exactly the cached
  // anchor leaves (but those the stores deferred) and the cached windowed slots, at their priority and in
  // age order; expiries wait exactly for cached entries, at their moment.
  void check() const;

 private:
  // The expiry heap key of a node's anchor (k = 0) or windowed slot k + 1.
  uint32_t expiry_key(uint32_t node, uint32_t k) const { return node * expiry_stride_ + k; }
  EvictionPolicy& queue(uint32_t group) {
    return group == kAnchor ? policy_ : window_policies_[uint32_t(layout_.window_slot[group])];
  }
  const EvictionPolicy& queue(uint32_t group) const {
    return group == kAnchor ? policy_ : window_policies_[uint32_t(layout_.window_slot[group])];
  }
  void on_cached(uint32_t node, BlockRetention r);
  // The anchor queue's victim, after moving any victim whose write-through
  // job is not finished to the stores' deferred list (kNoNode: none).
  uint32_t anchor_victim() {
    uint32_t v = policy_.victim();
    // With a host tier its plan picks the victims (next_victim) and counts
    // on the queue: a pending victim is moved after a wait there instead
    // (on_moved_out -> StoreChain::leaving).
    if (stores_ == nullptr || tier_->enabled()) return v;
    for (;;) {
      while (v != kNoNode && stores_->pending(v)) {
        policy_.remove(v);
        stores_->defer(v);
        v = policy_.victim();
      }
      // Only deferred victims left: wait for the oldest one's job (CPU
      // work, never I/O) rather than fail a call that would succeed
      // without write-through.
      if (v != kNoNode || !stores_->wait_deferred()) return v;
      v = policy_.victim();
    }
  }
  void on_window_cached(uint32_t node, uint32_t g, BlockRetention r);
  // A cached parent left without primary children becomes evictable at its
  // age; whether it did. kTiers: children may live in other tiers.
  template <bool kTiers>
  bool requeue_parent(uint32_t parent);
  // What every eviction of a whole node does: a write-through job still
  // reading its blocks is waited for (StoreChain::leaving), it leaves its queue and its
  // retention expiry, `take_blocks(node)` disposes of its blocks, it leaves
  // the tree (its scope reference dropped through `run`), and its parent
  // may become an evictable leaf (requeue_parent). Returns whether the
  // parent was queued.
  template <bool kTiers, class TakeBlocks>
  bool retire(uint32_t node, PrefixIndex::ScopeRun& run, TakeBlocks&& take_blocks);
  void evict_subtree(uint32_t node);
  // empty_page's walk: evict_subtree for full-attention blocks (the tree
  // links children: pools share pages).
  void empty_range_linked(uint32_t pool, uint64_t from, uint64_t to);
  // retire() of the next `count` victims (<= kEvictChunk), their blocks
  // still cached and out of the free lists: evicted_ lists them, one set
  // per victim.
  void evict_ahead(uint64_t count);

  const GroupLayout& layout_;
  PrefixIndex& index_;
  const RadixTree& tree_;  // index_'s, read
  Residency& residency_;
  CacheCounters& counters_;
  Tier* tier_ = nullptr;
  StoreChain* stores_ = nullptr;
  EvictionPolicy policy_;                        // cached anchor leaves
  std::vector<EvictionPolicy> window_policies_;  // cached windowed slots, per windowed group
  RetentionClock time_;
  uint32_t expiry_stride_;                       // 1 + windowed groups
  ExpiryHeap expiry_;
  uint64_t clock_ = 0;                           // release moments
  std::vector<uint32_t> release_set_;            // one block per group, being released
  static constexpr uint64_t kEvictChunk = 256;
  std::vector<uint32_t> evicted_;                // kEvictChunk block sets
  struct Undo {
    // Built in place (emplace_back): a temporary copied in as 16 bytes
    // would wait for the queue's stores before it (failed forwarding).
    Undo(uint32_t n, uint32_t g, bool in, uint32_t p, uint64_t a)
        : node(n), group(g), inserted(in), priority(p), age(a) {}
    uint32_t node;
    uint32_t group;     // kAnchor or a windowed group
    bool inserted;      // else removed
    uint32_t priority;  // the entry's, to put it back as it was
    uint64_t age;
  };
  std::vector<Undo> undo_;                       // trial changes
};

}  // namespace kvc
