#include "core/layer_groups.h"

#include <tuple>

#include "base/dtype.h"

namespace kvc {

namespace {

void fill_geometry(const CacheConfig& cfg, LayerGroup& g) {
  const uint64_t es = dtype_size(g.dtype);
  const uint64_t T = cfg.tokens_per_block;
  const uint64_t slab = T * g.kv_heads * g.head_dim * es;
  g.kv_stride = slab;
  g.layer_stride = slab * g.kv_factor;
  if (g.layout == KVC_LAYOUT_NHD) {
    g.token_stride = uint64_t(g.kv_heads) * g.head_dim * es;
    g.head_stride = uint64_t(g.head_dim) * es;
    g.geometry.num_runs = uint64_t(g.layers.size()) * g.kv_factor;
    g.geometry.row_bytes = g.token_stride;
  } else {
    g.token_stride = uint64_t(g.head_dim) * es;
    g.head_stride = T * g.head_dim * es;
    g.geometry.num_runs = uint64_t(g.layers.size()) * g.kv_factor * g.kv_heads;
    g.geometry.row_bytes = g.token_stride;
  }
  g.geometry.tokens_per_block = cfg.tokens_per_block;
  g.geometry.block_bytes = g.layer_stride * g.layers.size();
}

// The class of layer l: the first KV resource of the same class as l's.
uint32_t class_of(const CacheConfig& cfg, uint32_t l) {
  if (cfg.kv_resources.empty()) return 0;
  const KvResource& r = cfg.kv_resources[cfg.layer_kv_resource[l]];
  uint32_t c = 0;
  while (!cfg.kv_resources[c].same_class(r)) ++c;
  return c;
}

}  // namespace

LayerGrouping group_layers(const CacheConfig& cfg) {
  LayerGrouping out;
  out.layers.resize(cfg.num_layers);
  for (uint32_t l = 0; l < cfg.num_layers; ++l) {
    const auto key = std::make_tuple(cfg.window_of(l), cfg.kv_heads_of(l), cfg.head_dim_of(l),
                                     cfg.dtype_of(l), cfg.kv_factor_of(l), cfg.layout_of(l));
    uint32_t gi = 0;
    while (gi < out.groups.size() &&
           std::make_tuple(out.groups[gi].window, out.groups[gi].total_kv_heads,
                           out.groups[gi].head_dim, out.groups[gi].dtype,
                           out.groups[gi].kv_factor, out.groups[gi].layout) != key) {
      ++gi;
    }
    if (gi == out.groups.size()) {
      LayerGroup g;
      g.window = std::get<0>(key);
      g.total_kv_heads = std::get<1>(key);
      g.kv_heads = cfg.heads_per_rank(g.total_kv_heads);
      g.head_dim = std::get<2>(key);
      g.dtype = std::get<3>(key);
      g.kv_factor = std::get<4>(key);
      g.layout = std::get<5>(key);
      g.kv_class = class_of(cfg, l);
      out.groups.push_back(g);
    }
    out.layers[l] = LayerPlace{gi, uint32_t(out.groups[gi].layers.size())};
    out.groups[gi].layers.push_back(l);
  }
  for (uint32_t gi = 0; gi < out.groups.size(); ++gi) {
    LayerGroup& g = out.groups[gi];
    fill_geometry(cfg, g);
    uint32_t pi = 0;
    while (pi < out.pools.size() &&
           (out.pools[pi].block_bytes != g.geometry.block_bytes ||
            out.groups[out.pools[pi].groups[0]].kv_class != g.kv_class)) {
      ++pi;
    }
    if (pi == out.pools.size()) out.pools.push_back(PoolShape{g.geometry.block_bytes, {}});
    out.pools[pi].groups.push_back(gi);
    g.pool = pi;
  }
  return out;
}

}  // namespace kvc
