#include "core/cache.h"

#include <algorithm>

#include "base/error.h"

namespace kvc {

namespace {

// The devices of a validated config, one per rank.
std::vector<std::unique_ptr<Device>> open_devices(const CacheConfig& cfg) {
  cfg.validate_shape();
  std::vector<std::unique_ptr<Device>> out;
  for (uint32_t r = 0; r < cfg.num_ranks(); ++r)
    out.push_back(create_device(cfg.device_kind,
                                cfg.device_kind == KVC_DEVICE_CPU ? 0 : cfg.rank_ordinal(r)));
  return out;
}

std::vector<std::unique_ptr<Device>> one_device(std::unique_ptr<Device> device) {
  std::vector<std::unique_ptr<Device>> out;
  out.push_back(std::move(device));
  return out;
}

}  // namespace

Cache::Cache(const CacheConfig& cfg) : Cache(cfg, open_devices(cfg)) {}

Cache::Cache(const CacheConfig& cfg, std::unique_ptr<Device> device)
    : Cache(cfg, one_device(std::move(device))) {}

Cache::Cache(const CacheConfig& cfg, std::vector<std::unique_ptr<Device>> devices)
    : config_(cfg) {
  config_.validate_shape();
  if (devices.size() != config_.num_ranks())
    invalid_argument("a cache of " + std::to_string(config_.num_ranks()) + " ranks needs as many "
                     "devices, got " + std::to_string(devices.size()));
  grouping_ = group_layers(config_);
#ifndef NDEBUG
  check_grouping(config_, grouping_);  // fixed from here on: checked once in debug builds
#endif
  // The stores first: a directory or server that cannot be used is refused
  // before the pools are allocated.
  std::vector<std::unique_ptr<BlockStore>> stores;
  if (config_.stores.any())
    stores = open_block_stores(config_.stores, store_record_layout(config_, grouping_));
  // Every byte budget is per rank: the plan is one rank's, sized by the
  // rank with the least free memory, and every rank allocates it.
  growable_ = true;
  for (size_t r = 0; r < devices.size(); ++r) {
    const DeviceMemoryInfo m = devices[r]->memory_info();
    if (r == 0 || m.free_bytes < device_memory_.free_bytes) device_memory_ = m;
    // Pools reserve the address space of their ceiling where the device
    // can (kvc_cache_resize then backs or returns memory at their end).
    if (devices[r]->reserve_granularity() == 0) growable_ = false;
  }
  plan_ = plan_memory(config_, grouping_, device_memory_.free_bytes);
  host_plan_ = plan_host_memory(config_, grouping_, plan_.snapshot_slots);
  if (!growable_ && plan_.max_budget_bytes > plan_.budget_bytes)
    fail(KVC_ERR_UNSUPPORTED, "max_primary_bytes (" + std::to_string(config_.max_primary_bytes) +
                                  ") asks for pools that grow, but the " + devices[0]->name() +
                                  " device cannot reserve address space for them");
  ranks_ = std::make_unique<RankPools>(std::move(devices), grouping_, plan_, host_plan_,
                                       growable_);
  if (!config_.resources.empty())
    // One rank only (CacheConfig::validate_shape refuses them with several).
    state_ = std::make_unique<StateSlots>(ranks_->device(0), lay_out_resources(config_.resources),
                                          plan_.state_slots);
  manager_ = std::make_unique<BlockManager>(config_, grouping_, *ranks_, plan_.num_pages,
                                            std::move(stores));
  if (state_) {
    // Prefix reuse through state snapshots only (state.h).
    snapshots_ = std::make_unique<StateSnapshots>(
        ranks_->device(0), *state_, manager_->tree(), plan_.snapshot_slots,
        host_plan_.snapshot_slots, config_.secondary_offload_min_priority);
    manager_->set_snapshot_gate(snapshots_.get());
  }
}

Cache::~Cache() = default;

// ---------------------------------------------------------------------------
// The locked facade
// ---------------------------------------------------------------------------

namespace {
using Lock = std::lock_guard<std::mutex>;
}

bool Cache::add(uint64_t id, const int32_t* tokens, uint64_t num_tokens,
                const SequenceOptions& options, void* stream, uint64_t* cached_tokens,
                Refusal* refusal) {
  Lock lock(mutex_);
  if (state_) {
    // After the add's own checks, before anything changes.
    manager_->check_add(id, num_tokens, options);
    check_unpaged_length(id, num_tokens);
    const std::string why = state_->refusal();
    if (!why.empty()) {
      refusal->status = KVC_ERR_OUT_OF_BLOCKS;
      refusal->message = "cannot add sequence " + std::to_string(id) + ": " + why;
      return false;
    }
  }
  if (!manager_->try_add(id, tokens, num_tokens, options, stream, cached_tokens)) {
    *refusal = manager_->refusal();
    return false;
  }
  if (state_) {
    try {
      state_->take(id);
      // The reused prefix ends at a node with a snapshot (the prefix index
      // cut it there): its state goes into the new slot.
      if (*cached_tokens > 0) {
        const Sequence& s = manager_->sequence(id);
        const uint64_t b = *cached_tokens / config_.tokens_per_block - 1;
        snapshots_->restore(s.nodes.at(b), id, stream);
        ++snapshots_->counters().hits;
        snapshots_->counters().hit_tokens += *cached_tokens;
      }
    } catch (...) {
      state_->release(id);
      manager_->remove(id);
      throw;
    }
    debug_check_state();
  }
  return true;
}

uint32_t Cache::snapshot_node(uint64_t id, uint64_t position, std::string* why) const {
  const Sequence& s = manager_->sequence(id);
  const uint32_t T = config_.tokens_per_block;
  const std::string seq = "sequence " + std::to_string(id);
  if (position == 0 || position % T != 0) {
    *why = "position " + std::to_string(position) +
           " is not a positive multiple of tokens_per_block (" + std::to_string(T) + ")";
    return kNoNode;
  }
  if (position > s.committed) {
    *why = "position " + std::to_string(position) + " is past the " +
           std::to_string(s.committed) + " committed tokens of " + seq;
    return kNoNode;
  }
  const uint64_t b = position / T - 1;
  if (!config_.block_reuse) {
    *why = "block reuse is off for this cache (kvc_config_set_block_reuse): no block of " + seq +
           " is published, so no snapshot can hang on one";
    return kNoNode;
  }
  if (b >= s.published || b >= s.nodes.size() || s.nodes[b] == kNoNode) {
    *why = "block " + std::to_string(b) + " of " + seq + " (tokens " + std::to_string(b * T) +
           " to " + std::to_string(position) + ") is not published in the prefix tree";
    return kNoNode;
  }
  return s.nodes[b];
}

void Cache::publish_state(uint64_t id, uint64_t position, void* stream) {
  Lock lock(mutex_);
  if (!state_)
    invalid_argument("the cache has no state resources: there is no state of sequence " +
                     std::to_string(id) + " to publish (kvc_config_add_ssm_state ...)");
  std::string why;
  const uint32_t node = snapshot_node(id, position, &why);
  if (node == kNoNode)
    fail(position == 0 || position % config_.tokens_per_block != 0 ||
                 position > manager_->sequence(id).committed
             ? KVC_ERR_INVALID_ARGUMENT
             : KVC_ERR_INVALID_STATE,
         "cannot publish the state of sequence " + std::to_string(id) + " at position " +
             std::to_string(position) + ": " + why);
  if (snapshots_->num_slots() == 0)
    fail(KVC_ERR_INVALID_STATE,
         "cannot publish the state of sequence " + std::to_string(id) +
             ": the cache has 0 state snapshot slots (kvc_config_set_max_state_snapshots)");
  snapshots_->publish(node, id, stream);
  debug_check_state();
}

Cache::SnapshotSummary Cache::snapshot_summary() const {
  Lock lock(mutex_);
  SnapshotSummary d;
  if (!snapshots_) return d;
  d.num_slots = snapshots_->num_slots();
  d.used = snapshots_->used();
  d.bytes_per_snapshot = snapshots_->bytes_per_snapshot();
  d.bytes = plan_.snapshot_bytes;
  d.host_num_slots = snapshots_->num_host_slots();
  d.host_used = snapshots_->host_used();
  d.host_bytes = uint64_t(d.host_num_slots) * snapshots_->stride_bytes();
  d.counts = snapshots_->counters();
  return d;
}

void Cache::debug_check_state() const {
#ifndef NDEBUG
  if (snapshots_) snapshots_->check();
#endif
}

void Cache::check_unpaged_length(uint64_t id, uint64_t length) const {
  for (uint32_t r = 0; r < state_->num_resources(); ++r) {
    const StateResource& s = state_->layout(r).spec;
    if (s.kind == KVC_RESOURCE_UNPAGED && length > s.max_tokens)
      invalid_argument("sequence " + std::to_string(id) + " would hold " + std::to_string(length) +
                       " tokens, more than the " + std::to_string(s.max_tokens) +
                       " max_tokens of unpaged resource " + std::to_string(r));
  }
}

bool Cache::extend(uint64_t id, const int32_t* tokens, uint64_t num_tokens, void* stream,
                   Refusal* refusal) {
  Lock lock(mutex_);
  if (state_ && num_tokens > 0)
    if (const Sequence* s = manager_->find_sequence(id))
      check_unpaged_length(id, s->length() + num_tokens);
  if (manager_->try_extend(id, tokens, num_tokens, stream)) return true;
  *refusal = manager_->refusal();
  return false;
}

bool Cache::extend_batch(const uint64_t* ids, const int32_t* tokens, size_t count, void* stream,
                         Refusal* refusal) {
  Lock lock(mutex_);
  if (state_ && ids != nullptr)
    for (size_t i = 0; i < count; ++i)
      if (const Sequence* s = manager_->find_sequence(ids[i]))
        check_unpaged_length(ids[i], s->length() + 1);
  if (manager_->try_extend_batch(ids, tokens, count, stream)) return true;
  *refusal = manager_->refusal();
  return false;
}

void Cache::commit(uint64_t id, uint64_t num_computed) {
  Lock lock(mutex_);
  manager_->commit(id, num_computed);
}

void Cache::rewind(uint64_t id, uint64_t num_tokens) {
  Lock lock(mutex_);
  if (state_ && num_tokens > 0) {
    // Only to a position whose state snapshot is cached: it is restored.
    const Sequence& s = manager_->sequence(id);  // NOT_FOUND first
    if (num_tokens > s.length()) {
      manager_->rewind(id, num_tokens);  // its own message
      return;
    }
    const uint64_t to = s.length() - num_tokens;
    std::string why;
    uint32_t node = snapshot_node(id, to, &why);
    if (node != kNoNode && !snapshots_->has(node))
      why = "no state snapshot is cached at position " + std::to_string(to) +
            " (kvc_sequence_publish_state there, before the tokens after it were computed; "
            "or it was evicted)";
    if (!why.empty())
      fail(KVC_ERR_INVALID_STATE,
           "cannot rewind sequence " + std::to_string(id) + " by " + std::to_string(num_tokens) +
               " tokens (from " + std::to_string(s.length()) + " to " + std::to_string(to) +
               "): its state resources go back only to a published state snapshot, and " + why);
    manager_->rewind(id, num_tokens);
    snapshots_->restore(node, id, nullptr);
    ++snapshots_->counters().restores;
    debug_check_state();
    return;
  }
  manager_->rewind(id, num_tokens);
}

void Cache::fork(uint64_t parent, uint64_t child) {
  Lock lock(mutex_);
  if (state_) {
    manager_->sequence(parent);  // the fork's own checks first
    if (manager_->find_sequence(child) != nullptr) manager_->fork(parent, child);  // throws
    const std::string why = state_->refusal();
    if (!why.empty())
      fail(KVC_ERR_OUT_OF_BLOCKS,
           "cannot fork sequence " + std::to_string(parent) + " into " + std::to_string(child) +
               ": " + why);
    state_->take_copy(parent, child, nullptr);
    try {
      manager_->fork(parent, child);
    } catch (...) {
      state_->release(child);
      throw;
    }
    return;
  }
  manager_->fork(parent, child);
}

void Cache::remove(uint64_t id) {
  Lock lock(mutex_);
  manager_->remove(id);
  if (state_) state_->release(id);
}

void Cache::pin(uint64_t id) {
  Lock lock(mutex_);
  manager_->pin(id);
}

void Cache::unpin(uint64_t id) {
  Lock lock(mutex_);
  manager_->unpin(id);
}

SequenceSummary Cache::describe_sequence(uint64_t id) const {
  Lock lock(mutex_);
  const Sequence& s = manager_->sequence(id);
  SequenceSummary d;
  d.prompt_priority = s.prompt_priority;
  d.decode_priority = s.decode_priority;
  d.num_tokens = s.length();
  d.prompt_tokens = s.prompt_len;
  d.cached_tokens = s.cached;
  d.committed_tokens = s.committed;
  d.num_blocks = s.num_blocks();
  return d;
}

TableSize Cache::sequence_block_ids(uint64_t id, uint32_t group, int32_t* ids,
                                    size_t capacity) const {
  Lock lock(mutex_);
  if (group >= manager_->num_groups())
    invalid_argument("group must be < num_groups (" + std::to_string(manager_->num_groups()) +
                     "), got " + std::to_string(group));
  const auto& blocks = manager_->sequence(id).blocks[group];
  TableSize size;
  size.needed = blocks.size();
  size.fits = blocks.size() <= capacity;
  if (size.fits)
    for (size_t i = 0; i < blocks.size(); ++i) ids[i] = int32_t(blocks[i]);
  return size;
}

uint64_t Cache::blocks_needed(uint64_t id, uint64_t num_tokens) const {
  Lock lock(mutex_);
  return manager_->blocks_needed(id, num_tokens);
}

uint64_t Cache::probe(const int32_t* tokens, uint64_t num_tokens,
                      const SequenceOptions& options) const {
  Lock lock(mutex_);
  return manager_->probe(tokens, num_tokens, options);
}

void Cache::advance_clock(uint64_t milliseconds) {
  Lock lock(mutex_);
  manager_->advance_clock(milliseconds);
}

uint64_t Cache::make_room(uint64_t sets, void* stream) {
  Lock lock(mutex_);
  return manager_->make_room(sets, stream);
}

void Cache::reset_reuse() {
  Lock lock(mutex_);
  manager_->reset_reuse();
}

MemoryPlan Cache::plan() const {
  Lock lock(mutex_);
  return plan_;
}

void Cache::resize(uint64_t bytes) {
  Lock lock(mutex_);
  if (state_)
    fail(KVC_ERR_UNSUPPORTED,
         "kvc_cache_resize is not supported on a cache with state resources (" +
             std::to_string(state_->num_resources()) + ")");
  if (!growable_)
    fail(KVC_ERR_UNSUPPORTED, "the " + ranks_->device(0).name() +
                                  " device cannot resize pools in place (it reserves no "
                                  "address space for them)");
  const MemoryPlan next = plan_resize(grouping_, plan_, bytes, config_.tokens_per_block);
  manager_->settle_stores();
  const std::string why = manager_->resize_refusal(next.pool_blocks, next.num_pages);
  if (!why.empty())
    fail(KVC_ERR_OUT_OF_BLOCKS,
         "cannot resize the primary pools to " + std::to_string(bytes) + " bytes: " + why);
  // Back the growth of every pool of every rank first: the one step that
  // can fail (then nothing is backed for nothing, on any rank).
  ranks_->back(next);
  // Then the bookkeeping (cannot fail; a shrink's moves run on every rank),
  // the counts, and the memory a shrink freed.
  manager_->shrink_pools(next.pool_blocks, next.num_pages);
  manager_->grow_pools(next.pool_blocks, next.num_pages);
  ranks_->set_blocks(next);
  plan_ = next;
}

MemoryPlan Cache::plan_for(ResizeInputs in, uint64_t* formula_bytes, uint64_t* free_bytes) const {
  Lock lock(mutex_);
  if (state_)
    fail(KVC_ERR_UNSUPPORTED,
         "kvc_cache_plan_resize is not supported on a cache with state resources (" +
             std::to_string(state_->num_resources()) + ")");
  if (in.free_bytes == 0) {
    uint64_t device_free = UINT64_MAX;  // the least over the ranks
    for (uint32_t r = 0; r < ranks_->num_ranks(); ++r)
      device_free = std::min(device_free, ranks_->device(r).memory_info().free_bytes);
    if (device_free == 0)
      invalid_argument("free_bytes is 0 and the " + ranks_->device(0).name() +
                       " device reports no free memory: pass the free memory you measured");
    in.free_bytes = device_free + plan_.total_bytes;
  }
  *free_bytes = in.free_bytes;
  *formula_bytes = mem_for_paged(in);
  return plan_resize(grouping_, plan_, std::min(*formula_bytes, plan_.max_budget_bytes),
                     config_.tokens_per_block);
}

void Cache::check_invariants() const {
  Lock lock(mutex_);
  manager_->check_invariants();
  check_grouping(config_, grouping_);
  // Tensor parallelism: one set of block ids, so every rank's pools hold
  // rank 0's block counts.
  for (uint32_t r = 1; r < ranks_->num_ranks(); ++r)
    for (size_t p = 0; p < ranks_->pools(0).size(); ++p)
      if (ranks_->pools(r)[p]->num_blocks() != ranks_->pools(0)[p]->num_blocks() ||
          ranks_->host_pools(r).size() != ranks_->host_pools(0).size())
        fail(KVC_ERR_INTERNAL, "rank " + std::to_string(r) + " pool " + std::to_string(p) +
                                   " has " + std::to_string(ranks_->pools(r)[p]->num_blocks()) +
                                   " blocks, rank 0 " +
                                   std::to_string(ranks_->pools(0)[p]->num_blocks()));
  if (state_)
    state_->check([&](uint64_t id) { return manager_->find_sequence(id) != nullptr; },
                  manager_->stats().num_sequences);
  if (snapshots_) snapshots_->check();
}

void Cache::drain_events(kvc_event_t* out, size_t capacity, int32_t* tokens,
                         size_t token_capacity, kvc_event_drain_t& result) {
  Lock lock(mutex_);
  manager_->drain_events(out, capacity, tokens, token_capacity, result);
}

void Cache::snapshot(std::vector<kvc_snapshot_entry_t>& out, uint64_t* event_id) const {
  Lock lock(mutex_);
  manager_->snapshot(out, event_id);
}

CacheStats Cache::stats() const {
  Lock lock(mutex_);
  return manager_->stats();
}

std::vector<StoreTierReport> Cache::tier_reports() const {
  Lock lock(mutex_);
  const StoreChain* stores = manager_->stores();
  return stores != nullptr ? stores->reports() : std::vector<StoreTierReport>{};
}

void Cache::flush_tiers() {
  Lock lock(mutex_);
  if (StoreChain* stores = manager_->stores()) stores->flush();
}

GroupSummary Cache::group_stats(uint32_t group) const {
  Lock lock(mutex_);
  GroupSummary g;
  g.counts = manager_->group_stats(group);  // checks the range
  g.pool = manager_->pool_of_group(group);
  g.pool_free_blocks = manager_->pool(g.pool).num_free();
  return g;
}

TableSize Cache::block_table(uint32_t group, const uint64_t* ids, size_t count, int32_t* table,
                             size_t max_blocks, int32_t pad) const {
  Lock lock(mutex_);
  return write_block_table(*manager_, group, ids, count, table, max_blocks, pad);
}

TableSize Cache::block_table_csr(uint32_t group, const uint64_t* ids, size_t count,
                                 int32_t* indptr, int32_t* indices, size_t indices_capacity,
                                 int32_t* last_page_len) const {
  Lock lock(mutex_);
  return write_block_table_csr(*manager_, group, ids, count, indptr, indices, indices_capacity,
                               last_page_len);
}

void Cache::sequence_lengths(const uint64_t* ids, size_t count, int32_t* lengths) const {
  Lock lock(mutex_);
  write_sequence_lengths(*manager_, ids, count, lengths);
}

TableSize Cache::slot_mapping(uint32_t group, const uint64_t* ids, size_t count, int64_t* slots,
                              size_t capacity, int32_t* new_tokens) {
  Lock lock(mutex_);
  return write_slot_mapping(*manager_, group, ids, count, slots, capacity, new_tokens);
}

Cache::ResourceSummary Cache::describe_resource(uint32_t index) const {
  Lock lock(mutex_);
  const size_t n = state_ ? state_->num_resources() : 0;
  if (index >= n)
    invalid_argument("resource index must be < the cache's " + std::to_string(n) +
                     " state resources, got " + std::to_string(index));
  ResourceSummary d;
  d.num_slots = state_->num_slots();
  d.used = state_->used(index);
  d.base = state_->base(index);
  return d;
}

void Cache::state_slots(const uint64_t* ids, size_t count, uint32_t resource,
                        int32_t* slots) const {
  Lock lock(mutex_);
  if (!state_) invalid_argument("the cache has no state resources (kvc_config_add_ssm_state ...)");
  const size_t n = state_->num_resources();
  if (resource != KVC_STATE_ALL && resource >= n)
    invalid_argument("resource must be < the cache's " + std::to_string(n) +
                     " state resources or KVC_STATE_ALL, got " + std::to_string(resource));
  for (size_t i = 0; i < count; ++i)
    if (manager_->find_sequence(ids[i]) == nullptr)
      fail(KVC_ERR_NOT_FOUND, "ids[" + std::to_string(i) + "]: sequence " +
                                  std::to_string(ids[i]) + " does not exist");
  for (size_t i = 0; i < count; ++i) {
    if (resource != KVC_STATE_ALL) {
      slots[i] = int32_t(state_->slot(ids[i], resource));
      continue;
    }
    for (uint32_t r = 0; r < n; ++r) slots[i * n + r] = int32_t(state_->slot(ids[i], r));
  }
}

void Cache::check_rank(uint32_t rank) const {
  if (rank >= ranks_->num_ranks())
    invalid_argument("rank must be < num_ranks (" + std::to_string(ranks_->num_ranks()) +
                     "), got " + std::to_string(rank));
}

LayerSlabs Cache::layer_view(uint32_t layer, uint32_t rank) const {
  if (layer >= config_.num_layers)
    invalid_argument("layer must be < num_layers (" + std::to_string(config_.num_layers) +
                     "), got " + std::to_string(layer));
  check_rank(rank);
  const LayerPlace& place = grouping_.layers[layer];
  const LayerGroup& g = grouping_.groups[place.group];
  const PoolMemory& pool = *ranks_->pools(rank)[g.pool];
  LayerSlabs v;
  v.base = static_cast<unsigned char*>(pool.base()) + place.index * g.layer_stride;
  v.num_blocks = pool.num_blocks();
  v.block_stride = g.geometry.block_bytes;
  v.kv_stride = g.kv_stride;
  v.token_stride = g.token_stride;
  v.head_stride = g.head_stride;
  v.tokens_per_block = config_.tokens_per_block;
  v.kv_heads = g.kv_heads;
  v.head_dim = g.head_dim;
  v.kv_factor = g.kv_factor;
  v.dtype = g.dtype;
  v.layout = g.layout;
  v.window = g.window;
  v.layer = layer;
  v.rank = rank;
  return v;
}

}  // namespace kvc
