#include "core/block_pool.h"

namespace kvc {

BlockPool::BlockPool(uint64_t num_blocks) : blocks_(num_blocks) {
  free_.reserve(num_blocks);
  // Lowest ids are handed out first.
  for (uint64_t i = num_blocks; i > 0; --i) free_.push_back(uint32_t(i - 1));
}

}  // namespace kvc
