// The cache manager: sequences, their blocks in every layer group, the
// radix tree of published blocks, eviction, pins and statistics. Not
// synchronized: kvc::Cache's mutex serializes the calls.
//
// Every call is all or nothing: it checks everything that can fail (ids,
// arguments, free + evictable blocks, host allocations) before the first
// change, so a failure leaves every count, reference count, queue, tree
// node and sequence as it was.
//
// Full and windowed groups. A tree node holds one block slot per layer
// group. The full-attention groups ("anchor" groups) move together: a
// sequence holds their blocks at every position, their reference counts
// are equal, and a node lives exactly as long as its anchor blocks; they
// are evicted leaves first, one node at a time (`policy_`). A windowed
// group releases a sequence's blocks once no token from `committed` on can
// attend to them, so a sequence holds at most ceil(W/T) + 1 of them; a
// node's windowed slot is evicted on its own, interior nodes included
// (`window_policies_`, one per windowed group), and empties. In a model
// whose groups are all windowed there is no anchor: a node lives while it
// has a block, a child, or a sequence naming it (TreeNode::holders).
// Groups with equal block bytes draw from one pool, so blocks a windowed
// group releases serve the full groups and the other way round.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/device.h"
#include "core/block_key.h"
#include "core/block_pool.h"
#include "core/cache_stats.h"
#include "core/cache_config.h"
#include "base/error.h"
#include "core/eviction.h"
#include "core/eviction_policy.h"
#include "core/expiry_heap.h"
#include "core/group_layout.h"
#include "core/host_tier.h"
#include "core/layer_groups.h"
#include "core/pool_memory.h"
#include "core/prefix_index.h"
#include "core/radix_tree.h"
#include "core/reservation.h"
#include "core/residency.h"
#include "core/retention.h"
#include "core/retention_clock.h"
#include "core/scope_table.h"
#include "core/sequence.h"
#include "core/sequence_table.h"
#include "core/tier.h"

namespace kvc {

// Longest sequence, in tokens: lengths and offsets are int32 in the tables
// attention kernels take.
constexpr uint64_t kMaxSequenceTokens = 0x7fffffff;

struct SequenceOptions {
  uint32_t prompt_priority = kDefaultPriority;
  uint32_t decode_priority = kDefaultPriority;
  uint64_t decode_duration_ms = kNoDuration;
  std::vector<RetentionRange> retention_ranges;  // prompt token ranges, in order
  bool has_salt = false;  // absent differs from empty
  std::string salt;
  bool has_lora = false;  // absent differs from LoRA 0
  uint64_t lora_id = 0;
  std::vector<ExtraKey> extra_keys;
};

class BlockManager {
 public:
  // `host_memory`: the secondary tier's pools, mirroring `memory` (empty:
  // no host tier); arena_pages != 0: the pools carve pages of one arena
  // (MemoryPlan).
  BlockManager(const CacheConfig& config, const LayerGrouping& grouping,
               const std::vector<std::unique_ptr<PoolMemory>>& memory,
               const std::vector<std::unique_ptr<PoolMemory>>& host_memory, Device& device,
               uint64_t arena_pages = 0);

  // Adds sequence `id` with its prompt; returns the prompt tokens already
  // cached (never the last one). Copies a partially matched block on `stream`.
  uint64_t add(uint64_t id, const int32_t* tokens, uint64_t num_tokens,
               const SequenceOptions& options, void* stream);
  // Appends tokens, allocating blocks as needed; a shared partial tail is
  // copied first (on `stream`).
  void extend(uint64_t id, const int32_t* tokens, uint64_t num_tokens, void* stream);
  // One decode step: appends tokens[i] to sequence ids[i].
  void extend_batch(const uint64_t* ids, const int32_t* tokens, size_t count, void* stream);
  // The same three calls, except that running out of blocks returns false
  // (reason in refusal(), nothing changed) instead of throwing; every other
  // error still throws. The C API calls these.
  bool try_add(uint64_t id, const int32_t* tokens, uint64_t num_tokens,
               const SequenceOptions& options, void* stream, uint64_t* cached_tokens);
  bool try_extend(uint64_t id, const int32_t* tokens, uint64_t num_tokens, void* stream);
  bool try_extend_batch(const uint64_t* ids, const int32_t* tokens, size_t count, void* stream);
  // Why the last try_ call returned false.
  const Refusal& refusal() const { return reservation_.refusal; }
  // The first `num_computed` tokens have their KV written: full blocks among
  // them become reusable.
  void commit(uint64_t id, uint64_t num_computed);
  // Drops the last `num_tokens` tokens; blocks left empty are released.
  void rewind(uint64_t id, uint64_t num_tokens);
  // `child` shares every block of `parent`.
  void fork(uint64_t parent, uint64_t child);
  // Releases the sequence; its published blocks stay cached.
  void remove(uint64_t id);
  // Holds the sequence's published (committed full) blocks until unpin(id),
  // past its removal.
  void pin(uint64_t id);
  void unpin(uint64_t id);

  // What add() would reuse, changing nothing (not even ages).
  uint64_t probe(const int32_t* tokens, uint64_t num_tokens, const SequenceOptions& options) const;
  // Block sets (one block per group) that `num_tokens` more tokens need.
  uint64_t blocks_needed(uint64_t id, uint64_t num_tokens) const;
  // Drops every cached block; refused while any block is in use.
  void reset_reuse();
  // Moves the manual retention clock forward; priorities whose duration ran
  // out revert to the default. Refused on the monotonic clock.
  void advance_clock(uint64_t ms);
  const RetentionClock& retention_clock() const { return eviction_.clock(); }
  const ExpiryHeap& expiries() const { return eviction_.expiries(); }

  CacheStats stats() const;
  GroupStats group_stats(uint32_t group) const;
  // Throws Error(KVC_ERR_INTERNAL) describing the first broken invariant.
  void check_invariants() const;

  // The sequence, or throws Error(KVC_ERR_NOT_FOUND).
  const Sequence& sequence(uint64_t id) const;
  Sequence& sequence(uint64_t id);
  const Sequence* find_sequence(uint64_t id) const { return seqs_.find(id); }
  // Batch calls: a fresh epoch, then each ids[i] looked up once per epoch
  // (NOT_FOUND naming the index, INVALID_ARGUMENT for a repeated id).
  uint64_t next_batch_epoch() { return ++batch_epoch_; }
  Sequence& sequence_for_batch(const uint64_t* ids, size_t i, uint64_t epoch);
  // sequence_for_batch's checks on s, the lookup of ids[i] (nullptr: none).
  Sequence& claim_for_batch(Sequence* s, const uint64_t* ids, size_t i, uint64_t epoch);

  uint32_t num_groups() const { return layout_.num_groups(); }
  bool windowed(uint32_t g) const { return layout_.is_windowed(g); }
  uint32_t window(uint32_t g) const { return layout_.window[g]; }
  uint64_t first_needed(uint32_t g, uint64_t frontier) const {
    return layout_.first_needed(g, frontier);
  }
  uint32_t tokens_per_block() const { return T_; }
  const RadixTree& tree() const { return tree_; }
  const EvictionPolicy& policy() const { return eviction_.policy(); }
  const BlockPool& pool(uint32_t p) const { return residency_.pool(p); }
  uint32_t pool_of_group(uint32_t g) const { return layout_.group_pool[g]; }
  size_t num_pools() const { return residency_.num_pools(); }
  const PageArena* arena() const { return residency_.arena(); }
  // The secondary tier (tier.h; NoTier when the cache has none).
  const Tier& host_tier() const { return *tier_; }
  bool in_host_tier(uint32_t node) const { return tree_.node(node).tier == kHostTier; }

 private:
  struct Pin {
    std::vector<uint32_t> blocks;  // num_groups per entry
    std::vector<BlockRetention> retention; // per entry
  };

  // Plans `sets` fresh block sets for the call r began; false (r's
  // refusal says why) when the pools cannot give them.
  bool have_sets(Reservation& r, uint64_t sets);
  bool needs_copy_on_write(const Sequence& s) const;
  // The first group still holding position b of s (UINT32_MAX: none).
  uint32_t lead_group(const Sequence& s, uint64_t b) const;
  // Whether s holds every block it has at position b alone, none in a node.
  bool holds_alone(const Sequence& s, uint64_t b) const;
  // Whether sequence s holds node s.nodes[b] apart from its own blocks.
  bool holds_anchor(const Sequence& s, uint64_t b) const;
  void release_position(Sequence& s, uint64_t b);
  // Releases a windowed group's blocks that left the window.
  void release_out_of_window(Sequence& s);
  void mark_published(uint32_t node, const Sequence& s, uint64_t b);
  void link_new_node(uint32_t node);
  // append_new_set `count` times (s has the capacity); where every eviction
  // takes whole nodes, through Eviction::alloc_sets_ahead.
  void append_new_sets(Sequence& s, uint64_t count);
  void append_new_set(Sequence& s);
  void copy_on_write(Sequence& s, void* stream);
  bool publish_full(Sequence& s, uint64_t b, const std::string& extra);
  void publish_tail(Sequence& s);
  static void grow(std::vector<int32_t>& v, uint64_t n);
  static void reserve_blocks(Sequence& s, uint64_t n);
  void debug_check() const;
  void check_windows() const;

  const CacheConfig& cfg_;
  const LayerGrouping& grouping_;
  const std::vector<std::unique_ptr<PoolMemory>>& memory_;
  const std::vector<std::unique_ptr<PoolMemory>>& host_memory_;
  Device& device_;
  uint32_t T_;
  GroupLayout layout_;
  CacheCounters counters_;
  Residency residency_;
  PrefixIndex index_;
  const RadixTree& tree_;              // index_'s, read
  Eviction eviction_;
  std::unique_ptr<Tier> tier_;         // HostTier, or NoTier
  SequenceTable seqs_;
  std::unordered_map<uint64_t, Pin> pins_;
  uint64_t batch_epoch_ = 0;
  Reservation reservation_;  // of the call being planned
  // Scratch, reused so hot paths do not allocate.
  mutable PrefixMatch match_;  // of add and probe
  std::vector<uint32_t> set_scratch_;
  std::vector<uint32_t> position_set_;  // the blocks of one position, being released or adopted
  std::vector<uint32_t> set_scratch3_;
  std::vector<int64_t> window_begin_;  // per group, of an add
  std::vector<Sequence*> batch_scratch_;
  std::vector<uint8_t> batch_cow_;
  std::vector<std::string> extras_scratch_;
};

}  // namespace kvc
