// The one place where the simulator calls kvcache's sequence, batch and
// statistics API: the scheduler sees only this small interface, so the rest
// of the simulator does not change when that API does.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sim_config.h"
#include "step_buffers.h"

struct kvc_cache;

namespace sim {

// kvcache's counters, as the report shows them.
struct CacheCounters {
  uint64_t capacity = 0;   // primary blocks
  uint64_t free = 0;
  uint64_t cached = 0;     // reusable, evictable
  uint64_t in_use = 0;
  uint64_t reused = 0;     // blocks found in the cache by adds
  uint64_t evicted = 0;
  bool has_tiers = false;  // whether the cache has a host tier (the two below)
  uint64_t offloaded = 0;  // primary -> host tier
  uint64_t onboarded = 0;  // host tier -> primary
  bool has_disk = false;   // whether the cache has a disk tier (the four below)
  uint64_t disk_offered = 0;    // blocks queued for the disk (at commit or eviction)
  uint64_t disk_onboarded = 0;  // disk -> primary
  uint64_t disk_dropped = 0;    // writes dropped (queue full, disk full)
  uint64_t disk_rejected = 0;   // records refused by the check
  bool has_remote = false;        // whether the cache has a remote tier (the five below)
  uint64_t remote_offered = 0;    // blocks queued for Redis (at commit or eviction)
  uint64_t remote_onboarded = 0;  // Redis -> primary
  uint64_t remote_dropped = 0;    // writes dropped (queue full, server down)
  uint64_t remote_rejected = 0;   // records refused by the check
  uint64_t remote_errors = 0;     // failed connects, round trips, timeouts
  bool has_state = false;         // a hybrid model (the seven below)
  uint32_t snapshot_slots = 0;    // the snapshot pool
  uint64_t snapshot_bytes = 0;    // bytes one publish or restore copies
  uint64_t snapshots_published = 0;
  uint64_t snapshot_hits = 0;     // adds that restored a snapshot
  uint64_t snapshot_hit_tokens = 0;
  uint64_t snapshots_evicted = 0; // by a publish into a full pool
  uint64_t snapshots_dropped = 0; // with their blocks
};

struct SequenceOptions {
  const std::string *salt = nullptr;  // nullptr: no salt (absent != empty)
  uint32_t prompt_priority = 0;       // of prompt blocks; 0: the library default
  // When both are set, prompt tokens [0, system_length) are retained at
  // system_priority (a retention range, for ever); blocks take the priority
  // of their first token.
  uint32_t system_length = 0;
  uint32_t system_priority = 0;
};

class CacheAdapter {
 public:
  // Throws std::runtime_error with kvcache's message on any unexpected error.
  CacheAdapter(const SimConfig &config, uint64_t unlimited_tokens);
  ~CacheAdapter();
  CacheAdapter(const CacheAdapter &) = delete;
  CacheAdapter &operator=(const CacheAdapter &) = delete;

  kvc_cache *handle() { return cache_; }
  uint32_t num_groups() const { return num_groups_; }
  // KV bytes of one token in every layer (all layer groups together).
  uint64_t bytes_per_token() const { return bytes_per_token_; }
  uint64_t primary_bytes() const { return primary_bytes_; }

  // Adds sequence `id` with its prompt; returns false when the cache is out
  // of blocks (nothing changed), else sets `cached` to the reused tokens.
  bool add(uint64_t id, const std::vector<int32_t> &tokens, const SequenceOptions &options,
           uint64_t &cached);
  // Tokens an add of `tokens` would reuse now; changes nothing.
  uint64_t probe(uint64_t id, const std::vector<int32_t> &tokens, const SequenceOptions &options);
  // One decode step: appends tokens[i] to ids[i] for every i; false when
  // out of blocks (nothing changed).
  bool extend(const std::vector<uint64_t> &ids, const std::vector<int32_t> &tokens);
  // The next chunk of a chunked prefill: appends `count` tokens to `id`;
  // false when out of blocks (nothing changed).
  bool extend_chunk(uint64_t id, const int32_t *tokens, size_t count);
  // The first `tokens` tokens of `id` have their KV written.
  void commit(uint64_t id, uint64_t tokens);
  // Publishes id's state at `position` (kvc_sequence_publish_state); false
  // when the block is not in the tree (a fork sibling shares it).
  bool publish(uint64_t id, uint64_t position);
  void remove(uint64_t id);
  // Evicts ahead until `sets` block sets are free (kvc_cache_make_room).
  void make_room(uint64_t sets);
  // Waits until the block stores wrote what was queued (kvc_cache_flush_tiers).
  void flush_tiers();

  // Slot mappings of the tokens added to `ids` since their last batch call,
  // one array per layer group (`slots[g]`, -1 where nothing is written);
  // when `tables` is given, also the padded block tables per group (rows of
  // `*table_stride` entries) and the sequence lengths, for attention.
  void batch(const std::vector<uint64_t> &ids, std::vector<SlotRow> &slots,
             std::vector<TableRows> *tables, uint32_t *table_stride,
             std::vector<int32_t> *seq_lens);

  CacheCounters counters() const;

 private:
  kvc_cache *cache_ = nullptr;
  uint32_t num_groups_ = 0;
  uint64_t bytes_per_token_ = 0;
  uint64_t primary_bytes_ = 0;
};

}  // namespace sim
