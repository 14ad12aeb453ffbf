// Paged KV resource shims (kvcache/kv_resource.h): the config's add and the
// cache's per-resource description.
#include <string>

#include "kvcache/kv_resource.h"

#include "capi/cache_access.h"
#include "capi/guard.h"
#include "capi/handles.h"

using kvc::capi::cache_of;
using kvc::capi::guarded;
using kvc::capi::read_sized;
using kvc::capi::require;
using kvc::capi::write_sized;

namespace {

// Why KV resource r is or is not managed with KV resource 0.
kvc_resource_reason_t reason_of(const kvc::KvResource& r, const kvc::KvResource& ref) {
  if (r.head_dim != ref.head_dim) return KVC_RESOURCE_REASON_KV_HEAD_DIM_DIFFERS;
  if (r.dtype != ref.dtype) return KVC_RESOURCE_REASON_KV_DTYPE_DIFFERS;
  if (r.kv_factor != ref.kv_factor) return KVC_RESOURCE_REASON_KV_FACTOR_DIFFERS;
  if (r.layout != ref.layout) return KVC_RESOURCE_REASON_KV_LAYOUT_DIFFERS;
  return KVC_RESOURCE_REASON_MANAGED;
}

const char* reason_text(kvc_resource_reason_t r) {
  switch (r) {
    case KVC_RESOURCE_REASON_KV_HEAD_DIM_DIFFERS:
      return "local: its head_dim differs from KV resource 0's; its layers get pools of their own";
    case KVC_RESOURCE_REASON_KV_DTYPE_DIFFERS:
      return "local: its dtype differs from KV resource 0's; its layers get pools of their own";
    case KVC_RESOURCE_REASON_KV_FACTOR_DIFFERS:
      return "local: its kv_factor differs from KV resource 0's; its layers get pools of their "
             "own";
    case KVC_RESOURCE_REASON_KV_LAYOUT_DIFFERS:
      return "local: its layout differs from KV resource 0's; its layers get pools of their own";
    default:
      return "managed: head_dim, dtype, kv_factor and layout equal KV resource 0's";
  }
}

}  // namespace

extern "C" {

KVC_API void kvc_kv_resource_init(kvc_kv_resource_t* desc) {
  if (desc != nullptr) *desc = kvc_kv_resource_t KVC_KV_RESOURCE_INIT;
}

KVC_API void kvc_kv_resource_desc_init(kvc_kv_resource_desc_t* desc) {
  kvc::capi::init_sized(desc);
}

KVC_API kvc_status_t kvc_config_add_kv_resource(kvc_config_t* config,
                                                const kvc_kv_resource_t* desc,
                                                uint32_t* index) {
  return guarded([&] {
    require(config, "config");
    static const kvc_kv_resource_t defaults = KVC_KV_RESOURCE_INIT;
    const kvc_kv_resource_t d = read_sized(desc, defaults, "desc");
    require(index, "index");
    if (d.num_layers == 0) kvc::invalid_argument("desc->num_layers must be > 0, got 0");
    require(d.layers, "desc->layers");
    kvc::KvResource r;
    r.layers.assign(d.layers, d.layers + d.num_layers);
    r.kv_heads = d.kv_heads;
    r.head_dim = d.head_dim;
    r.dtype = d.dtype;
    r.kv_factor = d.kv_factor;
    r.layout = d.layout;
    r.window = d.window;
    *index = config->cfg.add_kv_resource(std::move(r));
  });
}

KVC_API kvc_status_t kvc_cache_describe_kv_resource(const kvc_cache_t* cache, uint32_t index,
                                                    kvc_kv_resource_desc_t* out) {
  return guarded([&] {
    const kvc::Cache& c = cache_of(cache);
    require(out, "out");
    const kvc::CacheConfig& cfg = c.config();
    if (index >= cfg.kv_resources.size())
      kvc::invalid_argument("index must be < num_kv_resources (" +
                            std::to_string(cfg.kv_resources.size()) + "), got " +
                            std::to_string(index));
    const kvc::KvResource& r = cfg.kv_resources[index];
    const kvc::LayerGrouping& grouping = c.grouping();
    kvc_kv_resource_desc_t d{};
    d.reason = reason_of(r, cfg.kv_resources[0]);
    d.managed = d.reason == KVC_RESOURCE_REASON_MANAGED ? 1 : 0;
    d.reason_text = reason_text(d.reason);
    while (!cfg.kv_resources[d.managed_with].same_class(r)) ++d.managed_with;
    d.num_layers = uint32_t(r.layers.size());
    d.kv_heads = r.kv_heads;
    d.head_dim = r.head_dim;
    d.dtype = r.dtype;
    d.kv_factor = r.kv_factor;
    d.layout = r.layout;
    d.window = r.window;
    d.group = grouping.layers[r.layers[0]].group;
    d.pool = grouping.groups[d.group].pool;
    d.block_bytes = grouping.groups[d.group].geometry.block_bytes;
    write_sized(out, d, "out");
  });
}

}  // extern "C"
