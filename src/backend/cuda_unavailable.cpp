// Stands in for the CUDA backend in builds without it (KVCACHE_CUDA=OFF or
// no nvcc): CUDA caches fail with KVC_ERR_DEVICE and say why.
#include "backend/cuda_entry.h"
#include "base/error.h"

namespace kvc {

std::unique_ptr<Device> create_cuda_device(int32_t ordinal) {
  fail(KVC_ERR_DEVICE, "cuda:" + std::to_string(ordinal) +
                           " requested, but this libkvcache was built without the CUDA "
                           "backend (KVCACHE_CUDA=OFF or no nvcc at build time)");
}

bool cuda_backend_compiled() { return false; }
int cuda_backend_device_count() { return 0; }

}  // namespace kvc
