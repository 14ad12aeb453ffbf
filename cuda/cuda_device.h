// The CUDA backend's Device: pools in device memory on one GPU (reserved
// address ranges backed through the driver's virtual memory API where it
// is there, so they can grow in place; cudaMalloc otherwise); copies and
// kernels enqueued on the caller's stream.
#pragma once

#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "backend/device.h"
#include "cuda/cuda_kernels.h"
#include "cuda/kernel_errors.h"

namespace kvc {

class GrowthMemory;
class PoolReservations;

class CudaDevice final : public Device {
 public:
  explicit CudaDevice(int32_t ordinal);
  ~CudaDevice() override;
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

  kvc_device_kind_t kind() const override { return KVC_DEVICE_CUDA; }
  int32_t ordinal() const override { return ordinal_; }
  std::string name() const override { return name_; }
  DeviceMemoryInfo memory_info() const override;

  void* allocate(uint64_t bytes) override;
  void deallocate(void* ptr) noexcept override;
  // Growable pools through the driver's virtual memory API
  // (pool_reservations.h); granularity 0 without it (then pools are
  // cudaMalloc'd and a resize is refused).
  uint64_t reserve_granularity() const override;
  void* reserve(uint64_t max_bytes, uint64_t bytes) override;
  void commit(void* base, uint64_t from, uint64_t to) override;
  uint64_t decommit(void* base, uint64_t from, uint64_t to) noexcept override;
  void unreserve(void* base, uint64_t max_bytes, uint64_t bytes) noexcept override;
  // A reservation's physical allocations, exported as POSIX file
  // descriptors (pool_reservations.h says when they cannot be).
  SharedMemory shared_memory(const void* base) const override;
  int export_chunk(const void* base, uint64_t index) const override;
  void copy_blocks(void* pool_base, const BlockGeometry& geometry, const BlockCopy* copies,
                   size_t count, void* stream) override;
  // Pinned, mapped host memory (cudaHostAlloc), reachable from kernels.
  void* allocate_host(uint64_t bytes) override;
  void deallocate_host(void* ptr) noexcept override;
  // One kernel launch per call (launch_tier_copy), then records the tier
  // event on `stream`.
  void copy_tier(TierDirection direction, void* device_pool, void* host_pool,
                 uint64_t block_bytes, const TierCopy* copies, size_t count,
                 void* stream) override;
  void order_after_tier_copies(void* stream) override;
  void synchronize(void* stream) override;
  // A cudaEvent_t (timing disabled); wait_fence makes this device current
  // on the calling thread and blocks in cudaEventSynchronize.
  void* create_fence() override;
  void record_fence(void* fence, void* stream) override;
  bool wait_fence(void* fence) noexcept override;
  void destroy_fence(void* fence) noexcept override;

  // Stream-ordered: one virtual memory mapping per buffer, unmapped when
  // the work enqueued before the free is done (growth_memory.h); a
  // stream-ordered pool when the driver lacks that API.
  void* allocate_on(uint64_t bytes, void* stream) override;
  void deallocate_on(void* ptr, void* stream) noexcept override;
  // cudaMemcpy2DAsync (cudaMemcpyAsync for one row), cudaMemcpyDefault.
  void copy_2d(void* dst, uint64_t dst_pitch, const void* src, uint64_t src_pitch, uint64_t width,
               uint64_t height, CopyKind kind, void* stream) override;
  // One kernel launch per kCopyRangesPerLaunch ranges (launch_copy_ranges).
  void copy_ranges(const CopyRange* ranges, size_t count, void* stream) override;
  void stateful_append(const StatefulAppendWork& work, void* stream) override;
  void table_reorder(const TableReorderWork& work, void* stream) override;
  void gather_rows(const RowGatherWork& work, void* stream) override;
  void stateful_decode(const StatefulDecodeWork& work, void* stream) override;
  uint64_t stateful_decode_workspace_bytes(const DecodeWork& work) const override;

  void store_kv(const StoreKvWork& work, void* stream) override;
  void decode_attention(const DecodeWork& work, void* stream) override;
  uint64_t decode_workspace_bytes(const DecodeWork& work) const override;
  void prefill_attention(const PrefillWork& work, void* stream) override;
  uint64_t prefill_workspace_bytes(const PrefillWork& work) const override;
  AsyncError async_error(void* stream) override;

 private:
  // Makes this device current on the calling thread.
  void activate() const;

  int32_t ordinal_;
  std::string name_;
  GpuInfo gpu_;
  // Where kernels record values the host could not check; allocated with
  // the device, so serving allocates nothing.
  KernelErrorRecord* errors_ = nullptr;
  std::mutex errors_mutex_;  // one reader/clearer of the record at a time
  // Host pools: host address -> device address (the same under UVA).
  std::vector<std::pair<void*, void*>> host_maps_;
  // Recorded after every tier copy; a later call on another stream waits
  // for it. The cache's lock serializes its users.
  cudaEvent_t tier_event_ = nullptr;
  bool tier_recorded_ = false;
  void* tier_stream_ = nullptr;
  // The buffers of allocate_on (stateful growth).
  std::unique_ptr<GrowthMemory> growth_;
  // The growable pools' address ranges and their physical memory.
  std::unique_ptr<PoolReservations> reservations_;
  // The fallback of allocate_on without the virtual memory API: this
  // device's own, trimmed before each allocation so that buffers freed by
  // earlier, completed work go back to the driver instead of staying
  // reserved (the default pool keeps them until the process synchronizes
  // in a way it notices, and other users share it).
  cudaMemPool_t pool_ = nullptr;
};

}  // namespace kvc
