// Turns CUDA runtime errors into kvc::Error(KVC_ERR_DEVICE) naming the call.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "base/error.h"

namespace kvc {

inline void cuda_check(cudaError_t err, const char* what) {
  if (err != cudaSuccess)
    fail(KVC_ERR_DEVICE, std::string(what) + " failed: " + cudaGetErrorName(err) + " (" +
                             cudaGetErrorString(err) + ")");
}

}  // namespace kvc
