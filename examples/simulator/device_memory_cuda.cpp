// DeviceBuffer for builds with the CUDA backend: CUDA memory for a CUDA
// cache, host memory for a CPU cache.
#include <cuda_runtime_api.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>

#include "device_memory.h"

namespace sim {
namespace {

void check(cudaError_t e, const char *what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

}  // namespace

DeviceBuffer::~DeviceBuffer() { release(); }

void DeviceBuffer::release() {
  if (cuda_) {
    if (ptr_) cudaFree(ptr_);
  } else {
    std::free(ptr_);
  }
  ptr_ = nullptr;
  bytes_ = 0;
}

void DeviceBuffer::reserve(size_t bytes) {
  if (bytes <= bytes_) return;
  release();
  if (cuda_) {
    check(cudaSetDevice(ordinal_), "cudaSetDevice");
    check(cudaMalloc(&ptr_, bytes), "cudaMalloc");
  } else {
    ptr_ = std::malloc(bytes);
    if (!ptr_) throw std::bad_alloc();
  }
  bytes_ = bytes;
}

void DeviceBuffer::upload(const void *src, size_t bytes) {
  if (!bytes) return;
  if (cuda_)
    check(cudaMemcpy(ptr_, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  else
    std::memcpy(ptr_, src, bytes);
}

void device_synchronize(bool cuda, int ordinal) {
  if (!cuda) return;
  check(cudaSetDevice(ordinal), "cudaSetDevice");
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

}  // namespace sim
