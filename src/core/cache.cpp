#include "core/cache.h"

#include "core/error.h"

namespace kvc {

Cache::Cache(const CacheConfig& cfg) : config_(cfg) {
  config_.validate_shape();
  grouping_ = group_layers(config_);
  device_ = create_device(config_.device_kind, config_.device_ordinal);
  device_memory_ = device_->memory_info();
  plan_ = plan_memory(config_, grouping_, device_memory_.free_bytes);
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
  manager_ = std::make_unique<BlockManager>(config_, grouping_, pools_, *device_, plan_.num_pages);
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
