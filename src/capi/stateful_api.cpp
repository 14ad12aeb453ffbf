// Stateful mode shims (include/kvcache/stateful.h): argument checks of the
// C structs, then kvc::StatefulCache, which holds the lock and checks the
// rest.
#include <memory>
#include <string>

#include "capi/guard.h"
#include "capi/handles.h"
#include "capi/stateful_handle.h"

using kvc::capi::guarded;
using kvc::capi::init_sized;
using kvc::capi::read_sized;
using kvc::capi::require;
using kvc::capi::write_sized;

namespace {

kvc::StatefulCache& stateful_of(kvc_stateful_t* c) {
  require(c, "cache");
  return *c->impl;
}

const kvc::StatefulCache& stateful_of(const kvc_stateful_t* c) {
  require(c, "cache");
  return *c->impl;
}

// What a stateful cache reads of a config: the model spec and the device.
kvc::StatefulModel model_of(const kvc::CacheConfig& cfg) {
  cfg.validate_shape();
  for (size_t i = 0; i < cfg.windows.size(); ++i)
    if (cfg.windows[i] != 0)
      kvc::fail(KVC_ERR_UNSUPPORTED, "the stateful mode keeps every token: attention window [" +
                                         std::to_string(i) + "] = " +
                                         std::to_string(cfg.windows[i]) +
                                         " is not supported (set windows to 0)");
  if (!cfg.stores.disk_dir.empty())
    kvc::fail(KVC_ERR_UNSUPPORTED, "the stateful mode has no disk tier: disk cache '" +
                                       cfg.stores.disk_dir +
                                       "' is set (kvc_config_set_disk_cache(config, NULL, 0))");
  if (!cfg.stores.remote_url.empty())
    kvc::fail(KVC_ERR_UNSUPPORTED,
              "the stateful mode has no remote tier: a remote cache is set "
              "(kvc_config_set_remote_cache(config, NULL, NULL, 0))");
  if (cfg.num_ranks() > 1)
    kvc::fail(KVC_ERR_UNSUPPORTED, "the stateful mode has one device: the config has " +
                                       std::to_string(cfg.num_ranks()) +
                                       " ranks (kvc_config_set_ranks with 1 rank)");
  if (cfg.mixed_kv_geometry())
    kvc::fail(KVC_ERR_UNSUPPORTED,
              "the stateful mode has one geometry: the config has KV resources of different "
              "geometries (head_dim, dtype, kv_factor, layout)");
  kvc::StatefulModel m;
  m.num_layers = cfg.num_layers;
  for (uint32_t l = 0; l < cfg.num_layers; ++l) m.kv_heads.push_back(cfg.kv_heads_of(l));
  m.head_dim = cfg.head_dim;
  m.dtype = cfg.dtype;
  m.kv_factor = cfg.kv_factor;
  m.device_kind = cfg.device_kind;
  m.device_ordinal = cfg.device_ordinal;
  return m;
}

kvc::StatefulDecodeArgs decode_args_of(const kvc_stateful_decode_args_t* args) {
  static const kvc_stateful_decode_args_t defaults = KVC_STATEFUL_DECODE_ARGS_INIT;
  const kvc_stateful_decode_args_t a = read_sized(args, defaults, "args");
  kvc::StatefulDecodeArgs r;
  r.layer = a.layer;
  r.q_heads = a.q_heads;
  r.q_dtype = a.q_dtype;
  r.query = a.query;
  r.out = a.out;
  r.max_seq_len = a.max_seq_len;
  r.softmax_scale = a.softmax_scale;
  r.k_scale = a.k_scale;
  r.v_scale = a.v_scale;
  r.workspace = a.workspace;
  r.workspace_bytes = a.workspace_bytes;
  return r;
}

}  // namespace

extern "C" {

KVC_API void kvc_stateful_options_init(kvc_stateful_options_t* options) {
  const kvc_stateful_options_t init = KVC_STATEFUL_OPTIONS_INIT;
  if (options != nullptr) *options = init;
}

KVC_API void kvc_stateful_view_init(kvc_stateful_view_t* view) { init_sized(view); }
KVC_API void kvc_stateful_stats_init(kvc_stateful_stats_t* stats) { init_sized(stats); }
KVC_API void kvc_stateful_layer_stats_init(kvc_stateful_layer_stats_t* stats) {
  init_sized(stats);
}

KVC_API void kvc_stateful_append_args_init(kvc_stateful_append_args_t* args) {
  const kvc_stateful_append_args_t init = KVC_STATEFUL_APPEND_ARGS_INIT;
  if (args != nullptr) *args = init;
}

KVC_API void kvc_stateful_decode_args_init(kvc_stateful_decode_args_t* args) {
  const kvc_stateful_decode_args_t init = KVC_STATEFUL_DECODE_ARGS_INIT;
  if (args != nullptr) *args = init;
}

KVC_API kvc_status_t kvc_stateful_create(const kvc_config_t* config,
                                         const kvc_stateful_options_t* options,
                                         kvc_stateful_t** out) {
  return guarded([&] {
    require(config, "config");
    require(out, "out");
    static const kvc_stateful_options_t defaults = KVC_STATEFUL_OPTIONS_INIT;
    const kvc::StatefulOptions opt =
        kvc::StatefulOptions::from(read_sized(options, defaults, "options"));
    auto handle = std::make_unique<kvc_stateful>();
    handle->impl = std::make_unique<kvc::StatefulCache>(model_of(config->cfg), opt);
    *out = handle.release();
  });
}

KVC_API void kvc_stateful_destroy(kvc_stateful_t* cache) { delete cache; }

KVC_API kvc_status_t kvc_stateful_layer_view(const kvc_stateful_t* cache, uint32_t layer,
                                             kvc_stateful_view_t* view) {
  return guarded([&] {
    const kvc::StatefulCache& c = stateful_of(cache);
    require(view, "view");
    write_sized(view, c.view(layer), "view");
  });
}

KVC_API kvc_status_t kvc_stateful_get_lengths(const kvc_stateful_t* cache, uint32_t layer,
                                              uint32_t* lengths, uint32_t count) {
  return guarded([&] {
    const kvc::StatefulCache& c = stateful_of(cache);
    require(lengths, "lengths");
    const std::vector<uint32_t> v = c.lengths(layer);
    if (count < v.size())
      kvc::fail(KVC_ERR_BUFFER_TOO_SMALL, "lengths holds " + std::to_string(count) +
                                              " entries, the cache has batch " +
                                              std::to_string(v.size()));
    std::copy(v.begin(), v.end(), lengths);
  });
}

KVC_API kvc_status_t kvc_stateful_append(kvc_stateful_t* cache,
                                         const kvc_stateful_append_args_t* args, void* stream) {
  return guarded([&] {
    kvc::StatefulCache& c = stateful_of(cache);
    static const kvc_stateful_append_args_t defaults = KVC_STATEFUL_APPEND_ARGS_INIT;
    c.append(read_sized(args, defaults, "args"), stream);
  });
}

KVC_API kvc_status_t kvc_stateful_reorder(kvc_stateful_t* cache, const int32_t* beam_idx,
                                          uint32_t count, void* stream) {
  return guarded([&] { stateful_of(cache).reorder(beam_idx, count, stream); });
}

KVC_API kvc_status_t kvc_stateful_compact(kvc_stateful_t* cache, void* stream) {
  return guarded([&] { stateful_of(cache).compact(stream); });
}

KVC_API kvc_status_t kvc_stateful_trim(kvc_stateful_t* cache, uint32_t row,
                                       uint32_t num_tokens, void* stream) {
  return guarded([&] { stateful_of(cache).trim(row, num_tokens, stream); });
}

KVC_API kvc_status_t kvc_stateful_reset(kvc_stateful_t* cache, bool release_memory,
                                        void* stream) {
  return guarded([&] { stateful_of(cache).reset(release_memory, stream); });
}

KVC_API kvc_status_t kvc_stateful_export_row(kvc_stateful_t* cache, uint32_t row, void* buffer,
                                             uint64_t capacity, uint64_t* size, void* stream) {
  return guarded([&]() -> kvc_status_t {
    kvc::StatefulCache& c = stateful_of(cache);
    require(size, "size");
    const uint64_t need = c.export_row(row, buffer, capacity, stream);
    *size = need;
    if (capacity < need) {
      kvc::capi::set_last_error("buffer capacity " + std::to_string(capacity) +
                                " is less than the " + std::to_string(need) +
                                " bytes of row " + std::to_string(row) + "'s state");
      return KVC_ERR_BUFFER_TOO_SMALL;
    }
    return KVC_OK;
  });
}

KVC_API kvc_status_t kvc_stateful_import_row(kvc_stateful_t* cache, uint32_t row,
                                             const void* buffer, uint64_t size, void* stream) {
  return guarded([&] { stateful_of(cache).import_row(row, buffer, size, stream); });
}

KVC_API kvc_status_t kvc_stateful_decode_workspace_size(const kvc_stateful_t* cache,
                                                        const kvc_stateful_decode_args_t* args,
                                                        uint64_t* bytes) {
  return guarded([&] {
    const kvc::StatefulCache& c = stateful_of(cache);
    require(bytes, "bytes");
    *bytes = c.decode_workspace_bytes(decode_args_of(args));
  });
}

KVC_API kvc_status_t kvc_stateful_decode(kvc_stateful_t* cache,
                                         const kvc_stateful_decode_args_t* args, void* stream) {
  return guarded([&] { stateful_of(cache).decode(decode_args_of(args), stream); });
}

KVC_API kvc_status_t kvc_stateful_get_async_error(kvc_stateful_t* cache, void* stream,
                                                  kvc_status_t* async_error) {
  return guarded([&] {
    kvc::StatefulCache& c = stateful_of(cache);
    require(async_error, "async_error");
    const kvc::AsyncError e = c.async_error(stream);
    *async_error = e.status;
    if (e.status != KVC_OK) kvc::capi::set_last_error(e.message);
  });
}

KVC_API kvc_status_t kvc_stateful_get_stats(const kvc_stateful_t* cache,
                                            kvc_stateful_stats_t* stats) {
  return guarded([&] {
    const kvc::StatefulCache& c = stateful_of(cache);
    const kvc::StatefulStats s = c.stats();
    kvc_stateful_stats_t out{};
    out.num_layers = c.num_layers();
    out.bytes_allocated = s.bytes_allocated;
    out.peak_bytes = s.peak_bytes;
    out.kv_bytes = s.kv_bytes;
    out.table_bytes = s.table_bytes;
    out.reallocations = s.reallocations;
    out.reorders = s.reorders;
    out.table_entries_copied = s.table_entries_copied;
    out.compactions = s.compactions;
    write_sized(stats, out, "stats");
  });
}

KVC_API kvc_status_t kvc_stateful_get_layer_stats(const kvc_stateful_t* cache, uint32_t layer,
                                                  kvc_stateful_layer_stats_t* stats) {
  return guarded([&] {
    const kvc::StatefulCache& c = stateful_of(cache);
    require(stats, "stats");
    const kvc::StatefulLayerStats s = c.layer_stats(layer);
    kvc_stateful_layer_stats_t out{};
    out.layer = layer;
    out.capacity = s.capacity;
    out.growth_offset = s.growth_offset;
    out.bytes = s.bytes;
    out.reallocations = s.reallocations;
    out.last_growth_length = s.last_growth_length;
    out.max_length = s.max_length;
    write_sized(stats, out, "stats");
  });
}

}  // extern "C"
