#include "stateful/beam_book.h"

#include <algorithm>
#include <utility>

namespace kvc {

void BeamBook::activate(const std::vector<uint32_t>& lengths) {
  std::vector<uint32_t> common(uint64_t(rows_) * rows_, 0);
  std::vector<uint32_t> refs(uint64_t(rows_) * rows_, 0);
  for (uint32_t r = 0; r < rows_; ++r) {
    // Row r's table reads row r only; distinct rows differ from position 0.
    refs[uint64_t(r) * rows_ + r] = lengths[r];
    common[uint64_t(r) * rows_ + r] = lengths[r];
  }
  common_.swap(common);
  refs_.swap(refs);
  active_ = true;
}

void BeamBook::deactivate() noexcept {
  active_ = false;
  common_.clear();
  common_.shrink_to_fit();
  refs_.clear();
  refs_.shrink_to_fit();
}

uint32_t BeamBook::protected_length(uint32_t x) const {
  if (!active_) return 0;
  uint32_t p = 0;
  for (uint32_t c = 0; c < rows_; ++c)
    if (c != x) p = std::max(p, refs_[uint64_t(c) * rows_ + x]);
  return p;
}

int64_t BeamBook::reader_of(uint32_t x, uint32_t from) const {
  if (!active_) return -1;
  for (uint32_t c = 0; c < rows_; ++c)
    if (c != x && refs_[uint64_t(c) * rows_ + x] > from) return c;
  return -1;
}

BeamBook::Reorder BeamBook::plan_reorder(const int32_t* beam_idx,
                                         const std::vector<uint32_t>& lengths) const {
  Reorder r;
  r.common.assign(uint64_t(rows_) * rows_, 0);
  r.refs.resize(uint64_t(rows_) * rows_);
  r.lengths.resize(rows_);
  const auto old_common = [&](uint32_t a, uint32_t b) { return common_[uint64_t(a) * rows_ + b]; };
  for (uint32_t b = 0; b < rows_; ++b) {
    const uint32_t s = uint32_t(beam_idx[b]);
    r.lengths[b] = lengths[s];
    std::copy_n(refs_.begin() + int64_t(uint64_t(s) * rows_), rows_,
                r.refs.begin() + int64_t(uint64_t(b) * rows_));
    if (s != b) {
      // Row b already agrees with row s on their shared prefix.
      const uint32_t begin = std::min(old_common(b, s), lengths[s]);
      if (begin < lengths[s]) {
        r.moves.push_back(Move{b, s, begin, lengths[s]});
        r.entries += lengths[s] - begin;
      }
    }
  }
  for (uint32_t b = 0; b < rows_; ++b) {
    const uint32_t sb = uint32_t(beam_idx[b]);
    for (uint32_t c = 0; c < rows_; ++c) {
      const uint32_t sc = uint32_t(beam_idx[c]);
      // Rows that took the same source are equal over its whole length.
      r.common[uint64_t(b) * rows_ + c] = sb == sc ? lengths[sb] : old_common(sb, sc);
    }
  }
  return r;
}

void BeamBook::commit(Reorder&& r) noexcept {
  common_.swap(r.common);
  refs_.swap(r.refs);
}

void BeamBook::tighten(const int32_t* table, uint32_t stride,
                       const std::vector<uint32_t>& lengths) noexcept {
  if (!active_) return;
  for (uint32_t c = 0; c < rows_; ++c) {
    std::fill_n(refs_.begin() + int64_t(uint64_t(c) * rows_), rows_, 0u);
    const int32_t* row = table + uint64_t(c) * stride;
    for (uint32_t t = 0; t < lengths[c] && t < stride; ++t)
      if (row[t] >= 0 && uint32_t(row[t]) < rows_) refs(c, uint32_t(row[t])) = t + 1;
  }
}

void BeamBook::on_append(uint32_t row, uint32_t end) noexcept {
  if (!active_) return;
  refs(row, row) = std::max(refs(row, row), end);
  common(row, row) = std::max(common(row, row), end);
}

void BeamBook::on_trim(uint32_t row, uint32_t length) noexcept {
  if (!active_) return;
  for (uint32_t x = 0; x < rows_; ++x) {
    refs(row, x) = std::min(refs(row, x), length);
    common(row, x) = std::min(common(row, x), length);
    common(x, row) = std::min(common(x, row), length);
  }
}

void BeamBook::on_import(uint32_t row, uint32_t length) noexcept {
  if (!active_) return;
  for (uint32_t x = 0; x < rows_; ++x) {
    refs(row, x) = 0;
    common(row, x) = 0;
    common(x, row) = 0;
  }
  refs(row, row) = length;
  common(row, row) = length;
}

}  // namespace kvc
