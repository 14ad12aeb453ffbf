// DeviceBuffer for builds without the CUDA backend: only host memory exists,
// and a CUDA buffer is refused with the reason (the cache refuses the device
// first, with its own message, so this is only reached by misuse).
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>

#include "device_memory.h"

namespace sim {

DeviceBuffer::~DeviceBuffer() { release(); }

void DeviceBuffer::release() {
  std::free(ptr_);
  ptr_ = nullptr;
  bytes_ = 0;
}

void DeviceBuffer::reserve(size_t bytes) {
  if (cuda_) throw std::runtime_error("this simulator was built without CUDA");
  if (bytes <= bytes_) return;
  release();
  ptr_ = std::malloc(bytes);
  if (!ptr_) throw std::bad_alloc();
  bytes_ = bytes;
}

void DeviceBuffer::upload(const void *src, size_t bytes) {
  if (bytes) std::memcpy(ptr_, src, bytes);
}

void device_synchronize(bool, int) {}

}  // namespace sim
