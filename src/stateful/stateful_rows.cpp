// StatefulCache: trim, reset, and a row's state saved to / restored from a
// host buffer (OpenVINO's VariableState get/set).
#include <algorithm>
#include <cstring>
#include <string>

#include "base/error.h"
#include "stateful/stateful_cache.h"

namespace kvc {

namespace {

std::string str(uint64_t v) { return std::to_string(v); }

}  // namespace

void StatefulCache::trim(uint32_t row, uint32_t num_tokens, void* stream) {
  std::lock_guard<std::mutex> lock(mu_);
  if (row != KVC_STATEFUL_ALL_ROWS && row >= B_)
    invalid_argument("row must be < batch (" + str(B_) + ") or KVC_STATEFUL_ALL_ROWS, got " +
                     str(row));
  require_equal_layers("kvc_stateful_trim");
  const uint32_t first = row == KVC_STATEFUL_ALL_ROWS ? 0 : row;
  const uint32_t last = row == KVC_STATEFUL_ALL_ROWS ? B_ : row + 1;
  for (uint32_t r = first; r < last; ++r)
    if (num_tokens > len(0, r))
      invalid_argument("cannot trim " + str(num_tokens) + " tokens from row " + str(r) +
                       ", which has " + str(len(0, r)));
  if (num_tokens == 0) return;
  std::vector<uint32_t> saved = len_;
  for (uint32_t r = first; r < last; ++r)
    for (uint32_t l = 0; l < L_; ++l) len(l, r) -= num_tokens;
  try {
    upload_lengths(stream);
  } catch (...) {
    len_.swap(saved);
    throw;
  }
  for (uint32_t r = first; r < last; ++r) book_.on_trim(r, len(0, r));
}

void StatefulCache::reset(bool release_memory, void* stream) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<uint32_t> saved(len_.size(), 0);
  len_.swap(saved);
  try {
    upload_lengths(stream);
  } catch (...) {
    len_.swap(saved);
    throw;
  }
  free_table(stream);
  if (!release_memory) return;
  for (Layer& l : layers_) {
    if (l.buf == nullptr) continue;
    dev_->deallocate_on(l.buf, stream);
    track_free(l.bytes);
    stats_.kv_bytes -= l.bytes;
    l.buf = nullptr;
    l.capacity = 0;
    l.bytes = 0;
  }
}

uint64_t StatefulCache::export_row(uint32_t row, void* buffer, uint64_t capacity, void* stream) {
  std::lock_guard<std::mutex> lock(mu_);
  if (row >= B_) invalid_argument("row must be < batch (" + str(B_) + "), got " + str(row));
  require_equal_layers("kvc_stateful_export_row");
  const StateGeometry g = geometry();
  const uint32_t length = len(0, row);
  const uint64_t size = state_bytes(g, length);
  if (capacity < size) return size;
  if (buffer == nullptr) invalid_argument("buffer must not be NULL when capacity > 0");
  auto* out = static_cast<unsigned char*>(buffer);
  write_state_header(g, length, out);
  uint64_t at = state_header_bytes(L_);
  // On the CPU the gather writes the caller's buffer; on a GPU a device
  // staging buffer of the largest layer, copied out layer by layer.
  const bool host = dev_->kind() == KVC_DEVICE_CPU;
  uint64_t stage_bytes = 0;
  for (uint32_t l = 0; l < L_; ++l) stage_bytes = std::max(stage_bytes, state_layer_bytes(g, l, length));
  void* stage = nullptr;
  if (!host && stage_bytes > 0) {
    stage = dev_->allocate_on(stage_bytes, stream);
    stats_.peak_bytes = std::max(stats_.peak_bytes, stats_.bytes_allocated + stage_bytes);
  }
  try {
    for (uint32_t l = 0; l < L_; ++l) {
      const uint64_t bytes = state_layer_bytes(g, l, length);
      if (bytes == 0) continue;
      RowGatherWork w;
      w.src = row_layer(l);
      w.dst = row_layer_of(l, host ? out + at : stage, length);
      w.dst.kv_stride = w.dst.row_stride;  // one row: K then V
      w.table = book_.active() ? table_ : nullptr;
      w.table_stride = table_cap_;
      w.first_row = row;
      w.num_rows = 1;
      w.length = length;
      dev_->gather_rows(w, stream);
      if (!host)
        dev_->copy_2d(out + at, bytes, stage, bytes, bytes, 1, CopyKind::kDeviceToHost, stream);
      at += bytes;
    }
    dev_->synchronize(stream);
  } catch (...) {
    if (stage != nullptr) dev_->deallocate_on(stage, stream);
    throw;
  }
  if (stage != nullptr) dev_->deallocate_on(stage, stream);
  return size;
}

void StatefulCache::import_row(uint32_t row, const void* buffer, uint64_t size, void* stream) {
  std::lock_guard<std::mutex> lock(mu_);
  if (row >= B_) invalid_argument("row must be < batch (" + str(B_) + "), got " + str(row));
  if (buffer == nullptr) invalid_argument("buffer must not be NULL");
  const StateGeometry g = geometry();
  const uint32_t length = read_state_header(g, buffer, size);
  if (length > policy_.max_length)
    invalid_argument("state buffer holds " + str(length) + " positions, above max_length " +
                     str(policy_.max_length));
  require_equal_layers("kvc_stateful_import_row");
  std::vector<int32_t> table;
  uint32_t at = 0;
  const int64_t reader = book_.reader_of(row, 0) >= 0
                             ? exact_reader(table, L_, row, 0, UINT32_MAX, &at, stream)
                             : -1;
  if (reader >= 0)
    fail(KVC_ERR_INVALID_STATE, "row " + str(uint64_t(reader)) + " reads row " + str(row) +
                                    "'s buffer at position " + str(at) +
                                    " through the beam table, so importing into row " +
                                    str(row) + " would change its history; call "
                                    "kvc_stateful_compact() first");
  std::vector<Growth> growths;
  for (uint32_t l = 0; l < L_; ++l) plan_growth(l, length, growths);
  plan_table_growth(length, growths);
  allocate_growths(growths, stream);
  install_growths(growths, stream);

  const auto* in = static_cast<const unsigned char*>(buffer) + state_header_bytes(L_);
  const uint64_t D = cfg_.head_dim;
  for (uint32_t l = 0; l < L_; ++l) {
    if (length == 0) break;
    const RowLayer r = row_layer(l);
    const uint64_t H = r.kv_heads;
    auto* dst = static_cast<unsigned char*>(r.base) + uint64_t(row) * r.row_stride;
    for (uint32_t k = 0; k < cfg_.kv_factor; ++k) {
      const uint64_t part = H * length * D * es_;  // one of K, V
      if (layout_ == KVC_LAYOUT_HND)
        dev_->copy_2d(dst + k * r.kv_stride, r.head_stride, in, uint64_t(length) * D * es_,
                      uint64_t(length) * D * es_, H, CopyKind::kHostToDevice, stream);
      else
        dev_->copy_2d(dst + k * r.kv_stride, part, in, part, part, 1, CopyKind::kHostToDevice,
                      stream);
      in += part;
    }
  }
  if (book_.active()) fill_table(row, 1, 0, length, stream);
  std::vector<uint32_t> saved = len_;
  for (uint32_t l = 0; l < L_; ++l) len(l, row) = length;
  try {
    upload_lengths(stream);
  } catch (...) {
    len_.swap(saved);
    throw;
  }
  book_.on_import(row, length);
}

}  // namespace kvc
