// The CPU backend: host memory and the reference kernels. It is the embedded
// default and the oracle the CUDA kernels are checked against.
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
  void copy_blocks(void* pool_base, const BlockGeometry& geometry, const BlockCopy* copies,
                   size_t count, void* stream) override;
  void synchronize(void*) override {}
};

}  // namespace kvc
