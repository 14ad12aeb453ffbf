// The memory of one block pool, allocated once from a Device at cache
// creation and returned to it at destruction: device memory for a primary
// pool, the device's host memory (pinned on CUDA) for a secondary-tier pool.
//
// A growable primary pool (kvc_cache_resize) reserves the address space of
// its largest size once (Device::reserve) and backs a prefix of it: resize
// backs or returns memory at the end, so base() never moves and every
// pointer into the blocks that remain stays valid.
#pragma once

#include <atomic>
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
        num_blocks_(num_blocks),
        max_blocks_(num_blocks) {}
  // A growable device pool: room for max_blocks reserved, num_blocks backed
  // (the device must have a reserve_granularity()).
  PoolMemory(Device& device, uint64_t block_bytes, uint64_t num_blocks, uint64_t max_blocks)
      : device_(&device),
        kind_(Kind::kDevice),
        growable_(true),
        granularity_(device.reserve_granularity()),
        block_bytes_(block_bytes),
        num_blocks_(num_blocks),
        max_blocks_(max_blocks) {
    reserved_ = round_up(block_bytes * max_blocks);
    backed_ = round_up(block_bytes * num_blocks);
    base_ = device.reserve(reserved_, backed_);
  }
  // A view of memory owned elsewhere (a pool carved from a page arena).
  PoolMemory(void* base, uint64_t block_bytes, uint64_t num_blocks, uint64_t max_blocks)
      : device_(nullptr), kind_(Kind::kDevice), base_(base), block_bytes_(block_bytes),
        num_blocks_(num_blocks), max_blocks_(max_blocks) {}
  ~PoolMemory() {
    if (device_ == nullptr) return;  // a view
    if (growable_) device_->unreserve(base_, reserved_, backed_);
    else if (kind_ == Kind::kHost) device_->deallocate_host(base_);
    else device_->deallocate(base_);
  }
  PoolMemory(const PoolMemory&) = delete;
  PoolMemory& operator=(const PoolMemory&) = delete;

  void* base() const { return base_; }
  uint64_t block_bytes() const { return block_bytes_; }
  // Read without the cache's lock (layer views, kernel checks): atomic.
  uint64_t num_blocks() const { return num_blocks_.load(std::memory_order_relaxed); }
  uint64_t max_blocks() const { return max_blocks_; }
  uint64_t bytes() const { return block_bytes_ * num_blocks(); }
  bool growable() const { return growable_; }
  unsigned char* block(uint64_t id) const {
    return static_cast<unsigned char*>(base_) + id * block_bytes_;
  }

  // Resizing a growable pool in two steps, so a caller with several pools
  // can back them all before changing anything: back(n) backs room for n
  // blocks (no-op when it is there; throws Error(KVC_ERR_OUT_OF_MEMORY) with
  // nothing changed), set_num_blocks(n) takes the new count (n <= max),
  // and trim() returns what lies past num_blocks() (after a shrink, or to
  // undo a back() whose resize failed elsewhere).
  void back(uint64_t n) {
    const uint64_t want = round_up(block_bytes_ * n);
    if (want <= backed_) return;
    device_->commit(base_, backed_, want);
    backed_ = want;
  }
  void trim() {
    const uint64_t want = round_up(bytes());
    if (!growable_ || want >= backed_) return;
    backed_ = device_->decommit(base_, want, backed_);
  }
  void set_num_blocks(uint64_t n) { num_blocks_.store(n, std::memory_order_relaxed); }

 private:
  uint64_t round_up(uint64_t bytes) const {
    return granularity_ == 0 ? bytes : (bytes + granularity_ - 1) / granularity_ * granularity_;
  }

  Device* device_;  // null: a view
  Kind kind_;
  bool growable_ = false;
  uint64_t granularity_ = 0;
  void* base_ = nullptr;
  uint64_t block_bytes_;
  std::atomic<uint64_t> num_blocks_;
  uint64_t max_blocks_;
  uint64_t reserved_ = 0;  // growable: bytes of address space
  uint64_t backed_ = 0;    // growable: bytes backed from base_
};

}  // namespace kvc
