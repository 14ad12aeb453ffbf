// The tiers-below-the-tree shims (tiers.h): the disk tier's settings, the
// per-tier statistics, the flush of queued writes.
#include <cstring>
#include <string>

#include "capi/cache_access.h"
#include "capi/guard.h"
#include "capi/handles.h"
#include "kvcache/tiers.h"

using kvc::capi::cache_of;
using kvc::capi::guarded;
using kvc::capi::require;

namespace {

// The C tier a store's name stands for (BlockStore::name()).
bool tier_of(const char* name, kvc_tier_t* out) {
  if (std::strcmp(name, "disk") == 0) *out = KVC_TIER_DISK;
  else if (std::strcmp(name, "remote") == 0) *out = KVC_TIER_REMOTE;
  else return false;
  return true;
}

}  // namespace

extern "C" {

KVC_API kvc_status_t kvc_config_set_disk_cache(kvc_config_t* config, const char* directory,
                                               uint64_t bytes) {
  return guarded([&] {
    require(config, "config");
    const std::string dir = directory != nullptr ? directory : "";
    if (dir.empty() && bytes != 0)
      kvc::invalid_argument("disk cache bytes must be 0 without a directory, got " +
                            std::to_string(bytes));
    if (!dir.empty() && bytes == 0)
      kvc::invalid_argument("disk cache bytes must be > 0 for directory '" + dir + "', got 0");
    config->cfg.stores.disk_dir = dir;
    config->cfg.stores.disk_bytes = bytes;
  });
}

KVC_API kvc_status_t kvc_config_get_disk_cache(const kvc_config_t* config,
                                               const char** directory, uint64_t* bytes) {
  return guarded([&] {
    require(config, "config");
    if (directory != nullptr) *directory = config->cfg.stores.disk_dir.c_str();
    if (bytes != nullptr) *bytes = config->cfg.stores.disk_bytes;
  });
}

KVC_API void kvc_tier_stats_init(kvc_tier_stats_t* stats) { kvc::capi::init_sized(stats); }

KVC_API kvc_status_t kvc_cache_get_tier_stats(const kvc_cache_t* cache, kvc_tier_t tier,
                                              kvc_tier_stats_t* out) {
  return guarded([&] {
    const kvc::Cache& c = cache_of(cache);
    require(out, "out");
    if (tier != KVC_TIER_DISK && tier != KVC_TIER_REMOTE)
      kvc::invalid_argument("tier must be KVC_TIER_DISK (2) or KVC_TIER_REMOTE (3), got " +
                            std::to_string(tier) + " (primary and host: kvc_cache_get_stats)");
    for (const kvc::StoreTierReport& r : c.tier_reports()) {
      kvc_tier_t t = 0;
      if (!tier_of(r.name, &t) || t != tier) continue;
      kvc_tier_stats_t d{};
      d.tier = t;
      d.blocks = r.io.blocks;
      d.bytes = r.io.bytes;
      d.capacity_bytes = r.io.capacity_bytes;
      d.hits = r.io.hits;
      d.misses = r.io.misses;
      d.rejected = r.io.rejected;
      d.onboarded_blocks = r.onboarded_blocks;
      d.onboarded_bytes = r.onboarded_bytes;
      d.offered_blocks = r.offered_blocks;
      d.stored_blocks = r.io.stores;
      d.dropped_blocks = r.io.drops;
      d.errors = r.io.errors;
      d.evicted_blocks = r.io.evictions;
      d.queued_blocks = r.io.queued;
      d.load_count = r.io.load.count;
      d.load_p50_us = r.io.load.p50_us;
      d.load_p99_us = r.io.load.p99_us;
      d.load_max_us = r.io.load.max_us;
      d.write_count = r.io.write.count;
      d.write_p50_us = r.io.write.p50_us;
      d.write_p99_us = r.io.write.p99_us;
      d.write_max_us = r.io.write.max_us;
      kvc::capi::write_sized(out, d, "out");
      return KVC_OK;
    }
    kvc::fail(KVC_ERR_NOT_FOUND, std::string("this cache has no ") +
                                     (tier == KVC_TIER_DISK ? "disk tier (kvc_config_set_disk_cache)"
                                                            : "remote tier"));
  });
}

KVC_API kvc_status_t kvc_cache_flush_tiers(kvc_cache_t* cache) {
  return guarded([&] {
    kvc::Cache& c = cache_of(cache);
    c.flush_tiers();
  });
}

}  // extern "C"
