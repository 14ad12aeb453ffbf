// Paged KV resources of the config (kvcache/kv_resource.h): their checks,
// the per-layer settings derived from them, and each layer's geometry.
#include <algorithm>
#include <string>

#include "base/error.h"
#include "core/cache_config.h"

namespace kvc {

namespace {
constexpr uint32_t kMaxLayerId = (1u << 16) - 1;  // num_layers at most 2^16

std::string s(uint64_t v) { return std::to_string(v); }
}  // namespace

void CacheConfig::claim_global_shape(const char* name) {
  if (!kv_resources.empty())
    fail(KVC_ERR_INVALID_STATE,
         std::string("kvc_config_set_") + name + " is refused: the config has " +
             s(kv_resources.size()) +
             " KV resources (kvc_config_add_kv_resource), which describe every attention "
             "layer's shape");
  if (global_shape_setter.empty()) global_shape_setter = name;
}

uint32_t CacheConfig::add_kv_resource(KvResource r) {
  if (!global_shape_setter.empty())
    fail(KVC_ERR_INVALID_STATE,
         "kvc_config_add_kv_resource is refused: the global attention shape was set "
         "(kvc_config_set_" + global_shape_setter +
             "); describe the attention layers either with the global setters or with KV "
             "resources, not both (start from a new config)");
  if (kv_resources.size() >= kMaxKvResources)
    invalid_argument("the config already has the most KV resources (" + s(kMaxKvResources) + ")");
  if (r.layers.empty()) invalid_argument("desc->num_layers must be > 0, got 0");
  check_kv_heads(r.kv_heads, "desc->kv_heads");
  if (r.head_dim == 0) invalid_argument("desc->head_dim must be > 0, got 0");
  check_head_dim(r.head_dim);  // the messages below name the field without "desc->"
  check_dtype(r.dtype);
  check_kv_factor(r.kv_factor);
  check_layout(r.layout);
  if (r.window > (1u << 30))
    invalid_argument("desc->window must be <= 2^30 tokens (0 = full attention), got " +
                     s(r.window));
  for (size_t i = 0; i < r.layers.size(); ++i) {
    const uint32_t l = r.layers[i];
    if (l > kMaxLayerId)
      invalid_argument("desc->layers[" + s(i) + "] must be <= " + s(kMaxLayerId) + ", got " + s(l));
    if (i > 0 && l <= r.layers[i - 1])
      invalid_argument("desc->layers must be ascending and distinct: layers[" + s(i - 1) +
                       "] is " + s(r.layers[i - 1]) + ", layers[" + s(i) + "] is " + s(l));
    if (l < layer_kv_resource.size() && layer_kv_resource[l] != kNoResource)
      invalid_argument("desc->layers[" + s(i) + "] is layer " + s(l) +
                       ", which KV resource " + s(layer_kv_resource[l]) + " already has");
  }
  // Derive the per-layer settings (nothing above changed the config).
  const uint32_t index = uint32_t(kv_resources.size());
  const uint32_t n = std::max<uint32_t>(uint32_t(layer_kv_resource.size()), r.layers.back() + 1);
  layer_kv_resource.resize(n, kNoResource);
  for (uint32_t l : r.layers) layer_kv_resource[l] = index;
  kv_resources.push_back(std::move(r));
  num_layers = n;
  kv_heads.assign(n, 0);
  windows.assign(n, 0);
  for (uint32_t l = 0; l < n; ++l) {
    if (layer_kv_resource[l] == kNoResource) continue;
    const KvResource& k = kv_resources[layer_kv_resource[l]];
    kv_heads[l] = k.kv_heads;
    windows[l] = k.window;
  }
  const KvResource& first = kv_resources[0];
  head_dim = first.head_dim;
  dtype = first.dtype;
  kv_factor = first.kv_factor;
  layout = first.layout;
  return index;
}

bool CacheConfig::mixed_kv_geometry() const {
  for (const KvResource& r : kv_resources)
    if (!r.same_class(kv_resources[0])) return true;
  return false;
}

uint32_t CacheConfig::head_dim_of(uint32_t layer) const {
  return kv_resources.empty() ? head_dim : kv_resources[layer_kv_resource.at(layer)].head_dim;
}

kvc_dtype_t CacheConfig::dtype_of(uint32_t layer) const {
  return kv_resources.empty() ? dtype : kv_resources[layer_kv_resource.at(layer)].dtype;
}

uint32_t CacheConfig::kv_factor_of(uint32_t layer) const {
  return kv_resources.empty() ? kv_factor : kv_resources[layer_kv_resource.at(layer)].kv_factor;
}

kvc_layout_t CacheConfig::layout_of(uint32_t layer) const {
  return kv_resources.empty() ? layout : kv_resources[layer_kv_resource.at(layer)].layout;
}

}  // namespace kvc
