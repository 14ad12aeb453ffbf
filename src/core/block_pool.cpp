#include "core/block_pool.h"

namespace kvc {

BlockPool::BlockPool(uint64_t num_blocks, uint64_t max_blocks)
    : blocks_(max_blocks < num_blocks ? num_blocks : max_blocks), size_(num_blocks) {
  free_.reserve(blocks_.size());
  // Lowest ids are handed out first.
  for (uint64_t i = num_blocks; i > 0; --i) free_.push_back(uint32_t(i - 1));
}

BlockPool::BlockPool(PageArena& arena, uint32_t blocks_per_page)
    : blocks_(uint64_t(arena.max_pages()) * blocks_per_page),
      arena_(&arena),
      bpp_(blocks_per_page),
      free_pos_(blocks_.size(), UINT32_MAX),
      page_free_(arena.max_pages(), 0),
      page_in_use_(arena.max_pages(), 0),
      page_owned_(arena.max_pages(), 0) {
  free_.reserve(blocks_.size());
}

void BlockPool::grow(uint64_t n) {
  std::vector<uint32_t> added;
  added.reserve(n - size_);
  for (uint64_t i = n; i > size_; --i) added.push_back(uint32_t(i - 1));
  free_.insert(free_.begin(), added.begin(), added.end());  // within the reserved capacity
  size_ = n;
}

void BlockPool::shrink(uint64_t n) {
  size_t k = 0;
  for (uint32_t id : free_)
    if (id < n) free_[k++] = id;
  free_.resize(k);
  size_ = n;
}

void BlockPool::give_page(uint32_t page) {
  for (uint32_t b = page * bpp_; b < (page + 1) * bpp_; ++b) remove_free(b);
  page_free_[page] = 0;
  page_owned_[page] = 0;
  owned_blocks_ -= bpp_;
  arena_->give_back(page);
}

void BlockPool::remove_free(uint32_t id) {
  const uint32_t at = free_pos_[id];
  const uint32_t last = free_.back();
  free_[at] = last;
  free_pos_[last] = at;
  free_.pop_back();
  free_pos_[id] = UINT32_MAX;
}

void BlockPool::take_page() { own_page(arena_->take()); }

bool BlockPool::take_page_below(uint32_t below) {
  const uint32_t page = arena_->take_below(below);
  if (page == UINT32_MAX) return false;
  own_page(page);
  return true;
}

void BlockPool::move_cached(const std::vector<std::pair<uint32_t, uint32_t>>& moves) {
  if (moves.empty()) return;
  if (paged()) {
    for (const auto& m : moves) {
      remove_free(m.second);
      --page_free_[m.second / bpp_];
      blocks_[m.second] = blocks_[m.first];
      blocks_[m.first] = BlockInfo{};
      push_free(m.first);
    }
    return;
  }
  // An unpaged free list has no positions: filter it once.
  std::vector<uint8_t> taken(id_bound(), 0);
  for (const auto& m : moves) {
    taken[m.second] = 1;
    blocks_[m.second] = blocks_[m.first];
    blocks_[m.first] = BlockInfo{};
  }
  size_t k = 0;
  for (uint32_t id : free_)
    if (!taken[id]) free_[k++] = id;
  free_.resize(k);
  for (const auto& m : moves) free_.push_back(m.first);
}

void BlockPool::own_page(uint32_t page) {
  page_owned_[page] = 1;
  owned_blocks_ += bpp_;
  page_free_[page] = bpp_;
  for (uint32_t b = (page + 1) * bpp_; b > page * bpp_; --b) {  // lowest id on top
    free_pos_[b - 1] = uint32_t(free_.size());
    free_.push_back(b - 1);
  }
}

}  // namespace kvc
