// A cache: its settings, layer groups, memory plan, device and pools. The
// shape is fixed at creation; everything here that is const is safe to read
// from any thread without the lock.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/device.h"
#include "core/batch_tables.h"
#include "core/block_manager.h"
#include "core/cache_config.h"
#include "core/layer_groups.h"
#include "core/memory_plan.h"
#include "core/pool_memory.h"
#include "core/rank_pools.h"
#include "core/state_slots.h"
#include "core/state_snapshots.h"

namespace kvc {

// What kvc_sequence_describe reports.
struct SequenceSummary {
  uint32_t prompt_priority = 0;
  uint32_t decode_priority = 0;
  uint64_t num_tokens = 0;
  uint64_t prompt_tokens = 0;
  uint64_t cached_tokens = 0;
  uint64_t committed_tokens = 0;
  uint64_t num_blocks = 0;
};

// A block export (kvc_cache_export_sequence): the hold and what the
// caller reads.
struct BlockExport {
  uint64_t hold = 0;  // Sequences' hold key
  uint64_t seq_id = 0;
  uint64_t num_blocks = 0;
  uint32_t num_groups = 0;
  std::vector<int32_t> block_ids;  // [g * num_blocks + b]
  std::string keys;                // the key blob (transfer_keys.h)
};

// An open import (kvc_cache_import_begin): sequence seq_id holds the
// blocks; positions [first_block, num_blocks) are the caller's to write.
struct BlockImport {
  uint64_t seq_id = 0;
  uint64_t num_blocks = 0;
  uint64_t first_block = 0;
  uint32_t num_groups = 0;
  std::vector<int32_t> block_ids;  // [g * (num_blocks - first_block) + i]
};

// A group's counters with its pool (kvc_group_stats_t).
struct GroupSummary {
  GroupStats counts;
  uint32_t pool = 0;
  uint64_t pool_free_blocks = 0;
};

class Cache {
 public:
  // Validates cfg, opens its device (one per rank), sizes and allocates the
  // pools (every rank's: rank_pools.h).
  explicit Cache(const CacheConfig& cfg);
  // The same on a given device (tests: a device double that fails copies);
  // one rank only.
  Cache(const CacheConfig& cfg, std::unique_ptr<Device> device);
  // The same on given devices, one per rank (cfg.num_ranks() of them).
  Cache(const CacheConfig& cfg, std::vector<std::unique_ptr<Device>> devices);
  ~Cache();

  const CacheConfig& config() const { return config_; }
  const LayerGrouping& grouping() const { return grouping_; }
  // The memory plan now (a copy under the lock: kvc_cache_resize changes it).
  MemoryPlan plan() const;
  const HostPlan& host_plan() const { return host_plan_; }
  // With several ranks: the rank whose device has the least free memory
  // (the plan's per-rank budget comes from it).
  const DeviceMemoryInfo& device_memory_at_creation() const { return device_memory_; }
  uint32_t num_ranks() const { return ranks_->num_ranks(); }
  // Rank `rank`'s device, pools, host pools (every rank's counts are equal).
  Device& device(uint32_t rank = 0) const { return ranks_->device(rank); }
  const PoolMemory& pool(uint32_t i, uint32_t rank = 0) const { return *ranks_->pools(rank).at(i); }
  size_t num_pools() const { return ranks_->pools(0).size(); }
  // The secondary tier's pool mirroring primary pool i (none when
  // host_plan().blocks_per_group == 0).
  const PoolMemory& host_pool(uint32_t i, uint32_t rank = 0) const {
    return *ranks_->host_pools(rank).at(i);
  }
  // Every rank's bytes and the copies over them (kvc_copy_blocks).
  const RankPools& ranks() const { return *ranks_; }
  // Throws KVC_ERR_INVALID_ARGUMENT for a rank out of range, naming it.
  void check_rank(uint32_t rank) const;

  // Where layer `layer` lives on rank `rank` and its shape there
  // (kvc_layer_view_t; what the kernels take): the rank's share of the
  // heads. Throws KVC_ERR_INVALID_ARGUMENT for a layer or rank out of range.
  LayerSlabs layer_view(uint32_t layer, uint32_t rank = 0) const;

  // Pool `pool` of rank `rank` for another process (pool_share.cpp,
  // kvc_cache_describe_pool_share): what backs it now, and a new file
  // descriptor for its chunk `chunk` (owned by the caller; *where gets its
  // offset and size). Locked (a
  // resize cannot run meanwhile). Throw what Device::shared_memory and
  // Device::export_chunk throw; KVC_ERR_INVALID_ARGUMENT for a rank or pool
  // out of range.
  SharedMemory shared_pool(uint32_t rank, uint32_t pool) const;
  int export_pool_chunk(uint32_t rank, uint32_t pool, uint64_t chunk, SharedChunk* where) const;

  // --- The locked facade --------------------------------------------------
  // Every call below takes this cache's lock itself, so any thread may call
  // any of them (the C API's threading promise is kept here, in one place).
  // Errors throw kvc::Error; running out of blocks returns false with the
  // reason in *refusal (nothing changed), as BlockManager::try_add does.
  bool add(uint64_t id, const int32_t* tokens, uint64_t num_tokens, const SequenceOptions& options,
           void* stream, uint64_t* cached_tokens, Refusal* refusal);
  bool extend(uint64_t id, const int32_t* tokens, uint64_t num_tokens, void* stream,
              Refusal* refusal);
  bool extend_batch(const uint64_t* ids, const int32_t* tokens, size_t count, void* stream,
                    Refusal* refusal);
  void commit(uint64_t id, uint64_t num_computed);
  void rewind(uint64_t id, uint64_t num_tokens);
  void fork(uint64_t parent, uint64_t child);
  void remove(uint64_t id);
  void pin(uint64_t id);
  void unpin(uint64_t id);
  // Block transfer (cache_transfer.cpp, kvcache/transfer.h). export_sequence
  // holds the blocks until release_export(hold). import_begin verifies the
  // key blob against tokens and options, then adds sequence id with them
  // (false: out of blocks, *refusal says why, nothing changed);
  // import_complete commits the imported blocks (publishing them);
  // import_abort removes the sequence if it is still there.
  BlockExport export_sequence(uint64_t id, uint64_t num_tokens);
  void release_export(uint64_t hold);
  bool import_begin(uint64_t id, const int32_t* tokens, uint64_t num_tokens,
                    const SequenceOptions& options, const void* keys, size_t keys_size,
                    BlockImport* out, Refusal* refusal);
  void import_complete(const BlockImport& import);
  void import_abort(const BlockImport& import);
  SequenceSummary describe_sequence(uint64_t id) const;
  // The block ids of one group into ids[capacity]; .needed is the count
  // (also when they do not fit).
  TableSize sequence_block_ids(uint64_t id, uint32_t group, int32_t* ids, size_t capacity) const;
  uint64_t blocks_needed(uint64_t id, uint64_t num_tokens) const;
  uint64_t probe(const int32_t* tokens, uint64_t num_tokens, const SequenceOptions& options) const;
  void advance_clock(uint64_t milliseconds);
  // kvc_cache_make_room (BlockManager::make_room).
  uint64_t make_room(uint64_t sets, void* stream);
  void reset_reuse();
  // kvc_cache_resize: the primary pools to the plan_resize() of `bytes`, in
  // place (memory_plan.h, cache.h's C documentation). Throws
  // KVC_ERR_OUT_OF_BLOCKS when a block in use lies past a new end,
  // KVC_ERR_OUT_OF_MEMORY when the device cannot back the growth,
  // KVC_ERR_UNSUPPORTED on a device that reserves no address space; nothing
  // changed then.
  void resize(uint64_t bytes);
  // kvc_cache_plan_resize: mem_for_paged() of `in` (free_bytes 0: the
  // device's free memory now plus the primary bytes this cache holds, what
  // the seed's shutdown of the old cache would free), and the plan of
  // kvc_cache_resize for it, held to the ceiling. *formula_bytes and
  // *free_bytes get the formula's result and the free memory it used.
  MemoryPlan plan_for(ResizeInputs in, uint64_t* formula_bytes, uint64_t* free_bytes) const;
  void check_invariants() const;
  CacheStats stats() const;
  GroupSummary group_stats(uint32_t group) const;
  // The block stores' statistics, in chain order (empty without stores),
  // and the wait for their queued writes (tiers.h).
  std::vector<StoreTierReport> tier_reports() const;
  void flush_tiers();
  // Events (events.h): KVC_ERR_UNSUPPORTED with events off.
  void drain_events(kvc_event_t* out, size_t capacity, int32_t* tokens, size_t token_capacity,
                    kvc_event_drain_t& result);
  // The snapshot into `out` (the facade's copy, taken under the lock).
  void snapshot(std::vector<kvc_snapshot_entry_t>& out, uint64_t* event_id) const;
  // The batch tables (batch_tables.h).
  TableSize block_table(uint32_t group, const uint64_t* ids, size_t count, int32_t* table,
                        size_t max_blocks, int32_t pad) const;
  TableSize block_table_csr(uint32_t group, const uint64_t* ids, size_t count, int32_t* indptr,
                            int32_t* indices, size_t indices_capacity,
                            int32_t* last_page_len) const;
  void sequence_lengths(const uint64_t* ids, size_t count, int32_t* lengths) const;
  TableSize slot_mapping(uint32_t group, const uint64_t* ids, size_t count, int64_t* slots,
                         size_t capacity, int32_t* new_tokens);

  // State resources (state.h): null without any. The slots' layouts and
  // bases are fixed at creation; the counts and owners need the lock.
  const StateSlots* state() const { return state_.get(); }
  struct ResourceSummary {  // the layout itself: state()->layout(index)
    uint32_t num_slots = 0;
    uint32_t used = 0;
    void* base = nullptr;
  };
  // Throws KVC_ERR_INVALID_ARGUMENT for an index out of range.
  ResourceSummary describe_resource(uint32_t index) const;
  // kvc_batch_state_slots (state.h).
  void state_slots(const uint64_t* ids, size_t count, uint32_t resource, int32_t* slots) const;
  // kvc_sequence_publish_state (state.h): sequence id's state slots become
  // the snapshot of the node of its block ending at `position` (copied on
  // `stream`). Errors name the argument; nothing changed on failure.
  void publish_state(uint64_t id, uint64_t position, void* stream);
  // kvc_cache_snapshot_stats (state.h): the pool and its counters.
  struct SnapshotSummary {
    uint32_t num_slots = 0;
    uint32_t used = 0;
    uint64_t bytes_per_snapshot = 0;
    uint64_t bytes = 0;
    uint32_t host_num_slots = 0;
    uint32_t host_used = 0;
    uint64_t host_bytes = 0;
    SnapshotCounters counts;
  };
  SnapshotSummary snapshot_summary() const;

  // The manager itself, unsynchronized: for the core's own tests and tools
  // that own the cache on one thread. The C API never uses it
  // (tests/structure checks).
  BlockManager& manager() { return *manager_; }
  const BlockManager& manager() const { return *manager_; }

 private:
  CacheConfig config_;
  LayerGrouping grouping_;
  DeviceMemoryInfo device_memory_;
  MemoryPlan plan_;
  bool growable_ = false;                     // the pools reserve their ceiling
  HostPlan host_plan_;
  std::unique_ptr<RankPools> ranks_;          // every rank's device and pools
  std::unique_ptr<BlockManager> manager_;
  std::unique_ptr<StateSlots> state_;
  std::unique_ptr<StateSnapshots> snapshots_;  // with state_
  // A snapshot node of sequence id's block ending at `position`: the node,
  // or kNoNode with *why saying what is missing.
  uint32_t snapshot_node(uint64_t id, uint64_t position, std::string* why) const;
  void debug_check_state() const;
  // With state resources: refuses (Error) a length above an unpaged
  // resource's max_tokens, naming the sequence.
  void check_unpaged_length(uint64_t id, uint64_t length) const;
  mutable std::mutex mutex_;  // serializes the facade's calls
};

}  // namespace kvc
