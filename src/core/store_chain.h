// The block stores below the tree-resident tiers (block_store.h): the chain
// primary -> host (optional) -> stores (disk, then remote; each optional),
// and the two moves between the tree and the stores.
//
//  - Offload: a full node that leaves the tree by eviction from the lowest
//    tree-resident tier (the host tier, or the primary one without it; also
//    a primary node dropped for want of host room) with priority >=
//    secondary_offload_min_priority is sealed into a record and put into
//    every store of the chain (write-through to all: a remote store shares
//    the block with other engines as soon as this one lets it go, and a
//    disk store keeps it across restarts; a store's eviction is its own and
//    is not forwarded). put() never waits on I/O; a full queue drops it,
//    counted by the store. A node with an evicted windowed slot or a partial
//    block is not stored (a record holds every group's block of a full
//    position). A reset (evict_all) puts nothing.
//  - Onboard: kvc_sequence_add looks up, after the tree's match ends, the
//    prompt's remaining full blocks (the last token always recomputed) in
//    the stores, in chain order per block run: disk first, then remote from
//    the first block the disk lacks. Each record is checked against the
//    key made from the caller's own tokens and scope (check_record); the
//    first that fails ends the run and is rejected (counted, the disk
//    forgets it). The plan stages the first chunk (so a hit is known before
//    the plan, and a partial match of the tree gives way to it); apply
//    copies the records into the sequence's fresh primary blocks (the ones
//    it would have computed) and loads the following chunks the same way;
//    the caller then publishes them as a commit would. Loaded blocks take
//    no block the plan did not count, so the all-or-nothing rule holds: a
//    store that fails, times out or answers garbage is a miss.
//
// The core does no I/O: the stores do, on their threads; this owner only
// calls their interface, under the cache's lock. Bytes move between the
// pools and the records through per-group pinned staging blocks
// (Device::allocate_host: copy_tier reaches only whole host allocations),
// one copy_tier per group and chunk; on the CPU backend, whose pools are
// host memory, records are copied to and from the pool blocks directly
// (set_direct_access(false) makes tests take the staging path there too).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/device.h"
#include "core/block_store.h"
#include "core/cache_config.h"
#include "core/group_layout.h"
#include "core/layer_groups.h"
#include "core/pool_memory.h"
#include "core/store_keys.h"

namespace kvc {

class PrefixIndex;

// The record layout of a cache's blocks: its geometry fingerprint, tokens
// per block, and every group's block bytes.
RecordLayout store_record_layout(const CacheConfig& config, const LayerGrouping& grouping);

// One store's statistics with what the chain counted for it.
struct StoreTierReport {
  const char* name = "";
  StoreStats io;              // the store's own counts
  uint64_t onboarded_blocks = 0;  // records checked and copied into primary blocks
  uint64_t onboarded_bytes = 0;
  uint64_t offered_blocks = 0;    // puts the store accepted
};

class StoreChain {
 public:
  StoreChain(const CacheConfig& config, const GroupLayout& layout, const LayerGrouping& grouping,
             PrefixIndex& index, Device& device,
             const std::vector<std::unique_ptr<PoolMemory>>& memory,
             const std::vector<std::unique_ptr<PoolMemory>>& host_memory,
             std::vector<std::unique_ptr<BlockStore>> stores);
  ~StoreChain();
  StoreChain(const StoreChain&) = delete;
  StoreChain& operator=(const StoreChain&) = delete;

  StoreKeys& keys() { return keys_; }
  const RecordLayout& layout() const { return layout_; }
  size_t size() const { return stores_.size(); }
  BlockStore& store(size_t i) { return *stores_[i]; }

  // --- Offload ---------------------------------------------------------------
  // `node` is about to leave the tree (its blocks still valid, in its tier's
  // pools): put it into the stores if it qualifies. Never throws.
  void offer(uint32_t node);
  // While muted (a reset) nothing is offered.
  void set_muted(bool muted) { muted_ = muted; }
  // Tests: false makes a CPU cache move bytes through the staging blocks as
  // a device cache does.
  void set_direct_access(bool direct) { direct_ = direct && host_pools_; }

  // --- Onboard ---------------------------------------------------------------
  // Plan: the prompt's blocks [first, first + want) follow tree node
  // `parent` (kRoot: first == 0). Looks up and checks the first chunk of
  // them; returns how many leading blocks are staged (0: none, nothing
  // more is looked up). `tokens` and `scope_bytes` must stay valid until
  // onboard() returns.
  uint64_t stage(uint32_t parent, const std::string& scope_bytes,
                 const std::vector<ExtraKey>& extras, const int32_t* tokens, uint64_t first,
                 uint64_t want);
  // Apply, after a stage() that returned > 0: copies the staged blocks into
  // blocks[g][first + i] (the sequence's fresh sets) and loads and copies
  // the following ones until a miss or `want`; returns how many leading
  // positions now hold their checked KV (enqueued on `stream`). Never throws:
  // a failed copy ends the run.
  // `extras`: stage()'s (the same keys; the caller may have moved them).
  uint64_t onboard(const std::vector<std::vector<uint32_t>>& blocks,
                   const std::vector<ExtraKey>& extras, void* stream);

  // Waits for every store's queued puts (tests, shutdown).
  void flush();
  std::vector<StoreTierReport> reports() const;

 private:
  // Fills staging records [begin, begin + count) with checked records for
  // the prompt blocks whose keys are chunk_keys_[begin, begin + count);
  // returns the leading count.
  uint64_t fill(uint64_t begin, uint64_t count);
  // Checks records [begin, begin + got) of store s; rejects the first bad
  // one; returns the leading count that passed.
  uint64_t check_run(size_t s, uint64_t begin, uint64_t got);
  bool copy_in(uint64_t staged, uint64_t position,
               const std::vector<std::vector<uint32_t>>& blocks, void* stream);
  // The payload of `node` (its tier's blocks) into `payload`.
  void copy_out(uint32_t node, bool primary, unsigned char* payload);
  void release_staging() noexcept;
  unsigned char* staged(uint64_t i) const { return staging_ + i * layout_.record_bytes(); }

  const GroupLayout& layout_groups_;
  PrefixIndex& index_;
  Device& device_;
  const std::vector<std::unique_ptr<PoolMemory>>& memory_;
  const std::vector<std::unique_ptr<PoolMemory>>& host_memory_;
  const uint32_t T_;
  const uint32_t min_priority_;
  const RecordLayout layout_;
  std::vector<uint64_t> group_offset_;  // per group: its bytes' offset in the payload
  std::vector<uint64_t> group_bytes_;   // per group: block bytes
  std::vector<std::unique_ptr<BlockStore>> stores_;
  std::vector<uint64_t> onboarded_;     // per store
  std::vector<uint64_t> offered_;       // per store
  StoreKeys keys_;
  bool muted_ = false;
  bool host_pools_ = false;  // primary pools in host memory (the CPU backend)
  bool direct_ = false;      // copy between records and pool blocks directly

  // Pinned staging: chunk_ records for loads, one for offers, and per group
  // chunk_ blocks that copy_tier reads or writes.
  uint64_t chunk_ = 0;
  unsigned char* staging_ = nullptr;
  unsigned char* offer_record_ = nullptr;
  std::vector<unsigned char*> group_staging_;
  std::vector<TierCopy> copies_;

  // The lookup in progress (stage() to onboard()).
  struct Lookup {
    const std::string* scope_bytes = nullptr;
    const std::vector<ExtraKey>* extras = nullptr;
    const int32_t* tokens = nullptr;
    uint64_t first = 0;      // prompt block of staging record 0
    uint64_t begin = 0;      // the lookup's first block
    uint64_t end = 0;        // first + want
    uint64_t staged = 0;     // checked records in staging
    bool done = false;       // a miss ended the run
  } look_;
  std::vector<StoreKey> chunk_keys_;
  std::vector<uint64_t> chunk_hashes_;
  std::vector<unsigned char*> chunk_ptrs_;
  std::vector<uint8_t> chunk_store_;  // per staged record: the store it came from
};

}  // namespace kvc
