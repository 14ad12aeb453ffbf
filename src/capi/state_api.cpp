// State resource shims (kvcache/state.h): config setters with their single-
// value checks, and the cache's resource descriptions and slot indices.
#include <string>

#include "kvcache/state.h"

#include "capi/cache_access.h"
#include "capi/guard.h"
#include "capi/handles.h"
#include "base/dtype.h"

using kvc::capi::cache_of;
using kvc::capi::guarded;
using kvc::capi::require;
using kvc::capi::write_sized;

namespace {

void check_dim(uint32_t v, const char* name) {
  if (v == 0) kvc::invalid_argument(std::string(name) + " must be > 0, got 0");
  if (v > (1u << 20))
    kvc::invalid_argument(std::string(name) + " must be at most 1048576, got " + std::to_string(v));
}

void check_state_dtype(kvc_dtype_t v) {
  if (v != KVC_DTYPE_F32 && v != KVC_DTYPE_F16 && v != KVC_DTYPE_BF16)
    kvc::invalid_argument("state dtype must be KVC_DTYPE_F32 (1), KVC_DTYPE_F16 (2) or "
                          "KVC_DTYPE_BF16 (3), got " + std::to_string(v));
}

constexpr uint64_t kMaxSlotBytes = uint64_t(1) << 40;

// Appends r (checked: the slot's bytes at most 2^40, the resource count).
void add(kvc_config_t* config, const kvc::StateResource& r, uint64_t slot_bytes, uint32_t* index) {
  require(index, "index");
  if (slot_bytes > kMaxSlotBytes)
    kvc::invalid_argument("one slot of the resource would hold " + std::to_string(slot_bytes) +
                          " bytes, more than 2^40");
  auto& list = config->cfg.resources;
  if (list.size() >= KVC_STATE_MAX_RESOURCES)
    kvc::invalid_argument("the config already has the most state resources (" +
                          std::to_string(KVC_STATE_MAX_RESOURCES) + ")");
  list.push_back(r);
  *index = uint32_t(list.size() - 1);
}

}  // namespace

extern "C" {

KVC_API kvc_status_t kvc_config_add_ssm_state(kvc_config_t* config, uint32_t num_heads,
                                              uint32_t head_dim, uint32_t d_state,
                                              kvc_dtype_t dtype, uint32_t* index) {
  return guarded([&] {
    require(config, "config");
    check_dim(num_heads, "num_heads");
    check_dim(head_dim, "head_dim");
    check_dim(d_state, "d_state");
    check_state_dtype(dtype);
    kvc::StateResource r;
    r.kind = KVC_RESOURCE_SSM;
    r.num_heads = num_heads;
    r.head_dim = head_dim;
    r.d_state = d_state;
    r.dtype = dtype;
    // At most 2^60 elements of at most 4 bytes: no overflow.
    add(config, r, uint64_t(num_heads) * head_dim * d_state * kvc::dtype_size(dtype), index);
  });
}

KVC_API kvc_status_t kvc_config_add_conv_state(kvc_config_t* config, uint32_t conv_dim,
                                               uint32_t d_conv, kvc_dtype_t dtype,
                                               uint32_t* index) {
  return guarded([&] {
    require(config, "config");
    check_dim(conv_dim, "conv_dim");
    check_dim(d_conv, "d_conv");
    check_state_dtype(dtype);
    kvc::StateResource r;
    r.kind = KVC_RESOURCE_CONV;
    r.conv_dim = conv_dim;
    r.d_conv = d_conv;
    r.dtype = dtype;
    add(config, r, uint64_t(conv_dim) * d_conv * kvc::dtype_size(dtype), index);
  });
}

KVC_API kvc_status_t kvc_config_add_generic_state(kvc_config_t* config, uint64_t bytes,
                                                  uint64_t alignment, uint32_t* index) {
  return guarded([&] {
    require(config, "config");
    if (bytes == 0) kvc::invalid_argument("bytes must be > 0, got 0");
    if (alignment != 0 &&
        ((alignment & (alignment - 1)) != 0 || alignment > KVC_STATE_MAX_ALIGNMENT))
      kvc::invalid_argument("alignment must be 0 or a power of two up to " +
                            std::to_string(KVC_STATE_MAX_ALIGNMENT) + ", got " +
                            std::to_string(alignment));
    kvc::StateResource r;
    r.kind = KVC_RESOURCE_GENERIC;
    r.bytes = bytes;
    r.alignment = alignment;
    add(config, r, bytes, index);
  });
}

KVC_API kvc_status_t kvc_config_add_unpaged_resource(kvc_config_t* config,
                                                     uint64_t bytes_per_token,
                                                     uint64_t max_tokens, uint32_t* index) {
  return guarded([&] {
    require(config, "config");
    if (bytes_per_token == 0) kvc::invalid_argument("bytes_per_token must be > 0, got 0");
    if (max_tokens == 0) kvc::invalid_argument("max_tokens must be > 0, got 0");
    kvc::StateResource r;
    r.kind = KVC_RESOURCE_UNPAGED;
    r.bytes_per_token = bytes_per_token;
    r.max_tokens = max_tokens;
    if (bytes_per_token > kMaxSlotBytes / max_tokens)
      kvc::invalid_argument("bytes_per_token * max_tokens (" + std::to_string(bytes_per_token) +
                            " * " + std::to_string(max_tokens) + ") must be at most 2^40 bytes");
    add(config, r, bytes_per_token * max_tokens, index);
  });
}

KVC_API kvc_status_t kvc_config_get_num_resources(const kvc_config_t* config, uint32_t* out) {
  return guarded([&] {
    require(config, "config");
    require(out, "out");
    *out = uint32_t(config->cfg.resources.size());
  });
}

KVC_API kvc_status_t kvc_config_set_max_state_slots(kvc_config_t* config, uint32_t slots) {
  return guarded([&] {
    require(config, "config");
    if (slots > kvc::CacheConfig::kMaxStateSlots)
      kvc::invalid_argument("max_state_slots must be at most " +
                            std::to_string(kvc::CacheConfig::kMaxStateSlots) + ", got " +
                            std::to_string(slots));
    config->cfg.max_state_slots = slots;
  });
}

KVC_API kvc_status_t kvc_config_get_max_state_slots(const kvc_config_t* config, uint32_t* out) {
  return guarded([&] {
    require(config, "config");
    require(out, "out");
    *out = config->cfg.max_state_slots;
  });
}

KVC_API kvc_status_t kvc_config_set_max_state_snapshots(kvc_config_t* config, uint32_t slots) {
  return guarded([&] {
    require(config, "config");
    if (slots > kvc::CacheConfig::kMaxStateSlots && slots != KVC_STATE_SNAPSHOTS_NONE)
      kvc::invalid_argument("max_state_snapshots must be at most " +
                            std::to_string(kvc::CacheConfig::kMaxStateSlots) +
                            " or KVC_STATE_SNAPSHOTS_NONE, got " + std::to_string(slots));
    config->cfg.max_state_snapshots = slots;
  });
}

KVC_API kvc_status_t kvc_config_get_max_state_snapshots(const kvc_config_t* config,
                                                        uint32_t* out) {
  return guarded([&] {
    require(config, "config");
    require(out, "out");
    *out = config->cfg.max_state_snapshots;
  });
}

KVC_API kvc_status_t kvc_sequence_publish_state(kvc_cache_t* cache, uint64_t id,
                                                uint64_t position, void* stream) {
  return guarded([&] { cache_of(cache).publish_state(id, position, stream); });
}

KVC_API void kvc_snapshot_stats_init(kvc_snapshot_stats_t* stats) {
  kvc::capi::init_sized(stats);
}

KVC_API kvc_status_t kvc_cache_get_snapshot_stats(const kvc_cache_t* cache,
                                                  kvc_snapshot_stats_t* out) {
  return guarded([&] {
    const kvc::Cache& c = cache_of(cache);
    require(out, "out");
    const kvc::Cache::SnapshotSummary s = c.snapshot_summary();
    kvc_snapshot_stats_t d{};
    d.num_slots = s.num_slots;
    d.slots_used = s.used;
    d.bytes_per_snapshot = s.bytes_per_snapshot;
    d.bytes = s.bytes;
    d.published = s.counts.published;
    d.hits = s.counts.hits;
    d.hit_tokens = s.counts.hit_tokens;
    d.restores = s.counts.restores;
    d.evicted = s.counts.evicted;
    d.dropped = s.counts.dropped;
    d.host_num_slots = s.host_num_slots;
    d.host_slots_used = s.host_used;
    d.host_bytes = s.host_bytes;
    d.offloaded = s.counts.offloaded;
    d.onboarded = s.counts.onboarded;
    d.host_evicted = s.counts.host_evicted;
    write_sized(out, d, "out");
  });
}

KVC_API void kvc_resource_desc_init(kvc_resource_desc_t* desc) { kvc::capi::init_sized(desc); }

KVC_API kvc_status_t kvc_cache_describe_resource(const kvc_cache_t* cache, uint32_t index,
                                                 kvc_resource_desc_t* out) {
  return guarded([&] {
    const kvc::Cache& c = cache_of(cache);
    require(out, "out");
    const kvc::Cache::ResourceSummary s = c.describe_resource(index);
    const kvc::ResourceLayout& l = c.state()->layout(index);  // fixed: its text outlives the call
    kvc_resource_desc_t d{};
    d.kind = l.spec.kind;
    d.managed = l.managed ? 1 : 0;
    d.reason = l.reason;
    d.reason_text = l.reason_text.c_str();
    d.dtype = l.spec.dtype;
    d.num_heads = l.spec.num_heads;
    d.head_dim = l.spec.head_dim;
    d.d_state = l.spec.d_state;
    d.conv_dim = l.spec.conv_dim;
    d.d_conv = l.spec.d_conv;
    d.n_groups = l.n_groups;
    d.num_slots = s.num_slots;
    d.slots_used = s.used;
    d.bytes_per_token = l.spec.bytes_per_token;
    d.max_tokens = l.spec.max_tokens;
    d.alignment = l.alignment;
    d.slot_bytes = l.slot_bytes;
    d.slot_stride = l.slot_stride;
    d.stride0 = l.stride0;
    d.stride1 = l.stride1;
    d.stride2 = l.stride2;
    d.base = s.base;
    write_sized(out, d, "out");
  });
}

KVC_API kvc_status_t kvc_batch_state_slots(const kvc_cache_t* cache, const uint64_t* ids,
                                           size_t count, uint32_t resource, int32_t* slots) {
  return guarded([&] {
    const kvc::Cache& c = cache_of(cache);
    if (count > 0) {
      require(ids, "ids");
      require(slots, "slots");
    }
    c.state_slots(ids, count, resource, slots);
  });
}

}  // extern "C"
