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
#include "core/cache_config.h"
#include "base/error.h"
#include "core/eviction_policy.h"
#include "core/expiry_heap.h"
#include "core/host_tier.h"
#include "core/layer_groups.h"
#include "core/page_arena.h"
#include "core/pool_memory.h"
#include "core/radix_tree.h"
#include "core/retention.h"
#include "core/retention_clock.h"
#include "core/scope_table.h"
#include "core/sequence.h"
#include "core/sequence_table.h"

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

// Per layer group (kvc_group_stats_t).
struct GroupStats {
  uint64_t in_use_blocks = 0;   // blocks of this group held by sequences or pins
  uint64_t cached_blocks = 0;   // blocks of this group cached in the tree
  uint64_t reused_blocks = 0;   // prompt block positions reused from the tree
  uint64_t missed_blocks = 0;   // prompt block positions computed
  uint64_t evicted_blocks = 0;  // blocks of this group evicted
  uint64_t released_blocks = 0; // blocks a windowed group let go (out of window)
};

struct CacheStats {
  uint64_t num_blocks = 0;  // primary blocks over all pools
  uint64_t free_blocks = 0;
  uint64_t cached_blocks = 0;
  uint64_t in_use_blocks = 0;
  uint64_t reused_blocks = 0;  // prompt block positions found in the tree
  uint64_t missed_blocks = 0;  // prompt block positions computed
  uint64_t evicted_blocks = 0;  // block positions that left the tree to make room
  uint64_t num_sequences = 0;
  uint64_t num_pinned = 0;     // pin records
  uint64_t tree_nodes = 0;
  // Secondary (host) tier.
  HostTierCounters host;
  uint64_t host_blocks = 0;    // host blocks over all pools
  uint64_t host_free_blocks = 0;
  uint64_t host_cached_blocks = 0;
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
  const Refusal& refusal() const { return refusal_; }
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
  const RetentionClock& retention_clock() const { return time_; }
  const ExpiryHeap& expiries() const { return expiry_; }

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

  uint32_t num_groups() const { return uint32_t(group_pool_.size()); }
  bool windowed(uint32_t g) const { return window_slot_[g] >= 0; }
  uint32_t window(uint32_t g) const { return window_[g]; }
  // The first block position a windowed group needs when the first token
  // still to be computed is at `frontier` (it attends to the W tokens
  // ending at itself); 0 in a full group.
  uint64_t first_needed(uint32_t g, uint64_t frontier) const {
    const uint64_t w = window_[g];
    return w == 0 || frontier + 1 <= w ? 0 : (frontier + 1 - w) / T_;
  }
  uint32_t tokens_per_block() const { return T_; }
  const RadixTree& tree() const { return tree_; }
  const EvictionPolicy& policy() const { return policy_; }
  const BlockPool& pool(uint32_t p) const { return pools_[p]; }
  uint32_t pool_of_group(uint32_t g) const { return group_pool_[g]; }
  size_t num_pools() const { return pools_.size(); }
  const PageArena* arena() const { return arena_.get(); }
  // The secondary tier (host_tier.h): its pools, queue and counters.
  const HostTier& host_tier() const { return host_; }
  bool in_host_tier(uint32_t node) const { return tree_.node(node).tier == kHostTier; }

 private:
  struct Match {
    uint32_t partial = kNoNode;  // node matched token by token
    uint32_t partial_tokens = 0;
    bool in_place = false;       // use the partial node's blocks (copy off)
  };
  struct Pin {
    std::vector<uint32_t> blocks;  // num_groups per entry
    std::vector<BlockRetention> retention; // per entry
  };

  // Lookup shared by add and probe; fills match_full_ (mutable scratch).
  Match match_prefix(const int32_t* tokens, uint64_t n, uint32_t scope,
                     const std::vector<ExtraKey>& extras) const;
  // Shortens match_full_ to the longest prefix every windowed group can
  // reuse (the blocks covering the window before the reuse point present).
  void trim_to_windows() const;
  // Anchor reference count of a node (0: cached); in a model without full
  // groups, whether anything holds one of its slots or names it.
  uint32_t node_ref(uint32_t node) const;
  bool node_has_block(uint32_t node) const;
  // Blocks a pool has free, or cached and so evictable.
  uint64_t free_sets() const;
  // needed[p] / taken[p]: blocks of pool p to allocate / cached blocks of
  // pool p this call takes into use (no longer evictable). False when the
  // pools cannot give them, with refusal_ saying why for `what` (the call,
  // with a sequence id unless kNoId; built only then).
  static constexpr uint64_t kNoId = UINT64_MAX;
  bool have_blocks(const uint64_t* needed, const uint64_t* taken, const char* what,
                   uint64_t id = kNoId) const;
  bool have_sets(uint64_t needed_sets, const char* what, uint64_t id = kNoId) const;
  bool refuse(std::string message) const;
  static std::string call_name(const char* what, uint64_t id);
  bool needs_copy_on_write(const Sequence& s) const;
  // The first group still holding position b of s (UINT32_MAX: none).
  uint32_t lead_group(const Sequence& s, uint64_t b) const;
  // Whether s holds every block it has at position b alone, none in a node.
  bool holds_alone(const Sequence& s, uint64_t b) const;
  // Whether sequence s holds node s.nodes[b] apart from its own blocks.
  bool holds_anchor(const Sequence& s, uint64_t b) const;
  // The expiry heap key of a node's anchor (k = 0) or windowed slot k + 1.
  uint32_t expiry_key(uint32_t node, uint32_t k) const { return node * expiry_stride_ + k; }

  void hold_slot(uint32_t node, uint32_t g);
  void hold_node(uint32_t node);    // every slot present
  void hold_anchor(uint32_t node);  // the anchor groups' slots (or a holder)
  void release_anchor(uint32_t node, BlockRetention r);
  // One owner fewer for a block of group g; true when it became cached.
  bool release_block(uint32_t g, uint32_t blk);
  void release_set(const uint32_t* blocks, size_t stride, BlockRetention r);
  void release_node(uint32_t node, BlockRetention r);
  void release_position(Sequence& s, uint64_t b);
  // Releases a windowed group's blocks that left the window.
  void release_out_of_window(Sequence& s);
  void on_cached(uint32_t node, BlockRetention r);
  void on_window_cached(uint32_t node, uint32_t g, BlockRetention r);
  // Reverts the priority of every cached node whose duration has run out.
  void expire_due();
  void mark_published(uint32_t node, const Sequence& s, uint64_t b);
  void evict_node(uint32_t node);
  void evict_window_slot(uint32_t node, uint32_t g);
  // Without anchor groups: erases a node left with nothing, then its
  // ancestors likewise.
  void erase_if_unused(uint32_t node);
  void link_new_node(uint32_t node, uint32_t scope);
  // Evicts the lowest (priority, age) victim that frees a block of pool p.
  void evict_one(uint32_t pool);
  // Paged pools: pages a call must move to pools short of blocks, decided
  // by have_blocks() (page_deficit_, page_budget_), carried out by
  // move_pages() before the call allocates.
  bool plan_pages(const uint64_t* needed, const uint64_t* taken, const char* what,
                  uint64_t id) const;
  void move_pages();
  void empty_page(uint32_t pool, uint32_t page);
  void evict_subtree(uint32_t node);
  uint32_t alloc_block(uint32_t g);
  void alloc_set(uint32_t* out);
  // append_new_set `count` times (s has the capacity). Where every
  // eviction takes whole nodes (no windowed group, page arena or host
  // tier), the victims are taken out of the tree ahead, a chunk at a time
  // (evict_ahead), and each one's blocks join the free lists (with one
  // group: go straight to `s`) at the moment alloc_set would have evicted
  // it: the same victims in the same order, the same blocks for `s`.
  void append_new_sets(Sequence& s, uint64_t count);
  // evict_node of the next `count` victims (<= kEvictChunk), but their
  // blocks stay cached and out of the free lists: evicted_ lists them, one
  // set per victim.
  void evict_ahead(uint64_t count);
  void copy_set(const uint32_t* src, const uint32_t* dst, uint32_t rows, void* stream);
  void append_new_set(Sequence& s);
  void copy_on_write(Sequence& s, void* stream);
  bool publish_full(Sequence& s, uint64_t b, const std::string& extra);
  void publish_tail(Sequence& s);
  static void grow(std::vector<int32_t>& v, uint64_t n);
  static void reserve_blocks(Sequence& s, uint64_t n);
  void debug_check() const;
  void check_windows() const;

  // --- Secondary (host) tier hooks, defined in host_tier.cpp -------------
  // A primary node with no primary child (all its children offloaded).
  bool primary_leaf(uint32_t node) const {
    return tree_.node(node).num_children == host_.host_children[node];
  }
  // Called by every call that takes new primary blocks, after its checks
  // and host allocations (the last step that can fail): copies back the
  // host-tier nodes among `held` and `partial` (the nodes the call will
  // hold) and evicts, offloading what qualifies, until `sets` block sets
  // are free, so that alloc_set evicts nothing. A failed copy throws
  // Error(KVC_ERR_DEVICE): the nodes whose copy failed stay where they were,
  // the copies' destinations are freed. Without a host tier: nothing.
  // window_begin[g]: the first position of `held` whose windowed slot of
  // group g the call takes (nullptr: none held).
  void prepare_sets(uint64_t sets, const std::vector<uint32_t>& held, uint32_t partial,
                    const int64_t* window_begin, void* stream);
  // Host-tier nodes among the matched ones (each needs a fresh block set).
  uint64_t count_in_host(const std::vector<uint32_t>& nodes, uint32_t partial) const;
  // commit found `node`, a host-tier node, under the key of the sequence's
  // block b: the node takes the sequence's (equal) blocks and comes back to
  // the primary tier without a copy. False when the sequence's block is
  // shared (as for a new node: publish waits).
  bool adopt_host_node(Sequence& s, uint64_t b, uint32_t node);
  // Evicts a host-tier node (and its host subtree) from the tree.
  void evict_host_node(uint32_t node);
  // Drops the offloaded children (host subtrees) of a primary node leaving the tree.
  void drop_host_children(uint32_t node);
  void check_host_tier() const;
  // prepare_sets' parts.
  void plan_victims(uint64_t sets, const std::vector<uint32_t>& held, uint32_t partial,
                    const int64_t* window_begin);
  void offload_node(uint32_t node, const uint32_t* host_blocks);
  void onboard_node(uint32_t node, const uint32_t* blocks);
  void release_host_blocks(const uint32_t* blocks);
  void release_primary_blocks(const uint32_t* blocks);
  uint64_t host_free_sets() const;
  uint64_t set_bytes() const;

  const CacheConfig& cfg_;
  const LayerGrouping& grouping_;
  const std::vector<std::unique_ptr<PoolMemory>>& memory_;
  const std::vector<std::unique_ptr<PoolMemory>>& host_memory_;
  Device& device_;
  uint32_t T_;
  std::vector<uint32_t> group_pool_;   // pool of each group
  std::vector<uint32_t> pool_groups_;  // groups drawing from each pool
  std::vector<uint32_t> window_;       // per group, 0: full attention
  std::vector<int32_t> window_slot_;   // per group: index in window_policies_, -1 if full
  std::vector<uint32_t> windowed_;     // the windowed groups
  std::vector<uint32_t> anchors_;      // the full groups
  std::vector<uint8_t> pool_has_anchor_;
  std::vector<std::vector<uint32_t>> pool_windowed_;  // windowed groups per pool
  uint32_t ref_group_ = 0;             // first full group (0 if none)
  uint32_t expiry_stride_ = 1;         // 1 + windowed groups
  std::unique_ptr<PageArena> arena_;  // pools of different block bytes
  std::vector<BlockPool> pools_;
  mutable std::vector<uint64_t> page_deficit_;  // per pool, pages to receive
  mutable std::vector<uint64_t> page_budget_;   // per pool, pages it can give
  mutable bool pages_pending_ = false;
  RadixTree tree_;
  EvictionPolicy policy_;              // cached anchor leaves
  std::vector<EvictionPolicy> window_policies_;  // cached windowed slots, per windowed group
  std::vector<GroupStats> group_counters_;
  HostTier host_;
  RetentionClock time_;
  ExpiryHeap expiry_;
  ScopeTable scopes_;
  SequenceTable seqs_;
  std::unordered_map<uint64_t, Pin> pins_;
  uint64_t clock_ = 0;  // release moments
  uint64_t batch_epoch_ = 0;
  CacheStats counters_;
  // Scratch, reused so hot paths do not allocate.
  mutable std::vector<uint32_t> match_full_;
  mutable Refusal refusal_;  // of the last try_ call that returned false
  const std::vector<uint32_t> no_nodes_;  // no held nodes (extend)
  mutable std::string extra_scratch_;
  std::vector<uint32_t> set_scratch_;
  std::vector<uint32_t> set_scratch2_;
  std::vector<uint32_t> set_scratch3_;
  mutable std::vector<int64_t> window_scratch_;
  mutable std::vector<uint64_t> pool_scratch_;
  mutable std::vector<uint64_t> pool_scratch2_;
  std::vector<Sequence*> batch_scratch_;
  std::vector<uint8_t> batch_cow_;
  std::vector<std::string> extras_scratch_;
  static constexpr uint64_t kEvictChunk = 256;
  std::vector<uint32_t> evicted_;  // kEvictChunk block sets
};

}  // namespace kvc
