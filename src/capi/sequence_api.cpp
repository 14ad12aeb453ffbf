// Sequence shims: argument checks and conversions, no logic, no lock (the
// kvc::Cache facade locks).
#include "capi/cache_access.h"
#include "capi/sequence_options.h"
#include "kvcache/sequence.h"

using kvc::capi::cache_of;
using kvc::capi::options_of;
using kvc::capi::guarded;
using kvc::capi::refused;
using kvc::capi::require;
using kvc::capi::require_array;

namespace {

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

KVC_API kvc_status_t kvc_cache_make_room(kvc_cache_t* cache, uint64_t block_sets, void* stream,
                                         uint64_t* free_sets) {
  return guarded([&] {
    kvc::Cache& c = cache_of(cache);
    const uint64_t free = c.make_room(block_sets, stream);
    if (free_sets != nullptr) *free_sets = free;
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
