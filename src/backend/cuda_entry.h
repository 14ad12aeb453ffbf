// Entry points of the CUDA backend, implemented in cuda/ when it is built
// and in cuda_unavailable.cpp when it is not.
#pragma once

#include <memory>

#include "backend/device.h"

namespace kvc {

std::unique_ptr<Device> create_cuda_device(int32_t ordinal);
bool cuda_backend_compiled();
int cuda_backend_device_count();

}  // namespace kvc
