// Memory shared at page granularity by pools whose block bytes differ
// (Jenga's two-level allocator, simplified). The budget is cut into pages
// of page_bytes, a common multiple of every pool's block bytes; a pool owns
// whole pages and carves each into page_bytes / block_bytes blocks. All
// pools view the same allocation: block id i of a pool lives at
// base + i * its block bytes, so page k holds ids [k*bpp, (k+1)*bpp) of
// every pool and block tables and layer views work unchanged.
//
// A pool takes a page from the arena when it has no free block. When a
// call needs more blocks than a pool has free or evictable, the manager
// moves pages to it from other pools' spare: idle pages (no block in use)
// whose cached blocks it evicts, so memory follows demand: blocks a
// windowed group no longer needs become pages the full groups carve.
// Pages move only there, decided before the call changes anything, so the
// all-or-nothing check stays exact.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kvc {

// A resize (kvc_cache_resize) adds pages at the end, beneath the free
// pages already there (they are taken last), or removes the last pages,
// which must be free by then; max_pages bounds every array sized by pages.
class PageArena {
 public:
  explicit PageArena(uint32_t num_pages, uint32_t max_pages = 0)
      : num_pages_(num_pages), max_pages_(max_pages < num_pages ? num_pages : max_pages) {
    free_.reserve(max_pages_);
    for (uint32_t p = num_pages; p > 0; --p) free_.push_back(p - 1);  // lowest first
  }
  uint32_t num_pages() const { return num_pages_; }
  uint32_t max_pages() const { return max_pages_; }
  // Pages [num_pages, n) join, free (n <= max_pages).
  void grow(uint32_t n) {
    std::vector<uint32_t> added;
    for (uint32_t p = n; p > num_pages_; --p) added.push_back(p - 1);
    free_.insert(free_.begin(), added.begin(), added.end());
    num_pages_ = n;
  }
  // Pages [n, num_pages) leave; each must be free.
  void shrink(uint32_t n) {
    size_t k = 0;
    for (uint32_t p : free_)
      if (p < n) free_[k++] = p;
    free_.resize(k);
    num_pages_ = n;
  }
  uint32_t num_free() const { return uint32_t(free_.size()); }
  uint32_t take() {
    const uint32_t p = free_.back();
    free_.pop_back();
    return p;
  }
  // A free page below `below` (UINT32_MAX: none), taken.
  uint32_t take_below(uint32_t below) {
    for (size_t i = free_.size(); i > 0; --i)
      if (free_[i - 1] < below) {
        const uint32_t p = free_[i - 1];
        free_.erase(free_.begin() + std::ptrdiff_t(i - 1));
        return p;
      }
    return UINT32_MAX;
  }
  void give_back(uint32_t page) { free_.push_back(page); }  // never reallocates
  const std::vector<uint32_t>& free_pages() const { return free_; }

 private:
  uint32_t num_pages_;
  uint32_t max_pages_;
  std::vector<uint32_t> free_;
};

}  // namespace kvc
