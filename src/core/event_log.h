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
  // `id_bound`: RadixTree::id_bound() (node ids are below it).
  EventLog(uint32_t capacity, uint32_t tokens_per_block, uint64_t seed, uint32_t id_bound);

  const PortableHasher& hasher() const { return hasher_; }
  // The portable hash of live tree node `node` (0 for the root).
  uint64_t hash(uint32_t node) const { return hashes_[node]; }

  // --- Emission ------------------------------------------------------------
  // A new node `node` under `parent` (kRoot: a first block) in the scope
  // encoded as `scope_bytes`, with the block's encoded extra keys: its
  // portable hash is computed and kept, and STORED emitted.
  void stored(uint32_t node, uint32_t parent, const std::string& scope_bytes,
              const std::string& extra_bytes, const int32_t* tokens, uint32_t num_tokens,
              uint64_t groups, uint32_t priority);
  // Live node `node` (in the scope encoded as `scope_bytes`) gained the
  // blocks of `groups` (its hash known).
  void stored_groups(uint32_t node, uint32_t parent, const std::string& scope_bytes,
                     const int32_t* tokens, uint32_t num_tokens, uint64_t groups,
                     uint32_t priority);
  void removed(uint32_t node, uint64_t groups, uint32_t tier);
  void tier_changed(uint32_t node, uint32_t tier, uint64_t groups, uint32_t priority);
  void priority_changed(uint32_t node, uint32_t priority);
  void cleared();
  // A block store's entries (tier KVC_TIER_DISK or KVC_TIER_REMOTE, events.h):
  // addressed by hash alone, no parent, LoRA id or token ids.
  void store_stored(uint64_t hash, uint32_t tier, uint64_t groups, uint32_t num_tokens,
                    uint32_t priority);
  void store_removed(uint64_t hash, uint32_t tier, uint64_t groups);
  // While muted (a reset drops everything, then says CLEARED) nothing is
  // emitted.
  void set_muted(bool muted) { muted_ = muted; }
  bool muted() const { return muted_; }

  // --- Reading -------------------------------------------------------------
  // drain() of events.h, into caller memory.
  void drain(kvc_event_t* out, size_t capacity, int32_t* tokens, size_t token_capacity,
             kvc_event_drain_t& result);
  uint64_t last_id() const { return next_id_ - 1; }
  uint64_t pending() const { return size_ + (lost_count_ != 0 ? 1 : 0); }
  // The id of the event `i` places after the oldest pending one.
  uint64_t id_at(size_t i) const { return next_id_ - size_ + i; }

  // Every block of the tree with its label, parents first (event_snapshot.cpp).
  void snapshot(const PrefixIndex& index, std::vector<kvc_snapshot_entry_t>& out) const;

  // The checker: the ring's counts add up, and every live node's label is
  // its portable hash rebuilt from its key (event_snapshot.cpp).
  void check(const PrefixIndex& index) const;

 private:
  // A pending event: kvc_event_t less what the drain derives (the id from
  // the place in the ring, the token offset from the kind), 40 bytes
  // instead of 88: publishing writes one per block, so its size is memory
  // traffic on the commit path.
  struct Record {
    uint64_t hash, parent_hash, groups, lora_id;
    uint32_t num_tokens;
    uint8_t kind, tier, priority, has_lora;
  };
  // STORED events of the tree's tiers carry token ids; a store's do not.
  static bool carries_tokens(const Record& r) {
    return r.kind == KVC_EVENT_STORED && r.tier < KVC_TIER_DISK;
  }
  // Takes the next slot (the oldest event dropped when full) for `r`;
  // answers the slot.
  size_t push(const Record& r);
  int32_t* slot_tokens(size_t slot) { return tokens_.data() + slot * tokens_per_block_; }
  // Makes the scope caches describe `scope_bytes`. A commit publishes
  // every block in one scope: the check runs per block, so it compares
  // inline (scopes are a few bytes) rather than through memcmp.
  void use_scope(const std::string& scope_bytes) {
    if (!scope_known_ || !same_bytes(scope_bytes, scope_bytes_)) learn_scope(scope_bytes);
  }
  static bool same_bytes(const std::string& a, const std::string& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (a[i] != b[i]) return false;
    return true;
  }
  void learn_scope(const std::string& scope_bytes);
  // STORED for `node` in the scope the caches describe.
  void emit_stored(uint32_t node, uint32_t parent, const int32_t* tokens, uint32_t num_tokens,
                   uint64_t groups, uint32_t priority);

  PortableHasher hasher_;
  // The last scope seen: a commit publishes its blocks in one scope.
  std::string scope_bytes_;
  uint64_t scope_digest_ = 0, scope_lora_ = 0;
  bool scope_has_lora_ = false, scope_known_ = false;
  uint32_t tokens_per_block_;
  std::vector<uint64_t> hashes_;      // per tree node id: its portable hash
  std::vector<Record> ring_;
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
