#include "core/cache.h"

#include <algorithm>

#include "base/error.h"

namespace kvc {

namespace {

CacheConfig validated_shape(const CacheConfig& cfg) {
  cfg.validate_shape();
  return cfg;
}

}  // namespace

Cache::Cache(const CacheConfig& cfg)
    : Cache(validated_shape(cfg), create_device(cfg.device_kind, cfg.device_ordinal)) {}

Cache::Cache(const CacheConfig& cfg, std::unique_ptr<Device> device) : config_(cfg) {
  config_.validate_shape();
  grouping_ = group_layers(config_);
  // The stores first: a directory or server that cannot be used is refused
  // before the pools are allocated.
  std::vector<std::unique_ptr<BlockStore>> stores;
  if (config_.stores.any())
    stores = open_block_stores(config_.stores, store_record_layout(config_, grouping_));
  device_ = std::move(device);
  device_memory_ = device_->memory_info();
  plan_ = plan_memory(config_, grouping_, device_memory_.free_bytes);
  host_plan_ = plan_host_memory(config_, grouping_);
  // Pools reserve the address space of their ceiling where the device can
  // (kvc_cache_resize then backs or returns memory at their end).
  growable_ = device_->reserve_granularity() != 0;
  if (!growable_ && plan_.max_budget_bytes > plan_.budget_bytes)
    fail(KVC_ERR_UNSUPPORTED, "max_primary_bytes (" + std::to_string(config_.max_primary_bytes) +
                                  ") asks for pools that grow, but the " + device_->name() +
                                  " device cannot reserve address space for them");
  if (plan_.num_pages != 0) {
    // One allocation; every pool views it with its own block stride.
    arena_memory_ =
        growable_ ? std::make_unique<PoolMemory>(*device_, plan_.page_bytes, plan_.num_pages,
                                                 plan_.max_pages)
                  : std::make_unique<PoolMemory>(*device_, plan_.page_bytes, plan_.num_pages);
    for (size_t p = 0; p < grouping_.pools.size(); ++p)
      pools_.push_back(std::make_unique<PoolMemory>(arena_memory_->base(),
                                                     grouping_.pools[p].block_bytes,
                                                     plan_.pool_blocks[p],
                                                     growable_ ? plan_.max_pool_blocks[p]
                                                               : plan_.pool_blocks[p]));
  } else {
    for (size_t p = 0; p < grouping_.pools.size(); ++p)
      pools_.push_back(growable_ ? std::make_unique<PoolMemory>(
                                       *device_, grouping_.pools[p].block_bytes,
                                       plan_.pool_blocks[p], plan_.max_pool_blocks[p])
                                 : std::make_unique<PoolMemory>(
                                       *device_, grouping_.pools[p].block_bytes,
                                       plan_.pool_blocks[p]));
  }
  if (host_plan_.blocks_per_group > 0)
    for (size_t p = 0; p < grouping_.pools.size(); ++p)
      host_pools_.push_back(std::make_unique<PoolMemory>(*device_, grouping_.pools[p].block_bytes,
                                                         host_plan_.pool_blocks[p],
                                                         PoolMemory::Kind::kHost));
  manager_ = std::make_unique<BlockManager>(config_, grouping_, pools_, host_pools_, *device_,
                                            plan_.num_pages, std::move(stores));
}

Cache::~Cache() = default;

LayerSlabs Cache::layer_view(uint32_t layer) const {
  if (layer >= config_.num_layers)
    invalid_argument("layer must be < num_layers (" + std::to_string(config_.num_layers) +
                     "), got " + std::to_string(layer));
  const LayerPlace& place = grouping_.layers[layer];
  const LayerGroup& g = grouping_.groups[place.group];
  const PoolMemory& pool = *pools_[g.pool];
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
  v.kv_factor = config_.kv_factor;
  v.dtype = config_.dtype;
  v.layout = config_.layout;
  v.window = g.window;
  v.layer = layer;
  return v;
}

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
  if (manager_->try_add(id, tokens, num_tokens, options, stream, cached_tokens)) return true;
  *refusal = manager_->refusal();
  return false;
}

bool Cache::extend(uint64_t id, const int32_t* tokens, uint64_t num_tokens, void* stream,
                   Refusal* refusal) {
  Lock lock(mutex_);
  if (manager_->try_extend(id, tokens, num_tokens, stream)) return true;
  *refusal = manager_->refusal();
  return false;
}

bool Cache::extend_batch(const uint64_t* ids, const int32_t* tokens, size_t count, void* stream,
                         Refusal* refusal) {
  Lock lock(mutex_);
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
  manager_->rewind(id, num_tokens);
}

void Cache::fork(uint64_t parent, uint64_t child) {
  Lock lock(mutex_);
  manager_->fork(parent, child);
}

void Cache::remove(uint64_t id) {
  Lock lock(mutex_);
  manager_->remove(id);
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
  if (!growable_)
    fail(KVC_ERR_UNSUPPORTED, "the " + device_->name() +
                                  " device cannot resize pools in place (it reserves no "
                                  "address space for them)");
  const MemoryPlan next = plan_resize(grouping_, plan_, bytes, config_.tokens_per_block);
  manager_->settle_stores();
  const std::string why = manager_->resize_refusal(next.pool_blocks, next.num_pages);
  if (!why.empty())
    fail(KVC_ERR_OUT_OF_BLOCKS,
         "cannot resize the primary pools to " + std::to_string(bytes) + " bytes: " + why);
  // Back the growth of every pool first: the one step that can fail.
  std::vector<PoolMemory*> owners;
  if (arena_memory_) owners.push_back(arena_memory_.get());
  else
    for (auto& p : pools_) owners.push_back(p.get());
  try {
    for (size_t i = 0; i < owners.size(); ++i)
      owners[i]->back(arena_memory_ ? next.num_pages : next.pool_blocks[i]);
  } catch (...) {
    for (PoolMemory* m : owners) m->trim();  // what was backed for nothing goes back
    throw;
  }
  // Then the bookkeeping (cannot fail), the counts, and the memory a shrink freed.
  manager_->shrink_pools(next.pool_blocks, next.num_pages);
  manager_->grow_pools(next.pool_blocks, next.num_pages);
  if (arena_memory_) arena_memory_->set_num_blocks(next.num_pages);
  for (size_t p = 0; p < pools_.size(); ++p) pools_[p]->set_num_blocks(next.pool_blocks[p]);
  for (PoolMemory* m : owners) m->trim();
  plan_ = next;
}

MemoryPlan Cache::plan_for(ResizeInputs in, uint64_t* formula_bytes, uint64_t* free_bytes) const {
  Lock lock(mutex_);
  if (in.free_bytes == 0) {
    const uint64_t device_free = device_->memory_info().free_bytes;
    if (device_free == 0)
      invalid_argument("free_bytes is 0 and the " + device_->name() +
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

}  // namespace kvc
