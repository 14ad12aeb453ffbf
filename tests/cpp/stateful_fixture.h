// Helpers of the stateful mode tests: configs, random K/V, a naive
// reference (each row's history as plain concatenated bytes) and a CPU
// device whose allocations fail when armed.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "backend/cpu_device.h"
#include "backend/numeric.h"
#include "core/dtype.h"
#include "core/error.h"
#include "stateful/stateful_cache.h"

namespace kvc {
namespace test {

inline CacheConfig stateful_config(uint32_t layers, std::vector<uint32_t> heads, uint32_t dim,
                                   kvc_dtype_t dtype, uint32_t kv_factor = 2) {
  CacheConfig c;
  c.num_layers = layers;
  c.kv_heads = std::move(heads);
  c.head_dim = dim;
  c.dtype = dtype;
  c.kv_factor = kv_factor;
  return c;
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

// The CPU backend whose stream-ordered allocations (growth, table,
// scratch) fail when armed.
class FailingAllocDevice final : public Device {
 public:
  // The n-th allocate_on from now fails (1: the next); 0 disarms.
  void fail_alloc(uint32_t n) { fail_in_ = n; }

  kvc_device_kind_t kind() const override { return inner_.kind(); }
  int32_t ordinal() const override { return 0; }
  std::string name() const override { return "cpu (failing allocations)"; }
  DeviceMemoryInfo memory_info() const override { return {}; }
  void* allocate(uint64_t bytes) override { return inner_.allocate(bytes); }
  void deallocate(void* p) noexcept override { inner_.deallocate(p); }
  void* allocate_on(uint64_t bytes, void* stream) override {
    if (fail_in_ != 0 && --fail_in_ == 0)
      fail(KVC_ERR_OUT_OF_MEMORY, "injected allocation failure of " + std::to_string(bytes) +
                                      " bytes");
    return inner_.allocate_on(bytes, stream);
  }
  void deallocate_on(void* p, void* stream) noexcept override { inner_.deallocate_on(p, stream); }
  void* allocate_host(uint64_t bytes) override { return inner_.allocate_host(bytes); }
  void deallocate_host(void* p) noexcept override { inner_.deallocate_host(p); }
  void copy_blocks(void* base, const BlockGeometry& g, const BlockCopy* c, size_t n,
                   void* stream) override {
    inner_.copy_blocks(base, g, c, n, stream);
  }
  void copy_tier(TierDirection d, void* dev, void* host, uint64_t bytes, const TierCopy* c,
                 size_t n, void* stream) override {
    inner_.copy_tier(d, dev, host, bytes, c, n, stream);
  }
  void synchronize(void*) override {}
  void copy_2d(void* dst, uint64_t dp, const void* src, uint64_t sp, uint64_t w, uint64_t h,
               CopyKind k, void* s) override {
    inner_.copy_2d(dst, dp, src, sp, w, h, k, s);
  }
  void stateful_append(const StatefulAppendWork& w, void* s) override { inner_.stateful_append(w, s); }
  void table_reorder(const TableReorderWork& w, void* s) override { inner_.table_reorder(w, s); }
  void gather_rows(const RowGatherWork& w, void* s) override { inner_.gather_rows(w, s); }
  void decode_attention(const DecodeWork& w, void* s) override { inner_.decode_attention(w, s); }

 private:
  CpuDevice inner_;
  uint32_t fail_in_ = 0;
};

}  // namespace test
}  // namespace kvc
