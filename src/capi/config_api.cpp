// The config object's shims: NULL checks, single-value checks, no logic.
// Every setter changes nothing when it fails.
#include <algorithm>

#include "capi/guard.h"
#include "capi/handles.h"

using kvc::capi::guarded;
using kvc::capi::require;

extern "C" {

KVC_API kvc_status_t kvc_config_create(kvc_config_t** out) {
  return guarded([&] {
    require(out, "out");
    *out = new kvc_config();
  });
}

KVC_API kvc_status_t kvc_config_clone(const kvc_config_t* config, kvc_config_t** out) {
  return guarded([&] {
    require(config, "config");
    require(out, "out");
    *out = new kvc_config(*config);
  });
}

KVC_API void kvc_config_destroy(kvc_config_t* config) { delete config; }

KVC_API kvc_status_t kvc_config_validate(const kvc_config_t* config) {
  return guarded([&] {
    require(config, "config");
    config->cfg.validate();
  });
}

KVC_API kvc_status_t kvc_config_set_kv_heads(kvc_config_t* config, uint32_t kv_heads) {
  return guarded([&] {
    require(config, "config");
    kvc::CacheConfig::check_kv_heads(kv_heads, "kv_heads");
    config->cfg.claim_global_shape("kv_heads");
    config->cfg.kv_heads.assign(1, kv_heads);
  });
}

KVC_API kvc_status_t kvc_config_set_kv_heads_per_layer(kvc_config_t* config,
                                                       const uint32_t* kv_heads, size_t count) {
  return guarded([&] {
    require(config, "config");
    if (count == 0) kvc::invalid_argument("kv_heads count must be > 0, got 0");
    require(kv_heads, "kv_heads");
    for (size_t i = 0; i < count; ++i)
      kvc::CacheConfig::check_kv_heads(kv_heads[i], ("kv_heads[" + std::to_string(i) + "]").c_str());
    config->cfg.claim_global_shape("kv_heads_per_layer");
    config->cfg.kv_heads.assign(kv_heads, kv_heads + count);
  });
}

KVC_API kvc_status_t kvc_config_get_kv_heads(const kvc_config_t* config, uint32_t layer,
                                             uint32_t* out) {
  return guarded([&] {
    require(config, "config");
    require(out, "out");
    const auto& h = config->cfg.kv_heads;
    if (h.empty()) kvc::invalid_argument("kv_heads is not set");
    if (h.size() > 1 && layer >= h.size())
      kvc::invalid_argument("layer must be < " + std::to_string(h.size()) +
                            " (entries of the per-layer kv_heads), got " + std::to_string(layer));
    *out = h.size() == 1 ? h[0] : h[layer];
  });
}

KVC_API kvc_status_t kvc_config_set_attention_windows(kvc_config_t* config,
                                                      const uint32_t* windows, size_t count) {
  return guarded([&] {
    require(config, "config");
    if (count > 0) require(windows, "windows");
    for (size_t i = 0; i < count; ++i) kvc::CacheConfig::check_window(windows[i], i);
    config->cfg.claim_global_shape("attention_windows");
    config->cfg.windows.assign(windows, windows + count);
  });
}

KVC_API kvc_status_t kvc_config_get_attention_window(const kvc_config_t* config, uint32_t layer,
                                                     uint32_t* out) {
  return guarded([&] {
    require(config, "config");
    require(out, "out");
    *out = config->cfg.window_of(layer);
  });
}

KVC_API kvc_status_t kvc_config_set_device(kvc_config_t* config, kvc_device_kind_t kind,
                                           int32_t ordinal) {
  return guarded([&] {
    require(config, "config");
    kvc::CacheConfig::check_device(kind, ordinal);
    config->cfg.device_kind = kind;
    config->cfg.device_ordinal = ordinal;
    config->cfg.rank_ordinals.clear();  // one rank
  });
}

KVC_API kvc_status_t kvc_config_set_ranks(kvc_config_t* config, kvc_device_kind_t kind,
                                          const int32_t* ordinals, uint32_t num_ranks) {
  return guarded([&] {
    require(config, "config");
    require(ordinals, "ordinals");
    kvc::CacheConfig::check_ranks(kind, ordinals, num_ranks);
    config->cfg.device_kind = kind;
    // CPU ordinals only name the ranks' host pools; the device is host memory.
    config->cfg.device_ordinal = kind == KVC_DEVICE_CPU ? 0 : ordinals[0];
    if (num_ranks == 1) config->cfg.rank_ordinals.clear();
    else config->cfg.rank_ordinals.assign(ordinals, ordinals + num_ranks);
  });
}

KVC_API kvc_status_t kvc_config_get_ranks(const kvc_config_t* config, int32_t* ordinals,
                                          uint32_t capacity, uint32_t* num_ranks) {
  return guarded([&] {
    require(config, "config");
    require(num_ranks, "num_ranks");
    const kvc::CacheConfig& c = config->cfg;
    const uint32_t n = c.num_ranks();
    if (capacity != 0) require(ordinals, "ordinals");
    if (capacity < n) {
      *num_ranks = n;
      kvc::fail(KVC_ERR_BUFFER_TOO_SMALL, "ordinals has room for " + std::to_string(capacity) +
                                              " ranks, the config has " + std::to_string(n));
    }
    for (uint32_t r = 0; r < n; ++r) ordinals[r] = c.rank_ordinal(r);
    *num_ranks = n;
  });
}

KVC_API kvc_status_t kvc_config_get_device(const kvc_config_t* config, kvc_device_kind_t* kind,
                                           int32_t* ordinal) {
  return guarded([&] {
    require(config, "config");
    if (kind != nullptr) *kind = config->cfg.device_kind;
    if (ordinal != nullptr) *ordinal = config->cfg.device_ordinal;
  });
}

// Setter and getter of one plain setting. CHECK validates the new value `v`
// before anything changes.
#define KVC_CONFIG_ACCESSORS(NAME, CTYPE, CHECK)                                       \
  KVC_API kvc_status_t kvc_config_set_##NAME(kvc_config_t* config, CTYPE v) {          \
    return guarded([&] {                                                               \
      require(config, "config");                                                       \
      CHECK;                                                                           \
      config->cfg.NAME = v;                                                            \
    });                                                                                \
  }                                                                                    \
  KVC_API kvc_status_t kvc_config_get_##NAME(const kvc_config_t* config, CTYPE* out) { \
    return guarded([&] {                                                               \
      require(config, "config");                                                       \
      require(out, "out");                                                             \
      *out = config->cfg.NAME;                                                         \
    });                                                                                \
  }

using Cfg = kvc::CacheConfig;
// The global attention shape: refused once the config has KV resources
// (kv_resource.h), recorded so that kvc_config_add_kv_resource refuses after.
KVC_CONFIG_ACCESSORS(num_layers, uint32_t,
                     (Cfg::check_num_layers(v), config->cfg.claim_global_shape("num_layers")))
KVC_CONFIG_ACCESSORS(head_dim, uint32_t,
                     (Cfg::check_head_dim(v), config->cfg.claim_global_shape("head_dim")))
KVC_CONFIG_ACCESSORS(dtype, kvc_dtype_t,
                     (Cfg::check_dtype(v), config->cfg.claim_global_shape("dtype")))
KVC_CONFIG_ACCESSORS(kv_factor, uint32_t,
                     (Cfg::check_kv_factor(v), config->cfg.claim_global_shape("kv_factor")))
KVC_CONFIG_ACCESSORS(layout, kvc_layout_t,
                     (Cfg::check_layout(v), config->cfg.claim_global_shape("layout")))
KVC_CONFIG_ACCESSORS(tokens_per_block, uint32_t, Cfg::check_tokens_per_block(v))
KVC_CONFIG_ACCESSORS(primary_bytes, uint64_t, (void)v)
KVC_CONFIG_ACCESSORS(max_tokens, uint64_t, (void)v)
KVC_CONFIG_ACCESSORS(max_primary_bytes, uint64_t, (void)v)
KVC_CONFIG_ACCESSORS(free_gpu_memory_fraction, double, Cfg::check_fraction(v))
KVC_CONFIG_ACCESSORS(host_cache_bytes, uint64_t, (void)v)
KVC_CONFIG_ACCESSORS(secondary_offload_min_priority, uint32_t,
                     Cfg::check_priority(v, "secondary_offload_min_priority"))
KVC_CONFIG_ACCESSORS(block_reuse, bool, (void)v)
KVC_CONFIG_ACCESSORS(partial_reuse, bool, (void)v)
KVC_CONFIG_ACCESSORS(copy_on_partial_reuse, bool, (void)v)
KVC_CONFIG_ACCESSORS(event_buffer_size, uint32_t, Cfg::check_event_buffer_size(v))
// Every 64-bit seed is valid: nothing to check; the setter stores it
// (CacheConfig::event_hash_seed, read by EventLog and kvc_block_hashes).
KVC_CONFIG_ACCESSORS(event_hash_seed, uint64_t, (void)v)
KVC_CONFIG_ACCESSORS(manual_clock, bool, (void)v)

}  // extern "C"
