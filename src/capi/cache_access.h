// Handle checks shared by the shims that work on a cache: the NULL check.
// The lock is kvc::Cache's own (its facade methods take it).
#pragma once

#include "capi/guard.h"
#include "capi/handles.h"

namespace kvc::capi {

inline Cache& cache_of(kvc_cache_t* cache) {
  require(cache, "cache");
  return *cache->impl;
}

inline const Cache& cache_of(const kvc_cache_t* cache) {
  require(cache, "cache");
  return *cache->impl;
}

// NULL is fine only for an empty array.
template <class T>
void require_array(const T* ptr, size_t count, const char* name, const char* count_name) {
  if (ptr == nullptr && count > 0)
    invalid_argument(std::string(name) + " must not be NULL when " + count_name + " is " +
                     std::to_string(count));
}

}  // namespace kvc::capi
