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
};
