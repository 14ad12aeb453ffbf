// StatefulCache: the beam table (create, fill, reorder) and compaction.
#include <algorithm>
#include <string>

#include "base/error.h"
#include "stateful/stateful_cache.h"

namespace kvc {

namespace {

std::string str(uint64_t v) { return std::to_string(v); }

}  // namespace

void StatefulCache::fill_table(uint32_t first, uint32_t n, uint32_t from, uint32_t to,
                               void* stream) {
  if (from >= to || n == 0) return;
  const uint64_t width = to - from;
  std::vector<int32_t> ids(width * n);
  for (uint32_t i = 0; i < n; ++i)
    std::fill_n(ids.begin() + int64_t(i * width), width, int32_t(first + i));
  dev_->copy_2d(table_ + uint64_t(first) * table_cap_ + from, 4ull * table_cap_, ids.data(),
                4 * width, 4 * width, n, CopyKind::kHostToDevice, stream);
}

int64_t StatefulCache::exact_reader(std::vector<int32_t>& table, uint32_t layer, uint32_t row,
                                    uint32_t from, uint32_t to, uint32_t* position, void* stream) {
  if (table.empty()) {
    table.resize(uint64_t(B_) * table_cap_);
    dev_->copy_2d(table.data(), 4ull * table_cap_, table_, 4ull * table_cap_, 4ull * table_cap_, B_,
                  CopyKind::kDeviceToHost, stream);
    dev_->synchronize(stream);
    std::vector<uint32_t> longest(B_, 0);
    for (uint32_t l = 0; l < L_; ++l)
      for (uint32_t r = 0; r < B_; ++r) longest[r] = std::max(longest[r], len(l, r));
    book_.tighten(table.data(), table_cap_, longest);
  }
  for (uint32_t c = 0; c < B_; ++c) {
    if (c == row) continue;
    uint32_t end = 0;
    for (uint32_t l = 0; l < L_; ++l)
      if (layer == L_ || l == layer) end = std::max(end, len(l, c));
    end = std::min(end, to);
    for (uint32_t t = from; t < end; ++t)
      if (table[uint64_t(c) * table_cap_ + t] == int32_t(row)) {
        *position = t;
        return c;
      }
  }
  return -1;
}

void StatefulCache::create_table(uint32_t capacity, void* stream) {
  const uint64_t bytes = 4ull * B_ * capacity;
  auto* t = static_cast<int32_t*>(dev_->allocate_on(bytes, stream));
  try {
    table_ = t;
    table_cap_ = capacity;
    fill_table(0, B_, 0, capacity, stream);
    book_.activate(row_lengths());
  } catch (...) {
    table_ = nullptr;
    table_cap_ = 0;
    dev_->deallocate_on(t, stream);
    throw;
  }
  stats_.table_bytes = bytes;
  track_alloc(bytes);
}

void StatefulCache::free_table(void* stream) noexcept {
  book_.deactivate();
  if (table_ == nullptr) return;
  dev_->deallocate_on(table_, stream);
  track_free(stats_.table_bytes);
  stats_.table_bytes = 0;
  table_ = nullptr;
  table_cap_ = 0;
}

void StatefulCache::reorder(const int32_t* beam_idx, uint32_t count, void* stream) {
  std::lock_guard<std::mutex> lock(mu_);
  if (beam_idx == nullptr) invalid_argument("beam_idx must not be NULL");
  if (count != B_)
    invalid_argument("beam_idx has " + str(count) + " entries, the cache has batch " + str(B_));
  bool identity = true;
  for (uint32_t b = 0; b < B_; ++b) {
    if (beam_idx[b] < 0 || uint32_t(beam_idx[b]) >= B_)
      invalid_argument("beam_idx[" + str(b) + "] = " + std::to_string(beam_idx[b]) +
                       " is outside [0, " + str(B_) + ")");
    identity = identity && uint32_t(beam_idx[b]) == b;
  }
  require_equal_layers("kvc_stateful_reorder");
  if (identity) return;

  const std::vector<uint32_t> lengths = row_lengths();
  const bool created = !book_.active();
  if (created) {
    const uint32_t longest = *std::max_element(lengths.begin(), lengths.end());
    const uint64_t cap = (std::max<uint64_t>(longest, 1) + policy_.step - 1) / policy_.step *
                         policy_.step;
    create_table(uint32_t(std::min<uint64_t>(cap, policy_.max_length)), stream);
  }
  try {
    BeamBook::Reorder plan = book_.plan_reorder(beam_idx, lengths);
    std::vector<uint32_t> dst, src, begin, end;
    for (const BeamBook::Move& m : plan.moves) {
      dst.push_back(m.dst);
      src.push_back(m.src);
      begin.push_back(m.begin);
      end.push_back(m.end);
    }
    TableReorderWork w;
    w.table = table_;
    w.table_stride = table_cap_;
    w.rows = B_;
    w.count = uint32_t(plan.moves.size());
    w.dst = dst.data();
    w.src = src.data();
    w.begin = begin.data();
    w.end = end.data();
    w.lengths = lengths_dev_;
    w.num_layers = L_;
    w.new_lengths = plan.lengths.data();
    dev_->table_reorder(w, stream);
    for (uint32_t l = 0; l < L_; ++l)
      std::copy(plan.lengths.begin(), plan.lengths.end(), len_.begin() + int64_t(uint64_t(l) * B_));
    ++stats_.reorders;
    stats_.table_entries_copied += plan.entries;
    book_.commit(std::move(plan));
  } catch (...) {
    if (created) free_table(stream);
    throw;
  }
}

void StatefulCache::compact(void* stream) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!book_.active()) return;
  require_equal_layers("kvc_stateful_compact");
  uint64_t scratch_bytes = 0;
  for (const Layer& l : layers_) scratch_bytes = std::max(scratch_bytes, l.bytes);
  void* scratch = scratch_bytes > 0 ? dev_->allocate_on(scratch_bytes, stream) : nullptr;
  stats_.peak_bytes = std::max(stats_.peak_bytes, stats_.bytes_allocated + scratch_bytes);
  try {
    for (uint32_t l = 0; l < L_; ++l) {
      const Layer& layer = layers_[l];
      const uint32_t length = max_len(l);
      if (layer.buf == nullptr || length == 0) continue;
      // Gather into the scratch buffer (same strides), then copy back.
      RowGatherWork w;
      w.src = row_layer(l);
      w.dst = row_layer_of(l, scratch, layer.capacity);
      w.table = table_;
      w.table_stride = table_cap_;
      w.first_row = 0;
      w.num_rows = B_;
      w.length = length;
      dev_->gather_rows(w, stream);
      copy_positions(l, layer.buf, layer.capacity, scratch, layer.capacity, length, stream);
    }
  } catch (...) {
    dev_->deallocate_on(scratch, stream);
    throw;
  }
  dev_->deallocate_on(scratch, stream);
  ++stats_.compactions;
  free_table(stream);
}

}  // namespace kvc
