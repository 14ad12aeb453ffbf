// What the opaque C handles are.
#pragma once

#include <memory>
#include <mutex>
#include <unordered_set>

#include "core/cache.h"
#include "core/cache_config.h"
#include "kvcache/cache.h"
#include "kvcache/config.h"
#include "kvcache/transfer.h"

namespace kvc::capi {

// The exports and imports open on a cache (transfer_api.cpp). Destroying
// the cache detaches them: their handles stay, naming no cache.
class OpenTransfers {
 public:
  OpenTransfers() = default;
  OpenTransfers(const OpenTransfers&) = delete;
  OpenTransfers& operator=(const OpenTransfers&) = delete;
  ~OpenTransfers();
  void add(kvc_export_t* e);
  void remove(kvc_export_t* e);
  void add(kvc_import_t* i);
  void remove(kvc_import_t* i);

 private:
  std::mutex mutex_;
  std::unordered_set<kvc_export_t*> exports_;
  std::unordered_set<kvc_import_t*> imports_;
};

}  // namespace kvc::capi

struct kvc_config {
  kvc::CacheConfig cfg;
};

struct kvc_cache {
  std::unique_ptr<kvc::Cache> impl;
  // After impl: destroyed first, so open transfers are detached before the
  // cache goes.
  kvc::capi::OpenTransfers transfers;
};
