// The CUDA backend's Device: a pool in cudaMalloc memory on one GPU; copies
// and kernels enqueued on the caller's stream.
#pragma once

#include <mutex>

#include "backend/device.h"
#include "cuda/cuda_kernels.h"
#include "cuda/kernel_errors.h"

namespace kvc {

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
  void copy_blocks(void* pool_base, const BlockGeometry& geometry, const BlockCopy* copies,
                   size_t count, void* stream) override;
  void synchronize(void* stream) override;

  void store_kv(const StoreKvWork& work, void* stream) override;
  void decode_attention(const DecodeWork& work, void* stream) override;
  uint64_t decode_workspace_bytes(const DecodeWork& work) const override;
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
};

}  // namespace kvc
