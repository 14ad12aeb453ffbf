// Cache lifetime and description shims.
#include "capi/cache_access.h"
#include "capi/guard.h"
#include "capi/handles.h"
#include "base/dtype.h"

using kvc::capi::guarded;
using kvc::capi::require;
using kvc::capi::read_sized;
using kvc::capi::write_sized;

using kvc::capi::cache_of;
using kvc::capi::init_sized;

extern "C" {

KVC_API kvc_status_t kvc_cache_create(const kvc_config_t* config, kvc_cache_t** out) {
  return guarded([&] {
    require(config, "config");
    require(out, "out");
    config->cfg.validate();
    auto handle = std::make_unique<kvc_cache>();
    handle->impl = std::make_unique<kvc::Cache>(config->cfg);
    *out = handle.release();
  });
}

KVC_API void kvc_cache_destroy(kvc_cache_t* cache) { delete cache; }

KVC_API void kvc_cache_desc_init(kvc_cache_desc_t* desc) { init_sized(desc); }
KVC_API void kvc_group_desc_init(kvc_group_desc_t* desc) { init_sized(desc); }
KVC_API void kvc_pool_desc_init(kvc_pool_desc_t* desc) { init_sized(desc); }
KVC_API void kvc_layer_view_init(kvc_layer_view_t* view) { init_sized(view); }

KVC_API kvc_status_t kvc_cache_describe(const kvc_cache_t* cache, kvc_cache_desc_t* out) {
  return guarded([&] {
    const kvc::Cache& c = cache_of(cache);
    const kvc::CacheConfig& cfg = c.config();
    kvc_cache_desc_t d{};
    d.device_kind = cfg.device_kind;
    d.device_ordinal = cfg.device_ordinal;
    d.dtype = cfg.dtype;
    d.layout = cfg.layout;
    d.num_layers = cfg.num_layers;
    d.num_groups = uint32_t(c.grouping().groups.size());
    d.num_pools = uint32_t(c.num_pools());
    d.tokens_per_block = cfg.tokens_per_block;
    d.kv_factor = cfg.kv_factor;
    for (size_t p = 0; p < c.num_pools(); ++p) d.num_blocks += c.pool(uint32_t(p)).num_blocks();
    d.token_capacity = c.plan().token_capacity;
    d.primary_bytes = c.plan().total_bytes;
    d.host_cache_bytes = c.host_plan().total_bytes;
    d.device_free_bytes = c.device_memory_at_creation().free_bytes;
    d.device_total_bytes = c.device_memory_at_creation().total_bytes;
    d.num_resources = uint32_t(cfg.resources.size());
    d.num_state_slots = c.plan().state_slots;
    d.state_bytes = c.plan().state_bytes;
    d.num_ranks = c.num_ranks();
    d.num_kv_resources = uint32_t(cfg.kv_resources.size());
    d.max_head_replication = 1;
    for (const kvc::LayerGroup& g : c.grouping().groups)
      d.max_head_replication =
          std::max(d.max_head_replication, cfg.head_replication(g.total_kv_heads));
    write_sized(out, d, "out");
  });
}

KVC_API kvc_status_t kvc_cache_describe_group(const kvc_cache_t* cache, uint32_t group,
                                              kvc_group_desc_t* out) {
  return guarded([&] {
    const kvc::Cache& c = cache_of(cache);
    const auto& groups = c.grouping().groups;
    if (group >= groups.size())
      kvc::invalid_argument("group must be < num_groups (" + std::to_string(groups.size()) +
                            "), got " + std::to_string(group));
    const kvc::LayerGroup& g = groups[group];
    kvc_group_desc_t d{};
    d.window = g.window;
    d.kv_heads = g.total_kv_heads;
    d.kv_heads_per_rank = g.kv_heads;
    d.head_replication = c.config().head_replication(g.total_kv_heads);
    d.head_dim = g.head_dim;
    d.num_layers = uint32_t(g.layers.size());
    d.pool = g.pool;
    d.block_bytes = g.geometry.block_bytes;
    d.bytes_per_token = g.geometry.block_bytes / c.config().tokens_per_block;
    d.dtype = g.dtype;
    d.kv_factor = g.kv_factor;
    d.layout = g.layout;
    write_sized(out, d, "out");
  });
}

KVC_API kvc_status_t kvc_cache_describe_pool(const kvc_cache_t* cache, uint32_t pool,
                                             kvc_pool_desc_t* out) {
  return guarded([&] {
    const kvc::Cache& c = cache_of(cache);
    if (pool >= c.num_pools())
      kvc::invalid_argument("pool must be < num_pools (" + std::to_string(c.num_pools()) +
                            "), got " + std::to_string(pool));
    const kvc::PoolMemory& p = c.pool(pool);
    kvc_pool_desc_t d{};
    d.num_groups = uint32_t(c.grouping().pools[pool].groups.size());
    d.block_bytes = p.block_bytes();
    d.num_blocks = p.num_blocks();
    d.bytes = p.bytes();
    d.base = p.base();
    write_sized(out, d, "out");
  });
}

KVC_API kvc_status_t kvc_cache_layer_view(const kvc_cache_t* cache, uint32_t layer,
                                          kvc_layer_view_t* out) {
  return kvc_cache_layer_view_rank(cache, 0, layer, out);
}

KVC_API kvc_status_t kvc_cache_layer_view_rank(const kvc_cache_t* cache, uint32_t rank,
                                               uint32_t layer, kvc_layer_view_t* out) {
  return guarded([&] {
    const kvc::Cache& c = cache_of(cache);
    const kvc::LayerSlabs v = c.layer_view(layer, rank);
    kvc_layer_view_t d{};
    d.group = c.grouping().layers[layer].group;
    d.pool = c.grouping().groups[d.group].pool;
    d.dtype = v.dtype;
    d.layout = v.layout;
    d.kv_heads = v.kv_heads;
    d.head_dim = v.head_dim;
    d.tokens_per_block = v.tokens_per_block;
    d.kv_factor = v.kv_factor;
    d.elem_size = uint32_t(kvc::dtype_size(v.dtype));
    d.base = v.base;
    d.num_blocks = v.num_blocks;
    d.block_stride = v.block_stride;
    d.kv_stride = v.kv_stride;
    d.token_stride = v.token_stride;
    d.head_stride = v.head_stride;
    d.rank = rank;
    const uint32_t total = c.grouping().groups[d.group].total_kv_heads;
    d.first_kv_head = c.config().first_head(total, rank);
    d.total_kv_heads = total;
    write_sized(out, d, "out");
  });
}

KVC_API void kvc_resize_inputs_init(kvc_resize_inputs_t* inputs) {
  init_sized(inputs);
  if (inputs != nullptr) inputs->free_gpu_memory_fraction = 0.9;
}
KVC_API void kvc_resize_plan_init(kvc_resize_plan_t* plan) { init_sized(plan); }

KVC_API kvc_status_t kvc_cache_plan_resize(const kvc_cache_t* cache,
                                           const kvc_resize_inputs_t* inputs,
                                           kvc_resize_plan_t* out, uint64_t* pool_blocks,
                                           size_t pool_capacity) {
  return guarded([&] {
    const kvc::Cache& c = cache_of(cache);
    kvc_resize_inputs_t defaults{};
    defaults.free_gpu_memory_fraction = 0.9;
    const kvc_resize_inputs_t in = read_sized(inputs, defaults, "inputs");
    if (in.reserved != 0)
      kvc::invalid_argument("inputs->reserved must be 0, got " + std::to_string(in.reserved));
    require(out, "out");
    if (pool_blocks == nullptr && pool_capacity != 0)
      kvc::invalid_argument("pool_blocks is NULL but pool_capacity is " +
                            std::to_string(pool_capacity));
    kvc::ResizeInputs r;
    r.free_bytes = in.free_bytes;
    r.non_paged_bytes = in.non_paged_bytes;
    r.forward_bytes = in.forward_bytes;
    r.fraction = in.free_gpu_memory_fraction;
    kvc_resize_plan_t d{};
    const kvc::MemoryPlan plan = c.plan_for(r, &d.mem_for_paged, &d.free_bytes);
    d.num_pools = uint32_t(plan.pool_blocks.size());
    d.primary_bytes = plan.budget_bytes;
    d.max_primary_bytes = plan.max_budget_bytes;
    d.blocks_per_group = plan.blocks_per_group;
    d.token_capacity = plan.token_capacity;
    for (uint64_t b : plan.pool_blocks) d.num_blocks += b;
    d.total_bytes = plan.total_bytes;
    write_sized(out, d, "out");
    for (size_t p = 0; p < plan.pool_blocks.size() && p < pool_capacity; ++p)
      pool_blocks[p] = plan.pool_blocks[p];
  });
}

KVC_API kvc_status_t kvc_cache_resize(kvc_cache_t* cache, uint64_t primary_bytes) {
  return guarded([&] { cache_of(cache).resize(primary_bytes); });
}

}  // extern "C"
