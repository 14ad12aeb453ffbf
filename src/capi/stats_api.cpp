// Statistics, reset and invariant-check shims.
#include "capi/cache_access.h"
#include "kvcache/stats.h"

using kvc::capi::cache_of;
using kvc::capi::guarded;

extern "C" {

KVC_API void kvc_cache_stats_init(kvc_cache_stats_t* stats) { kvc::capi::init_sized(stats); }

KVC_API kvc_status_t kvc_cache_get_stats(const kvc_cache_t* cache, kvc_cache_stats_t* out) {
  return guarded([&] {
    const kvc::Cache& c = cache_of(cache);
    kvc::capi::require(out, "out");
    const kvc::CacheStats s = c.stats();
    kvc_cache_stats_t d{};
    d.num_blocks = s.num_blocks;
    d.free_blocks = s.free_blocks;
    d.cached_blocks = s.cached_blocks;
    d.in_use_blocks = s.in_use_blocks;
    d.reused_blocks = s.reused_blocks;
    d.missed_blocks = s.missed_blocks;
    const uint64_t asked = s.reused_blocks + s.missed_blocks;
    d.hit_rate = asked == 0 ? 0.0 : double(s.reused_blocks) / double(asked);
    d.evicted_blocks = s.evicted_blocks;
    d.num_sequences = s.num_sequences;
    d.num_pinned = s.num_pinned;
    d.tree_nodes = s.tree_nodes;
    d.offloaded_blocks = s.host.offloaded_blocks;
    d.onboarded_blocks = s.host.onboarded_blocks;
    d.offloaded_bytes = s.host.offloaded_bytes;
    d.onboarded_bytes = s.host.onboarded_bytes;
    d.host_blocks = s.host_blocks;
    d.host_free_blocks = s.host_free_blocks;
    d.host_cached_blocks = s.host_cached_blocks;
    kvc::capi::write_sized(out, d, "out");
  });
}

KVC_API void kvc_group_stats_init(kvc_group_stats_t* stats) { kvc::capi::init_sized(stats); }

KVC_API kvc_status_t kvc_cache_get_group_stats(const kvc_cache_t* cache, uint32_t group,
                                               kvc_group_stats_t* out) {
  return guarded([&] {
    const kvc::Cache& c = cache_of(cache);
    kvc::capi::require(out, "out");
    const kvc::GroupSummary g = c.group_stats(group);  // checks the range
    kvc_group_stats_t d{};
    d.pool = g.pool;
    d.in_use_blocks = g.counts.in_use_blocks;
    d.cached_blocks = g.counts.cached_blocks;
    d.pool_free_blocks = g.pool_free_blocks;
    d.reused_blocks = g.counts.reused_blocks;
    d.missed_blocks = g.counts.missed_blocks;
    d.evicted_blocks = g.counts.evicted_blocks;
    d.released_blocks = g.counts.released_blocks;
    kvc::capi::write_sized(out, d, "out");
  });
}

KVC_API kvc_status_t kvc_cache_reset_reuse(kvc_cache_t* cache) {
  return guarded([&] {
    kvc::Cache& c = cache_of(cache);
    c.reset_reuse();
  });
}

KVC_API kvc_status_t kvc_cache_check(const kvc_cache_t* cache) {
  return guarded([&] {
    const kvc::Cache& c = cache_of(cache);
    c.check_invariants();
  });
}

}  // extern "C"
