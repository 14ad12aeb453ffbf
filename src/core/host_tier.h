// The secondary (host) tier's state in the cache manager (TensorRT-LLM's
// secondary memory): host pools mirroring the primary pools, their
// prioritized LRU, per-node counts of offloaded children, the counters, and
// the scratch a call plans its moves in. The operations are BlockManager
// members, in host_tier.cpp.
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
#include <vector>

#include "core/block_pool.h"
#include "core/eviction_policy.h"
#include "core/tier_copy_batch.h"

namespace kvc {

constexpr uint8_t kPrimaryTier = 0;
constexpr uint8_t kHostTier = 1;

struct HostTierCounters {
  uint64_t offloaded_blocks = 0;  // block positions copied primary -> host
  uint64_t onboarded_blocks = 0;  // block positions copied host -> primary
  uint64_t offloaded_bytes = 0;
  uint64_t onboarded_bytes = 0;
};

struct HostTier {
  HostTier(const std::vector<uint64_t>& pool_blocks, uint32_t id_bound, uint32_t min_priority);

  bool enabled() const { return !pools.empty(); }

  std::vector<BlockPool> pools;  // one per primary pool (same groups); empty: no tier
  EvictionPolicy policy;         // host nodes without children (sized 0 without a tier)
  // Per tree node: children living in the host tier. A primary node is a
  // leaf for primary eviction when all its children are counted here.
  std::vector<uint32_t> host_children;
  uint32_t min_priority;
  HostTierCounters counters;

  // Scratch of one call's plan (capacity kept between calls).
  struct Victim {
    uint32_t node;
    bool offload;  // else dropped
  };
  std::vector<Victim> victims;        // primary (anchor) victims, in eviction order
  struct SlotVictim {
    uint32_t node;
    uint32_t group;  // a windowed group
  };
  std::vector<SlotVictim> slot_victims; // cached windowed slots evicted on their own
  std::vector<uint32_t> host_victims; // host nodes evicted to make room, in order
  std::vector<uint32_t> onboards;     // held host nodes, root-down
  std::vector<uint32_t> dest;         // destination blocks, num_groups per moved node
  // Which queue a simulated change touched: the primary anchor queue, the
  // host queue, or windowed group k's queue (kWindowQueue + k).
  static constexpr uint32_t kPrimaryQueue = 0, kHostQueue = 1, kWindowQueue = 2;
  struct Undo {
    uint32_t node;
    uint32_t queue;
    bool inserted;      // else removed
    uint32_t priority;  // the entry's, to put it back as it was
    uint64_t age;
  };
  std::vector<Undo> undo;             // simulated queue changes, undone in reverse
  std::vector<int64_t> short_blocks;  // per pool: primary blocks the plan must still free
  std::vector<int64_t> host_room;     // per pool: host blocks free for offloads
  std::vector<int64_t> freed;         // per pool: blocks of the victim being planned
  std::vector<uint8_t> excluded;      // per node: held by the call, never a victim
  std::vector<uint32_t> gone_primary; // per node: primary children chosen as victims
  std::vector<uint32_t> gone_host;    // per node: host children chosen as host victims
  std::vector<uint32_t> touched;      // nodes whose scratch entries are set
  TierCopyBatch batch;
};

}  // namespace kvc
