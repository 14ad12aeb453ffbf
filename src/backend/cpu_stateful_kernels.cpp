// The CPU backend's work for the stateful mode: plain loops, the oracle the
// CUDA kernels (cuda/stateful_kernels.cu) are checked against.
#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cpu_device.h"
#include "backend/numeric.h"
#include "base/dtype.h"

namespace kvc {

namespace {

unsigned char* at(const RowLayer& l, uint64_t row, uint32_t k, uint32_t head, uint64_t pos) {
  return static_cast<unsigned char*>(l.base) + row * l.row_stride + k * l.kv_stride +
         uint64_t(head) * l.head_stride + pos * l.token_stride;
}

}  // namespace

void CpuDevice::copy_2d(void* dst, uint64_t dst_pitch, const void* src, uint64_t src_pitch,
                        uint64_t width, uint64_t height, CopyKind /*kind*/, void* /*stream*/) {
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  for (uint64_t r = 0; r < height; ++r) std::memmove(d + r * dst_pitch, s + r * src_pitch, width);
}

void CpuDevice::stateful_append(const StatefulAppendWork& w, void* /*stream*/) {
  const RowLayer& kv = w.kv;
  const uint64_t D = kv.head_dim;
  const uint64_t src_es = dtype_size(w.src_dtype);
  const bool same = w.src_dtype == kv.dtype;
  const void* src[2] = {w.key, w.value};
  const float scale[2] = {w.k_scale, w.v_scale};
  for (uint32_t r = 0; r < kv.rows; ++r) {
    const uint32_t pos = w.positions[r];
    for (uint32_t j = 0; j < w.counts[r]; ++j) {
      for (uint32_t k = 0; k < kv.kv_factor; ++k) {
        for (uint32_t h = 0; h < kv.kv_heads; ++h) {
          const unsigned char* in = static_cast<const unsigned char*>(src[k]) +
                                    r * w.src_row_stride + h * w.src_head_stride +
                                    j * w.src_token_stride;
          unsigned char* out = at(kv, r, k, h, uint64_t(pos) + j);
          if (same) {
            std::memcpy(out, in, D * src_es);
            continue;
          }
          // fp8 quantization: x / scale, as store_kv does.
          for (uint64_t d = 0; d < D; ++d)
            out[d] = f32_to_fp8e4m3(load_f32(in, w.src_dtype, d) / scale[k]);
        }
      }
      if (w.table != nullptr) w.table[uint64_t(r) * w.table_stride + pos + j] = int32_t(r);
    }
    w.lengths[r] = int32_t(pos + w.counts[r]);
  }
}

void CpuDevice::table_reorder(const TableReorderWork& w, void* /*stream*/) {
  // Every read first: a listed source may itself be rewritten.
  std::vector<std::vector<int32_t>> rows(w.count);
  for (uint32_t i = 0; i < w.count; ++i) {
    const int32_t* s = w.table + uint64_t(w.src[i]) * w.table_stride;
    rows[i].assign(s + w.begin[i], s + w.end[i]);
  }
  for (uint32_t i = 0; i < w.count; ++i)
    std::copy(rows[i].begin(), rows[i].end(),
              w.table + uint64_t(w.dst[i]) * w.table_stride + w.begin[i]);
  for (uint32_t l = 0; l < w.num_layers; ++l)
    for (uint32_t r = 0; r < w.rows; ++r)
      w.lengths[uint64_t(l) * w.rows + r] = int32_t(w.new_lengths[r]);
}

void CpuDevice::gather_rows(const RowGatherWork& w, void* /*stream*/) {
  const uint64_t row_bytes = uint64_t(w.src.head_dim) * dtype_size(w.src.dtype);
  for (uint32_t i = 0; i < w.num_rows; ++i) {
    const uint32_t b = w.first_row + i;
    for (uint32_t t = 0; t < w.length; ++t) {
      const uint32_t s =
          w.table != nullptr ? uint32_t(w.table[uint64_t(b) * w.table_stride + t]) : b;
      for (uint32_t k = 0; k < w.src.kv_factor; ++k)
        for (uint32_t h = 0; h < w.src.kv_heads; ++h)
          std::memcpy(at(w.dst, i, k, h, t), at(w.src, s, k, h, t), row_bytes);
    }
  }
}

}  // namespace kvc
