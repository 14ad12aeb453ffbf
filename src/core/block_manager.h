// The cache manager: the coordinator of the core's owners, each with its
// own state and files. Not synchronized: kvc::Cache's mutex serializes the
// calls.
//   GroupLayout (group_layout.h)  groups -> pools, windows, anchors
//   Residency   (residency.h)     primary pools, page arena, reference
//                                 counts, allocation, page moves, copies
//   PrefixIndex (prefix_index.h)  radix tree, scopes, keys (key_builder.h),
//                                 prompt lookup
//   Eviction    (eviction.h)      prioritized LRU queues, retention expiry,
//                                 holds and releases, every eviction path
//   Tier        (tier.h)          a tier below the primary one: HostTier
//                                 (host_tier.h), or NoTier
//   Sequences   (sequences.h)     sequences and pins; add, extend, commit,
//                                 rewind, fork, remove planned in a
//                                 Reservation (reservation.h), then applied
//   EventLog    (event_log.h)     KV events and portable block hashes, when
//                                 the config turns events on
//   StoreChain  (store_chain.h)   block stores below the tree (disk, then
//                                 remote), when the config names any
// It builds them, forwards the calls, runs the invariant checker over all
// of them after every mutation in debug builds (block_manager_check.cpp)
// and gathers the statistics.
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
// are evicted leaves first, one node at a time (Eviction's anchor queue).
// A windowed group releases a sequence's blocks once no token from
// `committed` on can attend to them, so a sequence holds at most
// ceil(W/T) + 1 of them; a node's windowed slot is evicted on its own,
// interior nodes included (one queue per windowed group), and empties. In a
// model whose groups are all windowed there is no anchor: a node lives
// while it has a block, a child, or a sequence naming it
// (TreeNode::holders). Groups with equal block bytes draw from one pool, so
// blocks a windowed group releases serve the full groups and the other way
// round.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/device.h"
#include "base/error.h"
#include "core/block_pool.h"
#include "core/cache_config.h"
#include "core/cache_stats.h"
#include "core/eviction.h"
#include "core/event_log.h"
#include "core/eviction_policy.h"
#include "core/expiry_heap.h"
#include "core/group_layout.h"
#include "core/host_tier.h"
#include "core/layer_groups.h"
#include "core/page_arena.h"
#include "core/pool_memory.h"
#include "core/prefix_index.h"
#include "core/radix_tree.h"
#include "core/residency.h"
#include "core/retention_clock.h"
#include "core/sequence.h"
#include "core/sequences.h"
#include "core/store_chain.h"
#include "core/tier.h"

namespace kvc {

class BlockManager {
 public:
  // `ranks`: every rank's pools and host pools (rank_pools.h; a rank's
  // host pools mirror its pools, empty: no host tier; the counts are rank
  // 0's, every rank's equal, and every copy is made on every rank). The
  // block stores use rank 0 (CacheConfig refuses stores with several
  // ranks). arena_pages != 0: the pools carve pages of one arena
  // (MemoryPlan); `stores`: the block stores below the tree, in chain
  // order, opened for store_record_layout(config, grouping) (empty: none).
  BlockManager(const CacheConfig& config, const LayerGrouping& grouping,
               const RankPools& ranks, uint64_t arena_pages = 0, std::vector<std::unique_ptr<BlockStore>> stores = {});

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
  // try_add for an import (kvcache/transfer.h): an import is not a
  // lookup, so the reuse counters (reused and missed blocks, per group too)
  // stay as they were; everything else as try_add.
  bool try_add_uncounted(uint64_t id, const int32_t* tokens, uint64_t num_tokens,
                         const SequenceOptions& options, void* stream, uint64_t* cached_tokens) {
    const CacheCounters before = counters_;  // copied before any change
    if (!try_add(id, tokens, num_tokens, options, stream, cached_tokens)) return false;
    counters_.reused_blocks = before.reused_blocks;
    counters_.missed_blocks = before.missed_blocks;
    for (size_t g = 0; g < before.groups.size(); ++g) {
      counters_.groups[g].reused_blocks = before.groups[g].reused_blocks;
      counters_.groups[g].missed_blocks = before.groups[g].missed_blocks;
    }
    return true;
  }
  // Why the last try_ call returned false (its Reservation's refusal).
  const Refusal& refusal() const { return seqs_.refusal(); }
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
  // Export holds (Sequences::hold_published; kvc_cache_export_sequence).
  void hold_published(uint64_t id, uint64_t num_tokens, ExportHold& out) {
    seqs_.hold_published(id, num_tokens, out);
    debug_check();
  }
  void release_hold(uint64_t key) {
    seqs_.release_hold(key);
    debug_check();
  }

  // What add() would reuse, changing nothing (not even ages).
  uint64_t probe(const int32_t* tokens, uint64_t num_tokens, const SequenceOptions& options) const {
    return seqs_.probe(tokens, num_tokens, options);
  }
  // Block sets (one block per group) that `num_tokens` more tokens need.
  uint64_t blocks_needed(uint64_t id, uint64_t num_tokens) const {
    return seqs_.blocks_needed(id, num_tokens);
  }
  // Evicts cached blocks in the usual victim order (the host tier takes
  // those at or above its offload priority, as in any call that needs
  // room) until `sets` block sets are free, or nothing cached is left that
  // could go: the work an add or extend would do to find room, done ahead
  // (room_ahead.cpp). Returns the block sets free then.
  uint64_t make_room(uint64_t sets, void* stream);
  // Drops every cached block; refused while any block is in use.
  void reset_reuse();
  // Moves the manual retention clock forward; priorities whose duration ran
  // out revert to the default. Refused on the monotonic clock.
  void advance_clock(uint64_t ms);
  const RetentionClock& retention_clock() const { return eviction_.clock(); }
  const ExpiryHeap& expiries() const { return eviction_.expiries(); }

  // --- Events (events.h); the log is nullptr with events off -------------
  EventLog* events() { return events_.get(); }
  const EventLog* events() const { return events_.get(); }
  void drain_events(kvc_event_t* out, size_t capacity, int32_t* tokens, size_t token_capacity,
                    kvc_event_drain_t& result);
  void snapshot(std::vector<kvc_snapshot_entry_t>& out, uint64_t* event_id) const;

  // --- Resizing the primary pools (kvc_cache_resize) ----------------------
  // Waits for the block stores' write-through jobs and takes their blocks
  // back (in use until written): a resize then sees only what sequences
  // and pins hold.
  void settle_stores() {
    if (stores_) stores_->settle();
  }
  // The pools' new ends (pool_blocks, or num_pages with an arena). "" when
  // the blocks in use allow them, else why not (nothing changed).
  std::string resize_refusal(const std::vector<uint64_t>& pool_blocks, uint64_t num_pages) const {
    return residency_.cut_in_use(pool_blocks, num_pages);
  }
  // A grow's bookkeeping, the memory backed already; cannot fail.
  void grow_pools(const std::vector<uint64_t>& pool_blocks, uint64_t num_pages);
  // A shrink (pool_shrink.cpp); resize_refusal() must be "". Evicts
  // cached blocks in the usual victim order (counted, REMOVED events,
  // offered to the block stores, moved to the host tier where they
  // qualify) until the rest fit below the new ends, moves the cached
  // blocks that lie past the ends into free blocks below them, then drops
  // the ids past the ends. Cannot fail: a move that cannot be made (a
  // failed copy, no free block left below the end of a page arena's
  // pools) evicts the block instead.
  void shrink_pools(const std::vector<uint64_t>& pool_blocks, uint64_t num_pages);

  CacheStats stats() const;
  GroupStats group_stats(uint32_t group) const;
  // Throws Error(KVC_ERR_INTERNAL) describing the first broken invariant.
  void check_invariants() const;

  // The sequence, or throws Error(KVC_ERR_NOT_FOUND).
  const Sequence& sequence(uint64_t id) const { return seqs_.sequence(id); }
  Sequence& sequence(uint64_t id) { return seqs_.sequence(id); }
  const Sequence* find_sequence(uint64_t id) const { return seqs_.find(id); }
  // try_add's checks before any change (Sequences::check_add).
  void check_add(uint64_t id, uint64_t n, const SequenceOptions& options) const {
    seqs_.check_add(id, n, options);
  }
  // Batch calls: a fresh epoch, then each ids[i] looked up once per epoch
  // (NOT_FOUND naming the index, INVALID_ARGUMENT for a repeated id).
  uint64_t next_batch_epoch() { return seqs_.next_batch_epoch(); }
  Sequence& sequence_for_batch(const uint64_t* ids, size_t i, uint64_t epoch) {
    return seqs_.sequence_for_batch(ids, i, epoch);
  }
  // sequence_for_batch's checks on s, the lookup of ids[i] (nullptr: none).
  Sequence& claim_for_batch(Sequence* s, const uint64_t* ids, size_t i, uint64_t epoch) {
    return seqs_.claim_for_batch(s, ids, i, epoch);
  }
  Sequence* const* claim_batch(const uint64_t* ids, size_t count) {
    return seqs_.claim_batch(ids, count);
  }

  uint32_t num_groups() const { return layout_.num_groups(); }
  bool windowed(uint32_t g) const { return layout_.is_windowed(g); }
  uint32_t window(uint32_t g) const { return layout_.window[g]; }
  uint64_t first_needed(uint32_t g, uint64_t frontier) const {
    return layout_.first_needed(g, frontier);
  }
  uint32_t tokens_per_block() const { return layout_.T; }
  const RadixTree& tree() const { return index_.tree(); }
  const EvictionPolicy& policy() const { return eviction_.policy(); }
  const BlockPool& pool(uint32_t p) const { return residency_.pool(p); }
  uint32_t pool_of_group(uint32_t g) const { return layout_.group_pool[g]; }
  size_t num_pools() const { return residency_.num_pools(); }
  const PageArena* arena() const { return residency_.arena(); }
  // The secondary tier (tier.h; NoTier when the cache has none).
  const Tier& host_tier() const { return *tier_; }
  bool in_host_tier(uint32_t node) const { return tree().node(node).tier == kHostTier; }
  // A cache with state resources: its state snapshots (PrefixIndex::
  // set_snapshot_gate); set once, before the first sequence.
  void set_snapshot_gate(SnapshotGate* gate) { index_.set_snapshot_gate(gate); }
  // The block stores (nullptr: none).
  StoreChain* stores() { return stores_.get(); }
  const StoreChain* stores() const { return stores_.get(); }

 private:
  void debug_check() const;
  // shrink_pools' steps (pool_shrink.cpp).
  void make_room_below(const std::vector<uint64_t>& pool_blocks, uint64_t num_pages);
  void move_cached_below(const std::vector<uint64_t>& pool_blocks, uint64_t num_pages);
  Reservation room_;  // make_room's plan (its vectors keep their capacity)

  GroupLayout layout_;
  CacheCounters counters_;
  Residency residency_;
  PrefixIndex index_;
  Eviction eviction_;
  std::unique_ptr<Tier> tier_;  // HostTier, or NoTier
  Sequences seqs_;
  std::unique_ptr<EventLog> events_;  // with events on
  std::unique_ptr<StoreChain> stores_;  // with stores
};

}  // namespace kvc
