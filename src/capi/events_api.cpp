// Event shims (events.h): argument checks and conversions; the kvc::Cache
// facade locks.
#include <algorithm>
#include <string>
#include <vector>

#include "capi/cache_access.h"
#include "capi/sequence_options.h"
#include "core/prompt_hashes.h"
#include "kvcache/events.h"

using kvc::capi::cache_of;
using kvc::capi::guarded;
using kvc::capi::require;
using kvc::capi::require_array;

namespace {

// Told without an exception: asking with a small buffer first is a normal
// way to learn the size.
kvc_status_t too_small(const char* buffer, size_t have, size_t needed, const char* unit) {
  kvc::capi::set_last_error(std::string(buffer) + " holds " + std::to_string(have) + " " + unit +
                            " but " + std::to_string(needed) + " are needed");
  return KVC_ERR_BUFFER_TOO_SMALL;
}

}  // namespace

extern "C" {

KVC_API void kvc_event_drain_init(kvc_event_drain_t* drain) { kvc::capi::init_sized(drain); }

KVC_API kvc_status_t kvc_cache_drain_events(kvc_cache_t* cache, kvc_event_t* events,
                                            size_t capacity, int32_t* tokens,
                                            size_t token_capacity, kvc_event_drain_t* result) {
  return guarded([&] {
    kvc::Cache& c = cache_of(cache);
    require(result, "result");
    require_array(events, capacity, "events", "capacity");
    require_array(tokens, token_capacity, "tokens", "token_capacity");
    kvc_event_drain_t d{};
    c.drain_events(events, capacity, tokens, token_capacity, d);
    kvc::capi::write_sized(result, d, "result");
  });
}

KVC_API kvc_status_t kvc_cache_snapshot(const kvc_cache_t* cache, kvc_snapshot_entry_t* entries,
                                        size_t capacity, size_t* count, uint64_t* event_id) {
  return guarded([&]() -> kvc_status_t {
    const kvc::Cache& c = cache_of(cache);
    require(count, "count");
    require_array(entries, capacity, "entries", "capacity");
    std::vector<kvc_snapshot_entry_t> all;
    uint64_t id = 0;
    c.snapshot(all, &id);
    *count = all.size();
    if (all.size() > capacity) return too_small("entries", capacity, all.size(), "entries");
    std::copy(all.begin(), all.end(), entries);
    if (event_id != nullptr) *event_id = id;
    return KVC_OK;
  });
}

KVC_API kvc_status_t kvc_block_hashes(const kvc_config_t* config, const int32_t* tokens,
                                      size_t num_tokens, const kvc_sequence_options_t* options,
                                      uint64_t* hashes, size_t capacity, size_t* count) {
  return guarded([&]() -> kvc_status_t {
    require(config, "config");
    require(count, "count");
    require_array(tokens, num_tokens, "tokens", "num_tokens");
    require_array(hashes, capacity, "hashes", "capacity");
    const kvc::SequenceOptions o = kvc::capi::options_of(options);
    const kvc::CacheConfig& cfg = config->cfg;
    const size_t blocks = num_tokens / cfg.tokens_per_block;
    if (blocks > capacity) {
      *count = blocks;
      return too_small("hashes", capacity, blocks, "hashes (one per full block)");
    }
    kvc::prompt_block_hashes(cfg, tokens, num_tokens, o, hashes);
    *count = blocks;
    return KVC_OK;
  });
}

}  // extern "C"
