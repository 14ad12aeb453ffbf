// The memory of one block pool, allocated once from a Device at cache
// creation and returned to it at destruction.
#pragma once

#include <cstdint>

#include "backend/device.h"

namespace kvc {

class PoolMemory {
 public:
  PoolMemory(Device& device, uint64_t block_bytes, uint64_t num_blocks)
      : device_(&device),
        base_(device.allocate(block_bytes * num_blocks)),
        block_bytes_(block_bytes),
        num_blocks_(num_blocks) {}
  // A view of memory owned elsewhere (a pool carved from a page arena).
  PoolMemory(void* base, uint64_t block_bytes, uint64_t num_blocks)
      : device_(nullptr), base_(base), block_bytes_(block_bytes), num_blocks_(num_blocks) {}
  ~PoolMemory() {
    if (device_ != nullptr) device_->deallocate(base_);
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
  void* base_;
  uint64_t block_bytes_;
  uint64_t num_blocks_;
};

}  // namespace kvc
