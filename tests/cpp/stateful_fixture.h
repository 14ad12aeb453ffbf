// Helpers of the stateful mode tests: models, random K/V and a naive
// reference (each row's history as plain concatenated bytes).
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "backend/cpu_device.h"
#include "backend/numeric.h"
#include "base/dtype.h"
#include "base/error.h"
#include "kv_content.h"
#include "stateful/stateful_cache.h"

namespace kvc {
namespace test {

inline StatefulModel stateful_config(uint32_t layers, std::vector<uint32_t> heads, uint32_t dim,
                                     kvc_dtype_t dtype, uint32_t kv_factor = 2) {
  StatefulModel m;
  m.num_layers = layers;
  if (heads.size() == 1) heads.assign(layers, heads[0]);
  m.kv_heads = std::move(heads);
  m.head_dim = dim;
  m.dtype = dtype;
  m.kv_factor = kv_factor;
  return m;
}

inline StatefulOptions stateful_options(uint32_t batch, kvc_layout_t layout, uint32_t step,
                                        bool staggered = true) {
  StatefulOptions o;
  o.batch = batch;
  o.layout = layout;
  o.growth_step = step;
  o.staggered = staggered;
  return o;
}

// Random elements of `dtype` as raw bytes; fp8 avoids the NaN codes and
// stays small so attention scores stay finite.
inline std::vector<unsigned char> random_elems(std::mt19937& rng, kvc_dtype_t dtype, size_t n) {
  std::vector<unsigned char> out(n * dtype_size(dtype));
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (size_t i = 0; i < n; ++i) store_f32(out.data(), dtype, i, u(rng));
  return out;
}

// Each (layer, row)'s history, per kv and head: position-major D-element
// rows, exactly the bytes the cache must hold in order.
struct NaiveHistory {
  uint32_t L, B, D;
  size_t es;
  uint32_t kv_factor;
  std::vector<uint32_t> heads;
  // [layer][row][kv][head] -> bytes
  std::vector<std::vector<unsigned char>> data;

  NaiveHistory(uint32_t l, uint32_t b, std::vector<uint32_t> h, uint32_t d, size_t e, uint32_t kvf)
      : L(l), B(b), D(d), es(e), kv_factor(kvf), heads(std::move(h)) {
    data.resize(size_t(L) * B * 2 * 64);
  }
  std::vector<unsigned char>& at(uint32_t l, uint32_t r, uint32_t k, uint32_t h) {
    return data[((size_t(l) * B + r) * 2 + k) * 64 + h];
  }
  uint32_t length(uint32_t l, uint32_t r) {
    return uint32_t(at(l, r, 0, 0).size() / (D * es));
  }
  // Appends row r's first n positions of a source in the cache layout
  // ([B][n][H][D] for NHD, [B][H][n][D] for HND) holding `num` positions.
  void append(uint32_t l, uint32_t r, uint32_t k, const unsigned char* src, uint32_t num,
              uint32_t n, kvc_layout_t layout) {
    const uint32_t H = heads[l];
    for (uint32_t h = 0; h < H; ++h)
      for (uint32_t j = 0; j < n; ++j) {
        const size_t e = layout == KVC_LAYOUT_HND ? ((size_t(r) * H + h) * num + j) * D
                                                  : ((size_t(r) * num + j) * H + h) * D;
        auto& v = at(l, r, k, h);
        v.insert(v.end(), src + e * es, src + (e + D) * es);
      }
  }
  void trim(uint32_t l, uint32_t r, uint32_t n) {
    for (uint32_t k = 0; k < kv_factor; ++k)
      for (uint32_t h = 0; h < heads[l]; ++h) at(l, r, k, h).resize(at(l, r, k, h).size() - n * D * es);
  }
  // Row b takes row idx[b]'s history (beam search's gather).
  void reorder(const std::vector<int32_t>& idx) {
    NaiveHistory old = *this;
    for (uint32_t l = 0; l < L; ++l)
      for (uint32_t b = 0; b < B; ++b)
        for (uint32_t k = 0; k < kv_factor; ++k)
          for (uint32_t h = 0; h < heads[l]; ++h) at(l, b, k, h) = old.at(l, uint32_t(idx[b]), k, h);
  }
};

// Empty string when the cache's bytes of every row of `layer` (read through
// its beam table) equal the reference; else what differs.
inline std::string compare_layer(const StatefulCache& c, uint32_t layer, NaiveHistory& ref) {
  const kvc_stateful_view_t v = c.view(layer);
  const std::vector<uint32_t> lens = c.lengths(layer);
  for (uint32_t r = 0; r < ref.B; ++r) {
    if (lens[r] != ref.length(layer, r))
      return "row " + std::to_string(r) + " length " + std::to_string(lens[r]) + " != " +
             std::to_string(ref.length(layer, r));
    for (uint32_t k = 0; k < ref.kv_factor; ++k)
      for (uint32_t h = 0; h < ref.heads[layer]; ++h)
        for (uint32_t t = 0; t < lens[r]; ++t) {
          const uint32_t src = v.beam_table != nullptr
                                   ? uint32_t(v.beam_table[size_t(r) * v.beam_table_stride + t])
                                   : r;
          const auto* p = static_cast<const unsigned char*>(k == 0 ? v.key : v.value) +
                          src * v.row_stride + h * v.head_stride + t * v.token_stride;
          if (std::memcmp(p, ref.at(layer, r, k, h).data() + size_t(t) * ref.D * ref.es,
                          ref.D * ref.es) != 0)
            return "layer " + std::to_string(layer) + " row " + std::to_string(r) + " kv " +
                   std::to_string(k) + " head " + std::to_string(h) + " position " +
                   std::to_string(t) + " differs";
        }
  }
  return {};
}

}  // namespace test
}  // namespace kvc
