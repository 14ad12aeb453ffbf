#include "core/cache.h"

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
  device_ = std::move(device);
  device_memory_ = device_->memory_info();
  plan_ = plan_memory(config_, grouping_, device_memory_.free_bytes);
  host_plan_ = plan_host_memory(config_, grouping_);
  if (plan_.num_pages != 0) {
    // One allocation; every pool views it with its own block stride.
    arena_memory_ = std::make_unique<PoolMemory>(*device_, plan_.page_bytes, plan_.num_pages);
    for (size_t p = 0; p < grouping_.pools.size(); ++p)
      pools_.push_back(std::make_unique<PoolMemory>(
          arena_memory_->base(), grouping_.pools[p].block_bytes, plan_.pool_blocks[p]));
  } else {
    for (size_t p = 0; p < grouping_.pools.size(); ++p)
      pools_.push_back(std::make_unique<PoolMemory>(*device_, grouping_.pools[p].block_bytes,
                                                     plan_.pool_blocks[p]));
  }
  if (host_plan_.blocks_per_group > 0)
    for (size_t p = 0; p < grouping_.pools.size(); ++p)
      host_pools_.push_back(std::make_unique<PoolMemory>(*device_, grouping_.pools[p].block_bytes,
                                                         host_plan_.pool_blocks[p],
                                                         PoolMemory::Kind::kHost));
  manager_ = std::make_unique<BlockManager>(config_, grouping_, pools_, host_pools_, *device_,
                                            plan_.num_pages);
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

}  // namespace kvc
