// State snapshots (kvcache/state.h, issue 21 items 4 and 5): copies of a
// sequence's state slots (every resource's slot bytes) at a block-aligned
// position, each hung on the radix-tree node of the block ending there, in
// a pool of its own with a fixed number of snapshot slots. A node has at
// most one snapshot; a node leaving the tree drops its snapshot (dropped());
// a snapshot leaving the pool leaves its node's blocks alone.
//
// Eviction (a full pool taking a new snapshot): the victim is the snapshot
// whose node has the lowest priority now (TreeNode::priority, what the
// prioritized LRU evicts first), the least recently published or reused
// among equals.
//
// Host snapshots (the host tier, state.h): with host snapshot slots, the
// victim of a full pool whose node's priority is at or above the secondary
// offload priority is copied into a host snapshot slot (a free one, else
// the host victim by the same rule, dropped) instead of being dropped; a
// node's one snapshot is then in the host pool. A reuse or rewind of a
// host snapshot copies it straight into the sequence's state slots (host
// to device) and leaves it in the host pool; a publish at its node moves
// it back to the device pool (the new bytes). Offload and onboard copies
// are waited for (Device::synchronize on the call's stream) before the
// call returns, so a host slot is never rewritten under a copy.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/device.h"
#include "core/radix_tree.h"
#include "core/snapshot_gate.h"
#include "core/state_slots.h"

namespace kvc {

struct SnapshotCounters {
  uint64_t published = 0;   // publish calls that stored a snapshot
  uint64_t hits = 0;        // adds that reused a prefix through a snapshot
  uint64_t hit_tokens = 0;  // the tokens those adds reused
  uint64_t restores = 0;    // rewinds that restored a snapshot
  uint64_t evicted = 0;     // snapshots evicted for a new one (the pool full)
  uint64_t dropped = 0;     // snapshots dropped with their node
  uint64_t offloaded = 0;     // device victims copied into the host pool
  uint64_t onboarded = 0;     // restores (reuse or rewind) from the host pool
  uint64_t host_evicted = 0;  // host snapshots evicted for an offload (host pool full)
};

class StateSnapshots final : public SnapshotGate {
 public:
  // num_snapshots snapshot slots of every resource of `slots`, allocated
  // through the device (Error(KVC_ERR_OUT_OF_MEMORY)); `tree`'s node ids
  // key them. num_host_snapshots host snapshot slots (Device::allocate_host)
  // take the victims whose node's priority is >= min_priority.
  StateSnapshots(Device& device, const StateSlots& slots, const RadixTree& tree,
                 uint32_t num_snapshots, uint32_t num_host_snapshots = 0,
                 uint32_t min_priority = 0);
  ~StateSnapshots();
  StateSnapshots(const StateSnapshots&) = delete;
  StateSnapshots& operator=(const StateSnapshots&) = delete;

  uint32_t num_slots() const { return num_slots_; }
  uint32_t used() const { return num_slots_ - uint32_t(free_.size()); }
  uint32_t num_host_slots() const { return num_host_slots_; }
  uint32_t host_used() const { return num_host_slots_ - uint32_t(host_free_.size()); }
  // Whether node's snapshot is in the host pool.
  bool in_host(uint32_t node) const {
    return node < host_of_.size() && host_of_[node] != kNone;
  }
  // Bytes one publish or restore copies (the sum of the slots' bytes).
  uint64_t bytes_per_snapshot() const { return copy_bytes_; }
  // Bytes of one snapshot slot of every resource (the sum of slot strides).
  uint64_t stride_bytes() const { return stride_bytes_; }
  const SnapshotCounters& counters() const { return counters_; }
  SnapshotCounters& counters() { return counters_; }

  bool has(uint32_t node) const override {
    return (node < slot_of_.size() && slot_of_[node] != kNone) || in_host(node);
  }
  void dropped(uint32_t node) override;

  // Copies sequence seq's state slots into node's snapshot on `stream`
  // (device to device): its own slot when it has one, else a free slot,
  // else the victim's (see above; offloaded or dropped). A host snapshot of
  // node is dropped first. num_slots() must be > 0.
  void publish(uint32_t node, uint64_t seq, void* stream);
  // Copies node's snapshot (has(node)) into sequence seq's state slots
  // (from the host pool: host to device, then waits for it).
  void restore(uint32_t node, uint64_t seq, void* stream);
  // Drops every snapshot (a reset of the tree).
  void clear();
  // Every slot free or held by exactly one node, and that node live and
  // naming the slot back; Error(KVC_ERR_INTERNAL) naming the first break.
  void check() const;

 private:
  static constexpr uint32_t kNone = ~0u;
  void copy(uint32_t k, uint64_t seq, bool to_snapshot, void* stream, bool host = false);
  // Device snapshot slot k's bytes into host snapshot slot h.
  void offload_copy(uint32_t k, uint32_t h, void* stream);
  // Device slot k leaves the pool: into the host pool when it qualifies.
  void evict(uint32_t k, void* stream);
  uint32_t victim(const std::vector<uint32_t>& node_of,
                  const std::vector<uint64_t>& used_at) const;
  void release(uint32_t k);
  void release_host(uint32_t h);
  void check_pool(const char* pool, const std::vector<uint32_t>& free,
                  const std::vector<uint32_t>& node_of, const std::vector<uint32_t>& slot_of)
      const;

  Device& device_;
  const StateSlots& slots_;
  const RadixTree& tree_;
  uint32_t num_slots_ = 0;
  uint64_t copy_bytes_ = 0;
  uint64_t stride_bytes_ = 0;
  std::vector<void*> bases_;       // per resource: snapshot slot 0
  std::vector<uint32_t> free_;     // free snapshot slots, lowest last
  std::vector<uint32_t> node_of_;  // per snapshot slot: its node, or kNone
  std::vector<uint64_t> used_at_;  // per snapshot slot: tick of its last publish or reuse
  std::vector<uint32_t> slot_of_;  // per tree node id: its snapshot slot, or kNone
  // The host pool, as above.
  uint32_t num_host_slots_ = 0;
  uint32_t min_priority_ = 0;
  std::vector<void*> host_bases_;
  std::vector<uint32_t> host_free_;
  std::vector<uint32_t> host_node_of_;
  std::vector<uint64_t> host_used_at_;
  std::vector<uint32_t> host_of_;  // per tree node id: its host snapshot slot, or kNone
  std::vector<CopyRange> ranges_;  // per resource: copy()'s ranges (sized at create)
  uint64_t tick_ = 0;
  SnapshotCounters counters_;
};

}  // namespace kvc
