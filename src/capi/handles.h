// What the opaque C handles are.
#pragma once

#include <memory>

#include "core/cache.h"
#include "core/cache_config.h"
#include "kvcache/cache.h"
#include "kvcache/config.h"

struct kvc_config {
  kvc::CacheConfig cfg;
};

struct kvc_cache {
  std::unique_ptr<kvc::Cache> impl;
  // Expires with the handle: export and import handles (transfer_api.cpp)
  // keep a weak reference and know when their cache is gone.
  std::shared_ptr<const bool> alive = std::make_shared<const bool>(true);
};
