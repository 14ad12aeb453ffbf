// The CPU backend: host memory and the reference kernels. It is the embedded
// default and the oracle the CUDA kernels are checked against.
//
// Pool memory is backed when it is allocated (or a growable pool grows):
// every page is written once there, so serving calls take no page faults,
// and pools of 2 MiB or more start on a 2 MiB boundary with the transparent
// huge page hint (tier copies and kernels reach blocks at random).
#pragma once

#include "backend/device.h"

namespace kvc {

class CpuDevice final : public Device {
 public:
  kvc_device_kind_t kind() const override { return KVC_DEVICE_CPU; }
  int32_t ordinal() const override { return 0; }
  std::string name() const override { return "cpu"; }
  DeviceMemoryInfo memory_info() const override { return {}; }

  void* allocate(uint64_t bytes) override;
  void deallocate(void* ptr) noexcept override;
  // Growable pools: address space reserved with mmap(PROT_NONE), backed at
  // its end with mprotect and returned with madvise(MADV_DONTNEED) (pages).
  uint64_t reserve_granularity() const override;
  void* reserve(uint64_t max_bytes, uint64_t bytes) override;
  void commit(void* base, uint64_t from, uint64_t to) override;
  uint64_t decommit(void* base, uint64_t from, uint64_t to) noexcept override;
  void unreserve(void* base, uint64_t max_bytes, uint64_t bytes) noexcept override;
  void copy_blocks(void* pool_base, const BlockGeometry& geometry, const BlockCopy* copies,
                   size_t count, void* stream) override;
  void* allocate_host(uint64_t bytes) override;
  void deallocate_host(void* ptr) noexcept override;
  // Host to host: memcpy, in the call.
  void copy_tier(TierDirection direction, void* device_pool, void* host_pool,
                 uint64_t block_bytes, const TierCopy* copies, size_t count,
                 void* stream) override;
  void synchronize(void*) override {}

  // Checks every slot / length / block id, then runs the reference kernel:
  // a failed call writes nothing.
  void store_kv(const StoreKvWork& work, void* stream) override;
  void decode_attention(const DecodeWork& work, void* stream) override;
  uint64_t decode_workspace_bytes(const DecodeWork&) const override { return 0; }
  // The stateful mode: plain loops (cpu_stateful_kernels.cpp).
  void copy_2d(void* dst, uint64_t dst_pitch, const void* src, uint64_t src_pitch, uint64_t width,
               uint64_t height, CopyKind kind, void* stream) override;
  // memcpy per range, in the call.
  void copy_ranges(const CopyRange* ranges, size_t count, void* stream) override;
  void stateful_append(const StatefulAppendWork& work, void* stream) override;
  void table_reorder(const TableReorderWork& work, void* stream) override;
  void gather_rows(const RowGatherWork& work, void* stream) override;
  void prefill_attention(const PrefillWork& work, void* stream) override;
  uint64_t prefill_workspace_bytes(const PrefillWork&) const override { return 0; }
  // Work runs in the call, so there is never an error left to report.
  AsyncError async_error(void*) override { return {}; }

 private:
  void* allocate_at(FaultSite site, uint64_t bytes);
};

}  // namespace kvc
