// The layer grouping's part of the invariant checker: every layer sits in
// a group of its own geometry (its KV resource's with KV resources), every
// group's strides and block bytes follow from that geometry, and a pool
// holds groups of one block size and one KV resource class only.
#include <string>

#include "base/dtype.h"
#include "base/error.h"
#include "core/layer_groups.h"

namespace kvc {

namespace {

[[noreturn]] void broken(const std::string& what) {
  fail(KVC_ERR_INTERNAL, "cache invariant broken (layer groups): " + what);
}

}  // namespace

void check_grouping(const CacheConfig& cfg, const LayerGrouping& grouping) {
  if (grouping.layers.size() != cfg.num_layers) broken("layer places do not cover num_layers");
  for (uint32_t l = 0; l < cfg.num_layers; ++l) {
    const LayerPlace& p = grouping.layers[l];
    if (p.group >= grouping.groups.size()) broken("layer " + std::to_string(l) + " has no group");
    const LayerGroup& g = grouping.groups[p.group];
    if (p.index >= g.layers.size() || g.layers[p.index] != l)
      broken("layer " + std::to_string(l) + " is not at its index in group " +
             std::to_string(p.group));
    if (g.head_dim != cfg.head_dim_of(l) || g.dtype != cfg.dtype_of(l) ||
        g.kv_factor != cfg.kv_factor_of(l) || g.layout != cfg.layout_of(l) ||
        g.total_kv_heads != cfg.kv_heads_of(l) || g.window != cfg.window_of(l))
      broken("layer " + std::to_string(l) + "'s geometry differs from group " +
             std::to_string(p.group) + "'s");
  }
  for (size_t gi = 0; gi < grouping.groups.size(); ++gi) {
    const LayerGroup& g = grouping.groups[gi];
    const uint64_t slab =
        uint64_t(cfg.tokens_per_block) * g.kv_heads * g.head_dim * dtype_size(g.dtype);
    if (g.kv_stride != slab || g.layer_stride != slab * g.kv_factor ||
        g.geometry.block_bytes != g.layer_stride * g.layers.size())
      broken("group " + std::to_string(gi) + "'s strides do not follow its geometry");
    if (g.pool >= grouping.pools.size()) broken("group " + std::to_string(gi) + " has no pool");
    const PoolShape& pool = grouping.pools[g.pool];
    if (pool.block_bytes != g.geometry.block_bytes)
      broken("group " + std::to_string(gi) + "'s block bytes differ from pool " +
             std::to_string(g.pool) + "'s");
    if (grouping.groups[pool.groups.at(0)].kv_class != g.kv_class)
      broken("pool " + std::to_string(g.pool) + " holds groups of two KV resource classes");
  }
}

}  // namespace kvc
