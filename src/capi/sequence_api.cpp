// Sequence shims: argument checks and conversions, no logic, no lock (the
// kvc::Cache facade locks).
#include "capi/cache_access.h"
#include "kvcache/sequence.h"

using kvc::capi::cache_of;
using kvc::capi::guarded;
using kvc::capi::refused;
using kvc::capi::require;
using kvc::capi::require_array;

namespace {

kvc::SequenceOptions options_of(const kvc_sequence_options_t* in) {
  kvc::SequenceOptions o;
  if (in == nullptr) return o;
  kvc_sequence_options_t defaults = KVC_SEQUENCE_OPTIONS_INIT;
  const kvc_sequence_options_t v = kvc::capi::read_sized(in, defaults, "options");
  o.prompt_priority = v.prompt_priority;
  o.decode_priority = v.decode_priority;
  o.has_lora = v.has_lora;
  o.lora_id = v.lora_id;
  o.has_salt = v.salt != nullptr;
  if (v.salt == nullptr && v.salt_size > 0)
    kvc::invalid_argument("options->salt must not be NULL when options->salt_size is " +
                          std::to_string(v.salt_size));
  if (o.has_salt) o.salt.assign(static_cast<const char*>(v.salt), v.salt_size);
  require_array(v.extra_keys, v.num_extra_keys, "options->extra_keys", "options->num_extra_keys");
  for (size_t i = 0; i < v.num_extra_keys; ++i) {
    const kvc_extra_key_t& k = v.extra_keys[i];
    if (k.data == nullptr && k.size > 0)
      kvc::invalid_argument("options->extra_keys[" + std::to_string(i) +
                            "].data must not be NULL when its size is " + std::to_string(k.size));
    kvc::ExtraKey e;
    e.offset = k.offset;
    e.length = k.length;
    if (k.size > 0) e.data.assign(static_cast<const char*>(k.data), k.size);
    o.extra_keys.push_back(std::move(e));
  }
  require_array(v.retention_ranges, v.num_retention_ranges, "options->retention_ranges",
                "options->num_retention_ranges");
  for (size_t i = 0; i < v.num_retention_ranges; ++i) {
    const kvc_retention_range_t& r = v.retention_ranges[i];
    if (r.reserved != 0)  // kept zero so a later version can give it a meaning
      kvc::invalid_argument("options->retention_ranges[" + std::to_string(i) +
                            "].reserved must be 0, got " + std::to_string(r.reserved));
    kvc::RetentionRange e;
    e.start = r.start;
    e.end = r.end;
    e.priority = r.priority;
    e.duration_ms = r.duration_ms;
    o.retention_ranges.push_back(e);
  }
  o.decode_duration_ms = v.decode_duration_ms;
  return o;
}

void require_tokens(const int32_t* tokens, size_t n) {
  require_array(tokens, n, "tokens", "num_tokens");
}

}  // namespace

extern "C" {

KVC_API void kvc_sequence_options_init(kvc_sequence_options_t* options) {
  if (options == nullptr) return;
  *options = kvc_sequence_options_t KVC_SEQUENCE_OPTIONS_INIT;
}

KVC_API void kvc_sequence_desc_init(kvc_sequence_desc_t* desc) { kvc::capi::init_sized(desc); }

KVC_API kvc_status_t kvc_sequence_add(kvc_cache_t* cache, uint64_t id, const int32_t* tokens,
                                      size_t num_tokens, const kvc_sequence_options_t* options,
                                      void* stream, uint64_t* cached_tokens) {
  return guarded([&]() -> kvc_status_t {
    kvc::Cache& c = cache_of(cache);
    require_tokens(tokens, num_tokens);
    const kvc::SequenceOptions o = options_of(options);
    uint64_t cached = 0;
    kvc::Refusal refusal;
    if (!c.add(id, tokens, num_tokens, o, stream, &cached, &refusal)) return refused(refusal);
    if (cached_tokens != nullptr) *cached_tokens = cached;
    return KVC_OK;
  });
}

KVC_API kvc_status_t kvc_sequence_extend(kvc_cache_t* cache, uint64_t id, const int32_t* tokens,
                                         size_t num_tokens, void* stream) {
  return guarded([&]() -> kvc_status_t {
    kvc::Cache& c = cache_of(cache);
    require_tokens(tokens, num_tokens);
    kvc::Refusal refusal;
    if (!c.extend(id, tokens, num_tokens, stream, &refusal)) return refused(refusal);
    return KVC_OK;
  });
}

KVC_API kvc_status_t kvc_sequence_commit(kvc_cache_t* cache, uint64_t id, uint64_t num_computed) {
  return guarded([&] {
    kvc::Cache& c = cache_of(cache);
    c.commit(id, num_computed);
  });
}

KVC_API kvc_status_t kvc_sequence_rewind(kvc_cache_t* cache, uint64_t id, uint64_t num_tokens) {
  return guarded([&] {
    kvc::Cache& c = cache_of(cache);
    c.rewind(id, num_tokens);
  });
}

KVC_API kvc_status_t kvc_sequence_fork(kvc_cache_t* cache, uint64_t parent, uint64_t child) {
  return guarded([&] {
    kvc::Cache& c = cache_of(cache);
    c.fork(parent, child);
  });
}

KVC_API kvc_status_t kvc_sequence_remove(kvc_cache_t* cache, uint64_t id) {
  return guarded([&] {
    kvc::Cache& c = cache_of(cache);
    c.remove(id);
  });
}

KVC_API kvc_status_t kvc_sequence_pin(kvc_cache_t* cache, uint64_t id) {
  return guarded([&] {
    kvc::Cache& c = cache_of(cache);
    c.pin(id);
  });
}

KVC_API kvc_status_t kvc_sequence_unpin(kvc_cache_t* cache, uint64_t id) {
  return guarded([&] {
    kvc::Cache& c = cache_of(cache);
    c.unpin(id);
  });
}

KVC_API kvc_status_t kvc_sequence_describe(const kvc_cache_t* cache, uint64_t id,
                                           kvc_sequence_desc_t* out) {
  return guarded([&] {
    const kvc::Cache& c = cache_of(cache);
    require(out, "out");
    const kvc::SequenceSummary q = c.describe_sequence(id);
    kvc_sequence_desc_t d{};
    d.prompt_priority = q.prompt_priority;
    d.decode_priority = q.decode_priority;
    d.num_tokens = q.num_tokens;
    d.prompt_tokens = q.prompt_tokens;
    d.cached_tokens = q.cached_tokens;
    d.committed_tokens = q.committed_tokens;
    d.num_blocks = q.num_blocks;
    kvc::capi::write_sized(out, d, "out");
  });
}

KVC_API kvc_status_t kvc_sequence_block_ids(const kvc_cache_t* cache, uint64_t id,
                                            uint32_t group, int32_t* ids, size_t capacity,
                                            size_t* count) {
  return guarded([&] {
    const kvc::Cache& c = cache_of(cache);
    require(count, "count");
    require_array(ids, capacity, "ids", "capacity");
    const kvc::TableSize size = c.sequence_block_ids(id, group, ids, capacity);
    *count = size.needed;
    if (!size.fits)
      kvc::fail(KVC_ERR_BUFFER_TOO_SMALL, "ids holds " + std::to_string(capacity) +
                                              " entries but sequence " + std::to_string(id) +
                                              " has " + std::to_string(size.needed) + " blocks");
  });
}

KVC_API kvc_status_t kvc_sequence_blocks_needed(const kvc_cache_t* cache, uint64_t id,
                                                uint64_t num_tokens, uint64_t* out) {
  return guarded([&] {
    const kvc::Cache& c = cache_of(cache);
    require(out, "out");
    *out = c.blocks_needed(id, num_tokens);
  });
}

KVC_API kvc_status_t kvc_cache_advance_clock(kvc_cache_t* cache, uint64_t milliseconds) {
  return guarded([&] {
    kvc::Cache& c = cache_of(cache);
    c.advance_clock(milliseconds);
  });
}

KVC_API kvc_status_t kvc_cache_probe(const kvc_cache_t* cache, const int32_t* tokens,
                                     size_t num_tokens, const kvc_sequence_options_t* options,
                                     uint64_t* cached_tokens) {
  return guarded([&] {
    const kvc::Cache& c = cache_of(cache);
    require_tokens(tokens, num_tokens);
    require(cached_tokens, "cached_tokens");
    const kvc::SequenceOptions o = options_of(options);
    *cached_tokens = c.probe(tokens, num_tokens, o);
  });
}

}  // extern "C"
