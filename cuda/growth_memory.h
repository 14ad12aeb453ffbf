// Device buffers for the stateful mode's growth (CudaDevice::allocate_on),
// each its own physical allocation mapped with the driver's virtual memory
// API (cuMemCreate / cuMemMap). A freed buffer goes back to the driver once
// the work enqueued before the free has completed: the free records an event
// on the stream, and every later allocation or free unmaps the buffers
// whose events have completed (so does every stateful append), except one
// kept as a spare: the next
// allocation of its size (rounded to the granularity) takes it without
// calling the driver, and an allocation of another size unmaps it first.
// Under staggered growth the next layer to grow usually fits the buffer
// the last one left (a step of 128 tokens is a fraction of the 2 MiB
// granularity). So the device memory in use follows the buffers held, each
// rounded up to the allocation granularity (2 MiB on H100), plus the last
// replaced buffer (in flight, or kept as the spare).
//
// Why not a stream-ordered pool: a pool maps memory in chunks that several
// buffers share and releases a chunk only when all of its buffers are free;
// over a 4K-token generation with staggered growth (buffers 0.5 MiB larger
// each time, one layer at a time) it held 1.31x the live bytes, trimmed or
// not (bench/results/2026-11-24-stateful-h100.md).
//
// The driver functions are found at run time (cudaGetDriverEntryPointByVersion),
// so the library still links only the static CUDA runtime. available() is
// false when the driver or the device lacks the API; CudaDevice then uses
// a stream-ordered pool.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <mutex>
#include <vector>

namespace kvc {

class GrowthMemory {
 public:
  explicit GrowthMemory(int ordinal);
  // Waits for the pending frees and unmaps them; buffers still held are
  // unmapped too (their owner is gone).
  ~GrowthMemory();
  GrowthMemory(const GrowthMemory&) = delete;
  GrowthMemory& operator=(const GrowthMemory&) = delete;

  bool available() const { return available_; }
  uint64_t granularity() const { return granularity_; }

  // A buffer of `bytes` (> 0), 256-byte aligned, placed at the end of its
  // mapping so that a read or write past its end faults. Releases the
  // completed frees first; when the driver is out of memory, waits for the
  // pending frees and tries once more. Returns nullptr when it still fails
  // (the caller reports KVC_ERR_OUT_OF_MEMORY); `why` names the failure.
  void* allocate(uint64_t bytes, const char** why);
  // Unmaps `ptr` once the work enqueued on `stream` so far has completed.
  // False when `ptr` is not a buffer of this object.
  bool release(void* ptr, cudaStream_t stream) noexcept;
  // Unmaps the frees whose work has completed (cheap when none is pending).
  void collect() noexcept;

 private:
  struct Mapping {
    unsigned long long va = 0;      // CUdeviceptr of the reservation
    uint64_t size = 0;              // reserved and mapped bytes
    unsigned long long handle = 0;  // CUmemGenericAllocationHandle
    void* ptr = nullptr;            // what allocate() returned
  };
  struct Pending {
    Mapping mapping;
    cudaEvent_t done = nullptr;
  };

  // Completed (or, waiting, all) pending frees: the largest becomes the
  // spare (the old spare is unmapped), the others are unmapped.
  void reap(bool wait) noexcept;
  void keep_or_unmap(const Mapping& m) noexcept;
  void unmap(const Mapping& m) noexcept;
  bool map(uint64_t size, Mapping* out, const char** why);

  int ordinal_;
  bool available_ = false;
  uint64_t granularity_ = 0;
  std::mutex mu_;
  std::vector<Mapping> live_;
  std::vector<Pending> pending_;
  std::vector<cudaEvent_t> spare_events_;
  Mapping spare_;  // size 0: none
};

}  // namespace kvc
