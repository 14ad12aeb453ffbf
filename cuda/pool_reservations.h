// The growable pools of a CUDA device (Device::reserve / commit / decommit /
// unreserve, for kvc_cache_resize): a range of virtual addresses reserved
// once with cuMemAddressReserve, backed at its end by physical allocations
// (cuMemCreate, one per commit, mapped with cuMemMap and made readable and
// writable with cuMemSetAccess) and returned from the end (cuMemUnmap,
// cuMemRelease). The base never moves, so layer views and CUDA graphs
// captured against a pool stay valid while it grows and shrinks.
//
// Returning memory gives back whole physical allocations only: a decommit
// that ends inside one keeps it, and answers the end it kept. Unmapping
// waits for the device first (cudaDeviceSynchronize): work enqueued before
// a shrink may still read the blocks it cut.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

namespace kvc {

class PoolReservations {
 public:
  explicit PoolReservations(int ordinal);
  ~PoolReservations();  // releases what is left (a leak otherwise)
  PoolReservations(const PoolReservations&) = delete;
  PoolReservations& operator=(const PoolReservations&) = delete;

  // 0 when the driver or the device lacks the API.
  uint64_t granularity() const { return granularity_; }
  // Reserves max_bytes and backs the first `bytes` (multiples of the
  // granularity). nullptr with *why set on failure, nothing reserved.
  void* reserve(uint64_t max_bytes, uint64_t bytes, const char** why);
  // Backs [from, to) of the reservation at base; false with *why set on
  // failure, nothing changed.
  bool commit(void* base, uint64_t from, uint64_t to, const char** why);
  // Returns the physical allocations lying in [from, ...); answers where
  // the backed prefix ends now.
  uint64_t decommit(void* base, uint64_t from) noexcept;
  void unreserve(void* base) noexcept;

 private:
  struct Chunk {
    uint64_t offset = 0;
    uint64_t size = 0;
    unsigned long long handle = 0;  // CUmemGenericAllocationHandle
  };
  struct Range {
    unsigned long long va = 0;  // CUdeviceptr
    uint64_t size = 0;
    std::vector<Chunk> chunks;  // by offset, contiguous from 0
  };
  Range* find(void* base);
  bool map_chunk(Range& r, uint64_t from, uint64_t to, const char** why);
  void unmap_chunk(Range& r, const Chunk& c) noexcept;

  int ordinal_;
  uint64_t granularity_ = 0;
  std::mutex mu_;
  std::vector<Range> ranges_;
};

}  // namespace kvc
