// Host bookkeeping of the beam table (the table itself is device memory).
// For every pair of rows it knows how long a prefix their table rows share,
// so a reorder copies only the entries past it, and for every row which
// positions of which physical rows its table reads, so that no append or
// import overwrites K/V another row still reads. O(B^2) memory and work per
// reorder; nothing of it exists until the first reorder that moves a row.
#pragma once

#include <cstdint>
#include <vector>

namespace kvc {

class BeamBook {
 public:
  // One changed table row of a reorder: entries [begin, end) of row dst
  // become those of row src.
  struct Move {
    uint32_t dst = 0;
    uint32_t src = 0;
    uint32_t begin = 0;
    uint32_t end = 0;
  };

  // A reorder computed but not applied yet: the device work to enqueue and
  // the books after it. Building it may throw (memory); committing it may not.
  struct Reorder {
    std::vector<Move> moves;
    std::vector<uint32_t> common;
    std::vector<uint32_t> refs;
    std::vector<uint32_t> lengths;  // the rows' lengths after it
    uint64_t entries = 0;           // table entries the moves copy
  };

  explicit BeamBook(uint32_t rows) : rows_(rows) {}

  bool active() const { return active_; }
  // [rows][rows]: entry (a, b) is a length over which the table rows of a
  // and b agree (see common_). Valid while active().
  const uint32_t* common_matrix() const { return common_.data(); }

  // The books of a fresh table in which row r reads its own `lengths[r]`
  // positions. Throws std::bad_alloc before changing anything.
  void activate(const std::vector<uint32_t>& lengths);
  void deactivate() noexcept;

  // First position of physical row x that no other row reads (0 without a
  // table): row x may write from there on.
  uint32_t protected_length(uint32_t x) const;
  // A row other than x that reads position >= `from` of row x (-1: none).
  int64_t reader_of(uint32_t x, uint32_t from) const;

  // beam_idx was checked: `rows` entries in [0, rows). `lengths` are the
  // rows' lengths now. Requires active().
  Reorder plan_reorder(const int32_t* beam_idx, const std::vector<uint32_t>& lengths) const;
  void commit(Reorder&& r) noexcept;

  // Makes every reader bound exact from the table as it is now (a host copy
  // of `rows` x `stride` entries; `lengths[c]` the positions row c reads):
  // refs[c][x] becomes one past the last position below lengths[c] that
  // reads row x. The bounds only grow loose through trims; the cache calls
  // this when a bound says a write may hit a reader.
  void tighten(const int32_t* table, uint32_t stride, const std::vector<uint32_t>& lengths) noexcept;

  // Row `row` wrote its own positions up to `end`.
  void on_append(uint32_t row, uint32_t end) noexcept;
  // Row `row` was cut to `length` positions.
  void on_trim(uint32_t row, uint32_t length) noexcept;
  // Row `row` now holds `length` positions of its own (import).
  void on_import(uint32_t row, uint32_t length) noexcept;

 private:
  uint32_t& common(uint32_t a, uint32_t b) { return common_[uint64_t(a) * rows_ + b]; }
  uint32_t& refs(uint32_t c, uint32_t x) { return refs_[uint64_t(c) * rows_ + x]; }

  uint32_t rows_;
  bool active_ = false;
  // common_[a][b]: table rows a and b agree on [0, common_[a][b]); never
  // more than either row's length (a != b).
  std::vector<uint32_t> common_;
  // refs_[c][x]: row c's table reads physical row x at positions below
  // refs_[c][x] only (an upper bound, exact but after trims; 0: not at all).
  std::vector<uint32_t> refs_;
};

}  // namespace kvc
