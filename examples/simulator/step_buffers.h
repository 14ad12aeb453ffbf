// Per-step host arrays the cache writes into (slot mappings, block tables).
// Their allocator leaves new elements uninitialized: a step's arrays are
// resized every step and kvcache writes every entry it returns, so
// value-initializing them (std::vector's resize zero-fills) would put the
// simulator's own memset into the bookkeeping time it reports.
#pragma once

#include <cstdint>
#include <memory>
#include <new>
#include <utility>
#include <vector>

namespace sim {

template <class T>
struct UninitAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = UninitAllocator<U>;
  };
  UninitAllocator() = default;
  template <class U>
  UninitAllocator(const UninitAllocator<U> &) noexcept {}
  // Default-initialization: no write for trivial types.
  template <class U>
  void construct(U *p) noexcept {
    ::new (static_cast<void *>(p)) U;
  }
  template <class U, class... Args>
  void construct(U *p, Args &&...args) {
    ::new (static_cast<void *>(p)) U(std::forward<Args>(args)...);
  }
};

using SlotRow = std::vector<int64_t, UninitAllocator<int64_t>>;   // one group's slots
using TableRows = std::vector<int32_t, UninitAllocator<int32_t>>; // one group's padded table

}  // namespace sim
