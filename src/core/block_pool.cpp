#include "core/block_pool.h"

namespace kvc {

BlockPool::BlockPool(uint64_t num_blocks) : blocks_(num_blocks) {
  free_.reserve(num_blocks);
  // Lowest ids are handed out first.
  for (uint64_t i = num_blocks; i > 0; --i) free_.push_back(uint32_t(i - 1));
}

uint32_t BlockPool::acquire_free() {
  const uint32_t id = free_.back();
  free_.pop_back();
  blocks_[id].ref = 1;
  ++in_use_;
  return id;
}

void BlockPool::add_ref(uint32_t id) {
  BlockInfo& b = blocks_[id];
  if (b.ref++ == 0) {
    --cached_;  // only a cached block can have ref 0 and an owner-to-be
    ++in_use_;
  }
}

bool BlockPool::release(uint32_t id) {
  BlockInfo& b = blocks_[id];
  if (--b.ref > 0) return false;
  --in_use_;
  if (b.node != kNoNode) {
    ++cached_;
    return true;
  }
  free_.push_back(id);  // never reallocates: capacity is every block
  return false;
}

void BlockPool::evict(uint32_t id) {
  BlockInfo& b = blocks_[id];
  b.node = kNoNode;
  --cached_;
  free_.push_back(id);
}

}  // namespace kvc
