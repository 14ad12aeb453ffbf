// The secondary (host) tier (TensorRT-LLM's secondary memory), the first
// Tier (tier.h): host pools mirroring the primary pools, their prioritized
// LRU, the moves of nodes each way, and the plan a call makes of them.
//
// A tree node lives in one tier with all its blocks (one per group):
//  - primary: its blocks are in the primary pools (GPU memory on CUDA);
//  - host: its blocks are in the host pools (pinned host memory). A host
//    node is never in use: a hit copies it back (onboard) into fresh primary
//    blocks before the sequence holds it.
// Rules (as TensorRT-LLM's KV cache manager):
//  - A cached primary node evicted to make room is offloaded (copied to a
//    host block, it stays in the tree, reusable) when its priority is >=
//    secondary_offload_min_priority and the host tier has room (a free block
//    set, else its LRU leaf is evicted); otherwise it is dropped, and with it
//    any offloaded children it has.
//  - For primary eviction a node counts as a leaf when none of its children
//    is primary: offloaded children never pin their parent in primary memory.
//  - A host node's children are all host nodes (children leave first,
//    onboarding runs root-down). The host tier evicts by the same
//    prioritized LRU over host nodes without children; eviction removes the
//    node from the tree.
//  - Copies are batched per call (one Device call per pool and direction)
//    on the caller's stream; the Device orders later calls on other streams
//    after them (order_after_tier_copies).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/device.h"
#include "core/block_pool.h"
#include "core/cache_stats.h"
#include "core/eviction.h"
#include "core/eviction_policy.h"
#include "core/group_layout.h"
#include "core/layer_groups.h"
#include "core/pool_memory.h"
#include "core/prefix_index.h"
#include "core/residency.h"
#include "core/store_chain.h"
#include "core/tier.h"
#include "core/tier_copy_batch.h"

namespace kvc {

constexpr uint8_t kHostTier = 1;  // TreeNode::tier of a host node

class HostTier final : public Tier {
 public:
  // `host_memory`: the host pools, one per primary pool (same groups).
  HostTier(const GroupLayout& layout, const LayerGrouping& grouping, PrefixIndex& index,
           Residency& residency, Eviction& eviction, CacheCounters& counters,
           const RankPools& ranks, uint32_t min_priority);

  // The block stores a host node leaving the tree is offered to (nullptr:
  // none); set once.
  void set_stores(StoreChain* stores) { stores_ = stores; }

  const BlockPool& pool(size_t p) const { return pools_[p]; }
  const EvictionPolicy& policy() const { return policy_; }

  // Tier.
  bool enabled() const override { return true; }
  void add_stats(CacheStats& s) const override;
  uint64_t count_held(const std::vector<uint32_t>& nodes, uint32_t partial) const override;
  void prepare(const Reservation& r, void* stream) override;
  void adopt(uint32_t node, const uint32_t* blocks) override;
  void drop_children(uint32_t node) override;
  void evict_all() override;
  void revert_priority(uint32_t node) override;
  void check() const override;  // host_tier_check.cpp

 private:
  bool in_host(uint32_t node) const { return tree_.node(node).tier == kHostTier; }
  // The same from the node's record (RadixTree::tier): for the nodes of an
  // add's match, whose records are in cache and TreeNode lines are not.
  bool matched_in_host(uint32_t node) const { return tree_.tier(node) == kHostTier; }
  // prepare's plan (host_tier_plan.cpp): the victims that free r.sets block
  // sets, each anchor victim's fate, the host nodes that make room.
  void plan_victims(const Reservation& r);
  // The plan itself. kRead (models without windowed groups): it reads the
  // queues through PlanQueue and writes none; else it looks ahead by
  // changing the queues (Eviction's trial calls, the host queue with undo_)
  // and undoes every change before it returns.
  template <bool kRead>
  void plan(const Reservation& r);
  // next: the victim that leaves after it in this call (kNoNode: none).
  void offload_node(uint32_t node, const uint32_t* host_blocks, uint32_t next);
  void onboard_node(uint32_t node, const uint32_t* blocks);
  // Evicts a host node (and its host subtree) from the tree.
  void evict_node(uint32_t node);
  void release_blocks(const uint32_t* blocks);
  // What prepare's loops fetch kAhead nodes ahead: a host victim's host
  // pool lines and its parent's tier-children count; an offload's primary
  // and host pool lines and its parent.
  static constexpr size_t kAhead = 8;
  // How many turns ahead the plan fetches a chain's ancestors when its ids
  // are consecutive (plan_anchor_victim).
  static constexpr uint32_t kChainAhead = 4;
  void prefetch_host_blocks(uint32_t node) const;
  // (next: as offload_node's.)
  void prefetch_offload(uint32_t node, const uint32_t* host_blocks, uint32_t next) const;
  // What on_moved_out reads of an offload's parent once its record is near:
  // the anchor block's pool line (node_ref), fetched kAhead / 2 ahead.
  void prefetch_parent_ref(uint32_t node, uint32_t next) const;
  uint32_t victim_after(size_t i) const {
    return i + 1 < victims_.size() ? victims_[i + 1].node : kNoNode;
  }
  uint64_t set_bytes() const;

  const GroupLayout& layout_;
  const LayerGrouping& grouping_;
  PrefixIndex& index_;
  const RadixTree& tree_;  // index_'s, read
  Residency& residency_;
  Eviction& eviction_;
  CacheCounters& cache_counters_;
  const RankPools& ranks_;  // every rank's pools and host pools
  std::vector<BlockPool> pools_;  // one per primary pool (same groups)
  EvictionPolicy policy_;         // host nodes without children
  uint32_t min_priority_;
  StoreChain* stores_ = nullptr;
  HostTierCounters counters_;

  // The plan of one call (capacity kept between calls). Its entries are
  // built in place (emplace_back): a temporary copied in as one wide load
  // fails store forwarding and waits for every store before it, the queue
  // changes' cache misses included.
  struct Victim {
    Victim(uint32_t n, bool o) : node(n), offload(o) {}
    uint32_t node;
    bool offload;  // else dropped
  };
  std::vector<Victim> victims_;        // primary (anchor) victims, in eviction order
  struct SlotVictim {
    SlotVictim(uint32_t n, uint32_t g) : group(g), node(n) {}
    // (group first: not a copy of Eviction::Victim's first 8 bytes, which
    // the compiler would read at once, before the branch, and wait for.)
    uint32_t group;  // a windowed group
    uint32_t node;
  };
  std::vector<SlotVictim> slot_victims_; // cached windowed slots evicted on their own
  std::vector<uint32_t> host_victims_;   // host nodes evicted to make room, in order
  std::vector<uint32_t> onboards_;       // held host nodes, root-down
  std::vector<uint32_t> dest_;           // destination blocks, num_groups per moved node
  struct Undo {                          // host queue changes while planning
    Undo(uint32_t n, bool in, uint32_t p, uint64_t a) : node(n), inserted(in), priority(p), age(a) {}
    uint32_t node;
    bool inserted;  // else removed
    uint32_t priority;
    uint64_t age;
  };
  std::vector<Undo> undo_;
  // The read-only plan's view of one queue: a cursor over it in victim
  // order (lowest priority first, oldest first), skipping the nodes the
  // call holds, and the nodes that became evictable while planning
  // (parents whose last child was planned) in a small heap, each where
  // insert_by_age would have put it: by (priority, age), after every entry
  // of the same key already there. The queue is never written, so a victim
  // costs no stores into random lines and nothing is undone.
  class PlanQueue {
   public:
    void start(const EvictionPolicy& q);
    // Takes the next victim (kNoNode: none left); skip(n): n is held.
    // fetch(n) is called with the cursor's next entry, whose turn may come
    // later: what that turn reads of it can be fetched.
    template <class Skip, class Fetch>
    uint32_t take(Skip&& skip, Fetch&& fetch);
    // `node` became evictable at (priority, age).
    void add(uint32_t node, uint32_t priority, uint64_t age);
    void finish() {
      queue_ = nullptr;
      added_.clear();
    }
    bool idle() const { return queue_ == nullptr && added_.empty(); }

   private:
    void pop_top();
    struct Added {
      // Built in place: a temporary copied in as a wide load would wait
      // for every store before it (failed store forwarding).
      Added(uint32_t p, uint32_t n, uint64_t a, uint64_t s)
          : priority(p), node(n), age(a), seq(s) {}
      uint32_t priority;
      uint32_t node;
      uint64_t age;
      uint64_t seq;  // order of addition: the later of equal keys goes after
    };
    // The heap's order (the first entry on top): key (p, age, seq) after
    // key (q, age_q, seq_q). Taken field by field, so that the sifts
    // compare with an entry that is not in the heap without building one.
    static bool after(uint32_t p, uint64_t age, uint64_t seq, uint32_t q, uint64_t age_q,
                      uint64_t seq_q) {
      if (p != q) return p > q;
      if (age != age_q) return age > age_q;
      return seq > seq_q;
    }
    static bool after(const Added& a, const Added& b) {
      return after(a.priority, a.age, a.seq, b.priority, b.age, b.seq);
    }
    // Writes an entry field by field (no temporary: see Added).
    static void put(Added& a, uint32_t priority, uint32_t node, uint64_t age, uint64_t seq) {
      a.priority = priority;
      a.node = node;
      a.age = age;
      a.seq = seq;
    }
    const EvictionPolicy* queue_ = nullptr;
    uint32_t priority_ = 0;     // the cursor's list
    uint32_t node_ = kNoNode;   // the cursor's entry (maybe held)
    uint64_t seq_ = 0;
    std::vector<Added> added_;  // a heap by after()
  };
  PlanQueue anchor_plan_;  // Eviction's anchor queue
  PlanQueue host_plan_;    // this tier's queue
  std::vector<int64_t> short_blocks_;  // per pool: primary blocks the plan must still free
  std::vector<int64_t> host_room_;     // per pool: host blocks free for offloads
  std::vector<int64_t> freed_;         // per pool: blocks of the victim being planned
  // Per node, the plan's counts, in one 8-byte entry (one cache line a
  // node where two arrays cost two: the plan is bound by memory latency).
  struct Marks {
    uint32_t gone_primary = 0;  // primary children chosen as victims
    uint32_t gone_host = 0;     // host children chosen as host victims
    bool none() const { return gone_primary == 0 && gone_host == 0; }
  };
  BigArray<Marks> marks_;
  // The nodes the call holds (never victims), one bit a node: this table
  // (id_bound / 8 bytes) stays in cache, where marking them in marks_ cost
  // a random line per held node (a long cached prompt holds thousands).
  // Its words are cleared through the held list when the plan ends.
  std::vector<uint64_t> excluded_bits_;
  bool is_excluded(uint32_t n) const { return (excluded_bits_[n >> 6] >> (n & 63)) & 1; }
  std::vector<uint32_t> touched_;      // nodes whose marks_ entries are set
  TierCopyBatch batch_;
};

}  // namespace kvc
