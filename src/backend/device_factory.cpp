// Picks the backend of a config. The CUDA backend registers itself through
// cuda_entry.h; without it, asking for CUDA fails with a clear message.
#include "backend/cpu_device.h"
#include "backend/cuda_entry.h"
#include "base/error.h"

namespace kvc {

std::unique_ptr<Device> create_device(kvc_device_kind_t kind, int32_t ordinal) {
  if (kind == KVC_DEVICE_CPU) return std::make_unique<CpuDevice>();
  if (kind == KVC_DEVICE_CUDA) return create_cuda_device(ordinal);
  fail(KVC_ERR_INVALID_ARGUMENT, "unknown device kind " + std::to_string(kind));
}

bool cuda_compiled() { return cuda_backend_compiled(); }
int cuda_device_count() { return cuda_backend_device_count(); }

}  // namespace kvc
