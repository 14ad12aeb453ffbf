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
//
// Sharing (kvc_cache_describe_pool_share): the physical allocations are
// created exportable as POSIX file descriptors
// (CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) where the device says it can;
// where it cannot, or cuMemCreate refuses the handle type, they are created
// without it and shareable_why() says why (then sharing is refused).
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "backend/device.h"

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

  // The chunks backing the reservation at base; false with *why set when
  // they cannot be shared (not a reservation of this object, or created
  // without a shareable handle type).
  bool shared(const void* base, SharedMemory* out, std::string* why);
  // A new POSIX file descriptor for chunk `index` (cuMemExportToShareableHandle);
  // -1 with *why set on failure (*bad_index: index past the chunks).
  int export_chunk(const void* base, uint64_t index, std::string* why, bool* bad_index);
  // Empty when new chunks are created shareable, else why not.
  std::string shareable_why();

 private:
  struct Chunk {
    uint64_t offset = 0;
    uint64_t size = 0;
    unsigned long long handle = 0;  // CUmemGenericAllocationHandle
    bool shareable = false;         // created with the POSIX fd handle type
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
  std::string unshareable_;  // empty: chunks are requested shareable
  std::mutex mu_;
  std::vector<Range> ranges_;
};

}  // namespace kvc
