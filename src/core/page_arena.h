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

#include <cstdint>
#include <vector>

namespace kvc {

class PageArena {
 public:
  explicit PageArena(uint32_t num_pages) : num_pages_(num_pages) {
    free_.reserve(num_pages);
    for (uint32_t p = num_pages; p > 0; --p) free_.push_back(p - 1);  // lowest first
  }
  uint32_t num_pages() const { return num_pages_; }
  uint32_t num_free() const { return uint32_t(free_.size()); }
  uint32_t take() {
    const uint32_t p = free_.back();
    free_.pop_back();
    return p;
  }
  void give_back(uint32_t page) { free_.push_back(page); }  // never reallocates
  const std::vector<uint32_t>& free_pages() const { return free_; }

 private:
  uint32_t num_pages_;
  std::vector<uint32_t> free_;
};

}  // namespace kvc
