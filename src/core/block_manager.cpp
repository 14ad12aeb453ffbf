#include "core/block_manager.h"

#include <algorithm>
#include <string>

#include "base/error.h"

namespace kvc {

namespace {

// Tree capacity. Without windows a node holds one block of each group, so
// a pool's share of one group bounds it (as before). With windows the
// anchor group may take a whole shared pool; without any anchor, nodes
// outlive their blocks while sequences name them, so allow twice the
// blocks (publishing stops, never fails, when the tree is full).
uint32_t tree_capacity(const LayerGrouping& grouping,
                       const std::vector<std::unique_ptr<PoolMemory>>& memory) {
  if (memory.empty()) return 0;
  uint32_t ref = 0;
  bool any_window = false, any_full = false;
  for (uint32_t g = 0; g < grouping.groups.size(); ++g) {
    if (grouping.groups[g].window != 0) any_window = true;
    else if (!any_full) any_full = true, ref = g;
  }
  const uint32_t pool = grouping.groups[ref].pool;
  // Sized for the pools' ceiling (kvc_cache_resize may grow them).
  if (!any_window) return uint32_t(memory[pool]->max_blocks() / grouping.pools[pool].groups.size());
  if (any_full) return uint32_t(memory[pool]->max_blocks());
  uint64_t total = 0;
  for (const auto& m : memory) total += m->max_blocks();
  return uint32_t(std::min<uint64_t>(2 * total, UINT32_MAX - 2));
}

// Block sets of the host tier: every host node holds one.
uint64_t sets_in(const std::vector<std::unique_ptr<PoolMemory>>& memory,
                 const LayerGrouping& grouping) {
  if (memory.empty()) return 0;
  const uint32_t p = grouping.groups[0].pool;
  return memory[p]->num_blocks() / grouping.pools[p].groups.size();
}

std::unique_ptr<Tier> make_tier(const CacheConfig& config, const GroupLayout& layout,
                                const LayerGrouping& grouping, PrefixIndex& index,
                                Residency& residency, Eviction& eviction, CacheCounters& counters,
                                const RankPools& ranks) {
  if (ranks.host_pools(0).empty()) return std::make_unique<NoTier>(index.tree());
  return std::make_unique<HostTier>(layout, grouping, index, residency, eviction, counters, ranks,
                                    config.secondary_offload_min_priority);
}

}  // namespace

BlockManager::BlockManager(const CacheConfig& config, const LayerGrouping& grouping,
                           const RankPools& ranks, uint64_t arena_pages,
                           std::vector<std::unique_ptr<BlockStore>> stores)
    : layout_(grouping, config.tokens_per_block),
      counters_(uint32_t(grouping.groups.size())),
      residency_(layout_, grouping, ranks, arena_pages, counters_),
      index_(config, layout_, residency_,
             uint32_t(tree_capacity(grouping, ranks.pools(0)) +
                      sets_in(ranks.host_pools(0), grouping)),
             /*track_children=*/!ranks.host_pools(0).empty() || arena_pages != 0),
      eviction_(layout_, index_, residency_, counters_, config.manual_clock),
      tier_(make_tier(config, layout_, grouping, index_, residency_, eviction_, counters_, ranks)),
      seqs_(config, layout_, index_, residency_, eviction_, *tier_, counters_) {
  eviction_.set_tier(*tier_);
  residency_.set_reclaimer(&eviction_);
  if (config.event_buffer_size != 0) {
    if (layout_.num_groups() > 64)
      fail(KVC_ERR_UNSUPPORTED, "events name layer groups in a 64-bit mask; this model has " +
                                    std::to_string(layout_.num_groups()) +
                                    " layer groups (set event_buffer_size to 0)");
    events_ = std::make_unique<EventLog>(config.event_buffer_size, config.tokens_per_block,
                                         config.event_hash_seed, index_.tree().id_bound());
    index_.set_events(events_.get());
  }
  if (!stores.empty()) {
    stores_ = std::make_unique<StoreChain>(config, layout_, grouping, index_, ranks.device(0),
                                           ranks.pools(0), ranks.host_pools(0), std::move(stores));
    index_.set_store_keys(&stores_->keys());
    index_.set_write_stamps(stores_->stamps());
    eviction_.set_stores(stores_.get());
    stores_->set_eviction(&eviction_);
    if (auto* host = dynamic_cast<HostTier*>(tier_.get())) host->set_stores(stores_.get());
    seqs_.set_stores(stores_.get());
    if (events_) stores_->set_events(events_.get());
  }
}

void BlockManager::debug_check() const {
#ifndef NDEBUG
  check_invariants();
#endif
}

// ---------------------------------------------------------------------------
// Sequences: each call, then the checker in debug builds
// ---------------------------------------------------------------------------

uint64_t BlockManager::add(uint64_t id, const int32_t* tokens, uint64_t n,
                           const SequenceOptions& options, void* stream) {
  uint64_t cached = 0;
  if (!try_add(id, tokens, n, options, stream, &cached)) fail(refusal().status, refusal().message);
  return cached;
}

void BlockManager::extend(uint64_t id, const int32_t* tokens, uint64_t n, void* stream) {
  if (!try_extend(id, tokens, n, stream)) fail(refusal().status, refusal().message);
}

void BlockManager::extend_batch(const uint64_t* ids, const int32_t* tokens, size_t count,
                                void* stream) {
  if (!try_extend_batch(ids, tokens, count, stream)) fail(refusal().status, refusal().message);
}

bool BlockManager::try_add(uint64_t id, const int32_t* tokens, uint64_t n,
                           const SequenceOptions& options, void* stream, uint64_t* cached_tokens) {
  StoreChain::OfferBatch offers(stores_.get(), stream);
  if (!seqs_.try_add(id, tokens, n, options, stream, cached_tokens)) return false;
  debug_check();
  return true;
}

bool BlockManager::try_extend(uint64_t id, const int32_t* tokens, uint64_t n, void* stream) {
  StoreChain::OfferBatch offers(stores_.get(), stream);
  if (!seqs_.try_extend(id, tokens, n, stream)) return false;
  debug_check();
  return true;
}

bool BlockManager::try_extend_batch(const uint64_t* ids, const int32_t* tokens, size_t count,
                                    void* stream) {
  StoreChain::OfferBatch offers(stores_.get(), stream);
  if (!seqs_.try_extend_batch(ids, tokens, count, stream)) return false;
  debug_check();
  return true;
}

void BlockManager::commit(uint64_t id, uint64_t num_computed) {
  seqs_.commit(id, num_computed);
  debug_check();
}

void BlockManager::rewind(uint64_t id, uint64_t num_tokens) {
  seqs_.rewind(id, num_tokens);
  debug_check();
}

void BlockManager::fork(uint64_t parent, uint64_t child) {
  seqs_.fork(parent, child);
  debug_check();
}

void BlockManager::remove(uint64_t id) {
  seqs_.remove(id);
  debug_check();
}

void BlockManager::pin(uint64_t id) {
  seqs_.pin(id);
  debug_check();
}

void BlockManager::unpin(uint64_t id) {
  seqs_.unpin(id);
  debug_check();
}

// ---------------------------------------------------------------------------
// The cache as a whole
// ---------------------------------------------------------------------------

void BlockManager::advance_clock(uint64_t ms) {
  const RetentionClock& time = eviction_.clock();
  if (!time.manual())
    fail(KVC_ERR_INVALID_STATE,
         "this cache reads the monotonic clock; kvc_cache_advance_clock needs a cache created "
         "with kvc_config_set_manual_clock(config, true)");
  if (ms > UINT64_MAX - time.now_ms())
    invalid_argument("milliseconds (" + std::to_string(ms) + ") would overflow the clock, now at " +
                     std::to_string(time.now_ms()) + " ms");
  eviction_.advance_clock(ms);
  debug_check();
}

void BlockManager::grow_pools(const std::vector<uint64_t>& pool_blocks, uint64_t num_pages) {
  residency_.grow(pool_blocks, num_pages);
  debug_check();
}

void BlockManager::reset_reuse() {
  if (stores_) stores_->settle();  // write-through jobs hold blocks until done
  uint64_t in_use = 0;
  for (size_t p = 0; p < residency_.num_pools(); ++p) in_use += residency_.pool(p).num_in_use();
  if (in_use > 0)
    fail(KVC_ERR_INVALID_STATE, "cannot reset the reuse state while " + std::to_string(in_use) +
                                    " blocks are in use (by sequences or pins)");
  // Consumers learn of a reset from one CLEARED, not from each block.
  if (events_) events_->set_muted(true);
  if (stores_) stores_->set_muted(true);  // a reset stores nothing
  eviction_.evict_all();
  if (stores_) stores_->set_muted(false);
  if (events_) {
    events_->set_muted(false);
    events_->cleared();
  }
  debug_check();
}

void BlockManager::drain_events(kvc_event_t* out, size_t capacity, int32_t* tokens,
                                size_t token_capacity, kvc_event_drain_t& result) {
  if (!events_)
    fail(KVC_ERR_UNSUPPORTED,
         "events are off for this cache: create it with kvc_config_set_event_buffer_size > 0");
  events_->drain(out, capacity, tokens, token_capacity, result);
}

void BlockManager::snapshot(std::vector<kvc_snapshot_entry_t>& out, uint64_t* event_id) const {
  if (!events_)
    fail(KVC_ERR_UNSUPPORTED,
         "events are off for this cache: create it with kvc_config_set_event_buffer_size > 0");
  events_->snapshot(index_, out);
  if (stores_) stores_->snapshot(out);
  if (event_id != nullptr) *event_id = events_->last_id();
}

CacheStats BlockManager::stats() const {
  CacheStats s;
  s.reused_blocks = counters_.reused_blocks;
  s.missed_blocks = counters_.missed_blocks;
  s.evicted_blocks = counters_.evicted_blocks;
  residency_.add_stats(s);
  tier_->add_stats(s);
  s.num_sequences = seqs_.size();
  s.num_pinned = seqs_.num_pins();
  s.tree_nodes = index_.tree().size();
  return s;
}

GroupStats BlockManager::group_stats(uint32_t group) const {
  if (group >= num_groups())
    invalid_argument("group must be < num_groups (" + std::to_string(num_groups()) + "), got " +
                     std::to_string(group));
  return counters_.groups[group];
}

}  // namespace kvc
