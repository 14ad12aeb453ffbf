// Buffers on the cache's device for the kernels' inputs: host memory for a
// CPU cache, CUDA memory for a CUDA cache (a serving stack owns its
// activations; kvcache only reads them through the kernels).
#pragma once

#include <cstddef>
#include <string>
#include <utility>

namespace sim {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(bool cuda, int ordinal) : cuda_(cuda), ordinal_(ordinal) {}
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
  DeviceBuffer(DeviceBuffer &&other) noexcept { *this = std::move(other); }
  DeviceBuffer &operator=(DeviceBuffer &&other) noexcept {
    if (this != &other) {
      release();
      cuda_ = other.cuda_;
      ordinal_ = other.ordinal_;
      ptr_ = std::exchange(other.ptr_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }

  // Grows to at least `bytes` (contents are lost when it grows).
  void reserve(size_t bytes);
  // Copies `bytes` host bytes to the start of the buffer (reserve first).
  void upload(const void *src, size_t bytes);
  void *data() { return ptr_; }
  size_t size() const { return bytes_; }

 private:
  void release();
  bool cuda_ = false;
  int ordinal_ = 0;
  void *ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Waits for the default stream of a CUDA device; no-op for the CPU.
void device_synchronize(bool cuda, int ordinal);

}  // namespace sim
