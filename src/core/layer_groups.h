// Layers with equal (window, kv heads, head dim, dtype, kv_factor, layout)
// form a group; a group's block packs every layer of the group
// contiguously, laid out by the group's own geometry. With several ranks
// (tensor parallelism) the geometry is one rank's: its share of the heads
// (CacheConfig::heads_per_rank), the same on every rank. Groups whose block
// bytes are equal draw from one pool.
#pragma once

#include <cstdint>
#include <vector>

#include "base/block_geometry.h"
#include "core/cache_config.h"

namespace kvc {

struct LayerGroup {
  uint32_t window = 0;  // 0: full attention
  uint32_t kv_heads = 0;        // per rank: what one rank's blocks hold
  uint32_t total_kv_heads = 0;  // the model's (== kv_heads with one rank)
  uint32_t head_dim = 0;
  kvc_dtype_t dtype = 0;
  uint32_t kv_factor = 0;
  kvc_layout_t layout = 0;
  // The KV resource class (kv_resource.h) the group belongs to: the index
  // of the class's first KV resource; 0 without KV resources.
  uint32_t kv_class = 0;
  std::vector<uint32_t> layers;  // model layer ids, ascending
  uint32_t pool = 0;
  BlockGeometry geometry;
  // Byte strides inside a block.
  uint64_t layer_stride = 0;
  uint64_t kv_stride = 0;
  uint64_t token_stride = 0;
  uint64_t head_stride = 0;
};

struct PoolShape {
  uint64_t block_bytes = 0;
  std::vector<uint32_t> groups;
};

// Where a model layer sits: its group and its index inside the group.
struct LayerPlace {
  uint32_t group = 0;
  uint32_t index = 0;
};

struct LayerGrouping {
  std::vector<LayerGroup> groups;  // in order of each group's first layer
  std::vector<PoolShape> pools;    // in order of first use
  std::vector<LayerPlace> layers;  // per model layer
};

// Requires cfg.validate_shape() to pass.
LayerGrouping group_layers(const CacheConfig& cfg);

// Invariant checker (layer_groups_check.cpp): throws KVC_ERR_INTERNAL when
// the grouping does not follow the config's per-layer geometry.
void check_grouping(const CacheConfig& cfg, const LayerGrouping& grouping);

}  // namespace kvc
