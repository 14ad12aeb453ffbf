// The KV event stream (include/kvcache/events.h): a ring of events that
// the owners append to where they change what is cached (the prefix index
// when a node leaves the tree, Sequences when it publishes, Eviction when a
// windowed slot goes or a priority changes, a tier when it moves a node),
// and the portable hash of every live tree node, which events name blocks
// by. Exists only when the config's event_buffer_size is not 0: every
// emission site tests a pointer, so events off cost one branch.
//
// Loss: a full ring drops its oldest event and remembers the dropped ids
// (always one contiguous range before the oldest kept one); the next drain
// reports them as one LOST event first.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/portable_hash.h"
#include "kvcache/events.h"

namespace kvc {

class PrefixIndex;

class EventLog {
 public:
  EventLog(uint32_t capacity, uint32_t tokens_per_block, uint64_t seed, uint32_t max_nodes);

  const PortableHasher& hasher() const { return hasher_; }
  // The portable hash of live tree node `node` (0 for the root).
  uint64_t hash(uint32_t node) const { return nodes_[node].hash; }
  bool has_lora(uint32_t node) const { return nodes_[node].has_lora; }
  uint64_t lora(uint32_t node) const { return nodes_[node].lora; }

  // --- Emission ------------------------------------------------------------
  // A new node `node` under `parent` (kRoot: a first block) in the scope
  // encoded as `scope_bytes`, with the block's encoded extra keys: its
  // portable hash is computed and kept, and STORED emitted.
  void stored(uint32_t node, uint32_t parent, const std::string& scope_bytes,
              const std::string& extra_bytes, const int32_t* tokens, uint32_t num_tokens,
              uint64_t groups, uint32_t priority);
  // Live node `node` gained the blocks of `groups` (its hash known).
  void stored_groups(uint32_t node, uint32_t parent, const int32_t* tokens, uint32_t num_tokens,
                     uint64_t groups, uint32_t priority);
  void removed(uint32_t node, uint64_t groups, uint32_t tier);
  void tier_changed(uint32_t node, uint32_t tier, uint64_t groups, uint32_t priority);
  void priority_changed(uint32_t node, uint32_t priority);
  void cleared();
  // While muted (a reset drops everything, then says CLEARED) nothing is
  // emitted.
  void set_muted(bool muted) { muted_ = muted; }

  // --- Reading -------------------------------------------------------------
  // drain() of events.h, into caller memory.
  void drain(kvc_event_t* out, size_t capacity, int32_t* tokens, size_t token_capacity,
             kvc_event_drain_t& result);
  uint64_t last_id() const { return next_id_ - 1; }
  uint64_t pending() const { return size_ + (lost_count_ != 0 ? 1 : 0); }

  // Every block of the tree with its label, parents first (event_snapshot.cpp).
  void snapshot(const PrefixIndex& index, std::vector<kvc_snapshot_entry_t>& out) const;

  // The checker: the ring's counts add up, and every live node's label is
  // its portable hash rebuilt from its key (event_snapshot.cpp).
  void check(const PrefixIndex& index) const;

 private:
  struct NodeLabel {
    uint64_t hash = 0;
    uint64_t lora = 0;
    bool has_lora = false;
  };
  // The next slot to fill (the oldest dropped when full).
  kvc_event_t& push(uint32_t kind, uint32_t node);
  int32_t* slot_tokens(size_t slot) { return tokens_.data() + slot * tokens_per_block_; }

  PortableHasher hasher_;
  // The last scope seen: a commit publishes its blocks in one scope.
  std::string scope_bytes_;
  uint64_t scope_digest_ = 0, scope_lora_ = 0;
  bool scope_has_lora_ = false, scope_known_ = false;
  uint32_t tokens_per_block_;
  std::vector<NodeLabel> nodes_;      // per tree node id
  std::vector<kvc_event_t> ring_;
  std::vector<int32_t> tokens_;       // tokens_per_block per ring slot
  size_t head_ = 0;                   // oldest pending event's slot
  size_t size_ = 0;                   // pending events in the ring
  uint64_t token_count_ = 0;          // token ids the pending STORED events carry
  uint64_t next_id_ = 1;
  uint64_t lost_first_ = 0;           // dropped ids [lost_first_, + lost_count_)
  uint64_t lost_count_ = 0;
  bool muted_ = false;
};

}  // namespace kvc
