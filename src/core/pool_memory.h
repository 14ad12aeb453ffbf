// The memory of one block pool, allocated once from a Device at cache
// creation and returned to it at destruction: device memory for a primary
// pool, the device's host memory (pinned on CUDA) for a secondary-tier pool.
#pragma once

#include <cstdint>

#include "backend/device.h"

namespace kvc {

class PoolMemory {
 public:
  enum class Kind { kDevice, kHost };

  PoolMemory(Device& device, uint64_t block_bytes, uint64_t num_blocks,
             Kind kind = Kind::kDevice)
      : device_(&device),
        kind_(kind),
        base_(kind == Kind::kHost ? device.allocate_host(block_bytes * num_blocks)
                                  : device.allocate(block_bytes * num_blocks)),
        block_bytes_(block_bytes),
        num_blocks_(num_blocks) {}
  // A view of memory owned elsewhere (a pool carved from a page arena).
  PoolMemory(void* base, uint64_t block_bytes, uint64_t num_blocks)
      : device_(nullptr), kind_(Kind::kDevice), base_(base), block_bytes_(block_bytes),
        num_blocks_(num_blocks) {}
  ~PoolMemory() {
    if (device_ == nullptr) return;  // a view
    if (kind_ == Kind::kHost) device_->deallocate_host(base_);
    else device_->deallocate(base_);
  }
  PoolMemory(const PoolMemory&) = delete;
  PoolMemory& operator=(const PoolMemory&) = delete;

  void* base() const { return base_; }
  uint64_t block_bytes() const { return block_bytes_; }
  uint64_t num_blocks() const { return num_blocks_; }
  uint64_t bytes() const { return block_bytes_ * num_blocks_; }
  unsigned char* block(uint64_t id) const {
    return static_cast<unsigned char*>(base_) + id * block_bytes_;
  }

 private:
  Device* device_;  // null: a view
  Kind kind_;
  void* base_;
  uint64_t block_bytes_;
  uint64_t num_blocks_;
};

}  // namespace kvc
