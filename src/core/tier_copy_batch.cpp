#include "core/tier_copy_batch.h"

namespace kvc {

void TierCopyBatch::reset(size_t num_pools) {
  if (per_pool_.size() < num_pools) per_pool_.resize(num_pools);
  for (auto& v : per_pool_) v.clear();
}

size_t TierCopyBatch::size() const {
  size_t n = 0;
  for (const auto& v : per_pool_) n += v.size();
  return n;
}

void TierCopyBatch::submit(const RankPools& ranks, TierDirection direction,
                           void* stream) const {
  for (size_t p = 0; p < per_pool_.size(); ++p) {
    if (per_pool_[p].empty()) continue;
    ranks.copy_tier(direction, uint32_t(p), per_pool_[p].data(), per_pool_[p].size(), stream);
  }
}

}  // namespace kvc
