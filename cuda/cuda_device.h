// The CUDA backend's Device: a pool in cudaMalloc memory on one GPU; copies
// and kernels enqueued on the caller's stream.
#pragma once

#include "backend/device.h"

namespace kvc {

class CudaDevice final : public Device {
 public:
  explicit CudaDevice(int32_t ordinal);

  kvc_device_kind_t kind() const override { return KVC_DEVICE_CUDA; }
  int32_t ordinal() const override { return ordinal_; }
  std::string name() const override { return name_; }
  DeviceMemoryInfo memory_info() const override;

  void* allocate(uint64_t bytes) override;
  void deallocate(void* ptr) noexcept override;
  void copy_blocks(void* pool_base, const BlockGeometry& geometry, const BlockCopy* copies,
                   size_t count, void* stream) override;
  void synchronize(void* stream) override;

 private:
  // Makes this device current on the calling thread.
  void activate() const;

  int32_t ordinal_;
  std::string name_;
};

}  // namespace kvc
