// A prefill attention case for the tests (CPU tests here, CUDA tests in
// tests/gpu): a cache of a given shape, a ragged batch of (q_len, kv_len)
// sequences on distinct random blocks, random K/V in every token a
// sequence holds and poison (all bits set: NaN in f32, f16, bf16 and
// fp8-e4m3) everywhere else, so that reading a wrong block, a token past
// kv_len or a block before the window poisons the output. Block table
// entries wholly before the first query's window are -1. The naive
// reference computes each row in double from the pool, one token at a time.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "backend/numeric.h"
#include "kvcache/kvcache.h"

namespace prefill_case {

inline size_t elem_size(kvc_dtype_t d) {
  return d == KVC_DTYPE_F32 ? 4 : d == KVC_DTYPE_FP8_E4M3 ? 1 : 2;
}

inline const char* dtype_str(kvc_dtype_t d) {
  switch (d) {
    case KVC_DTYPE_F32: return "f32";
    case KVC_DTYPE_F16: return "f16";
    case KVC_DTYPE_BF16: return "bf16";
    default: return "fp8";
  }
}

struct Spec {
  kvc_dtype_t dtype = KVC_DTYPE_BF16;  // cache
  kvc_dtype_t q_dtype = KVC_DTYPE_BF16;
  kvc_layout_t layout = KVC_LAYOUT_NHD;
  uint32_t layers = 2;
  uint32_t kv_heads = 2;
  uint32_t q_heads = 4;
  uint32_t head_dim = 64;
  uint32_t tokens_per_block = 16;
  uint32_t kv_factor = 2;
  std::vector<uint32_t> windows;  // the config's per-layer windows
  uint32_t layer = 0;
  uint32_t window = 0;  // args.window
  float soft_cap = 0.0f;
  float softmax_scale = 0.0f;
  float k_scale = 1.0f;
  float v_scale = 1.0f;
  std::vector<std::pair<uint32_t, uint32_t>> seqs;  // (q_len, kv_len)

  uint32_t resolved_window() const {
    if (window != 0) return window;
    return windows.empty() ? 0 : windows[layer % windows.size()];
  }
  uint64_t tokens_needed() const {
    uint64_t n = 0;
    for (const auto& s : seqs) n += (s.second + tokens_per_block - 1) / tokens_per_block + 1;
    return n * tokens_per_block + 64 * tokens_per_block;
  }
  std::string str() const {
    std::string s = std::string(dtype_str(dtype)) + " q " + dtype_str(q_dtype) +
                    (layout == KVC_LAYOUT_NHD ? " NHD" : " HND") + " heads " +
                    std::to_string(q_heads) + "/" + std::to_string(kv_heads) + " dim " +
                    std::to_string(head_dim) + " T " + std::to_string(tokens_per_block) +
                    " kvf " + std::to_string(kv_factor) + " window " +
                    std::to_string(resolved_window()) + " cap " + std::to_string(soft_cap) +
                    " seqs";
    for (const auto& q : seqs) s += " " + std::to_string(q.first) + "/" + std::to_string(q.second);
    return s;
  }
};

inline kvc_cache_t* make_cache(const Spec& s, kvc_device_kind_t kind) {
  kvc_config_t* c = nullptr;
  if (kvc_config_create(&c) != KVC_OK) return nullptr;
  kvc_config_set_num_layers(c, s.layers);
  kvc_config_set_kv_heads(c, s.kv_heads);
  kvc_config_set_head_dim(c, s.head_dim);
  kvc_config_set_dtype(c, s.dtype);
  kvc_config_set_layout(c, s.layout);
  kvc_config_set_kv_factor(c, s.kv_factor);
  kvc_config_set_tokens_per_block(c, s.tokens_per_block);
  kvc_config_set_max_tokens(c, s.tokens_needed());
  if (!s.windows.empty()) kvc_config_set_attention_windows(c, s.windows.data(), s.windows.size());
  kvc_config_set_device(c, kind, 0);
  kvc_cache_t* cache = nullptr;
  const kvc_status_t st = kvc_cache_create(c, &cache);
  kvc_config_destroy(c);
  return st == KVC_OK ? cache : nullptr;
}

// Host-side inputs of a case, all in host memory.
struct Inputs {
  std::vector<int32_t> qo_indptr{0}, kv_lens;
  std::vector<int32_t> padded, csr_indices, csr_indptr{0};
  uint32_t stride = 0;
  uint32_t max_kv_len = 1;
  uint32_t total_q = 0;
  std::vector<unsigned char> query;
  std::vector<unsigned char> pool;  // the whole pool's bytes
};

// Builds the inputs against `view` (the case's layer) of a pool of
// `pool_bytes` bytes.
inline Inputs make_inputs(const Spec& s, const kvc_layer_view_t& view, uint64_t pool_bytes,
                          const void* pool_base, std::mt19937_64& rng) {
  Inputs in;
  const uint32_t T = s.tokens_per_block;
  const uint32_t window = s.resolved_window();
  in.pool.assign(pool_bytes, 0xFF);
  for (const auto& q : s.seqs) {
    in.total_q += q.first;
    in.qo_indptr.push_back(int32_t(in.total_q));
    in.kv_lens.push_back(int32_t(q.second));
    in.max_kv_len = std::max(in.max_kv_len, q.second);
  }
  in.stride = (in.max_kv_len + T - 1) / T + 1;
  const uint32_t batch = uint32_t(s.seqs.size());
  in.padded.assign(size_t(batch) * in.stride, -1);
  std::vector<int32_t> blocks(view.num_blocks);
  std::iota(blocks.begin(), blocks.end(), 0);
  std::shuffle(blocks.begin(), blocks.end(), rng);
  std::uniform_real_distribution<float> kv_dist(-2.0f, 2.0f), q_dist(-1.0f, 1.0f);
  const size_t es = elem_size(s.dtype);
  const auto base_offset =
      uint64_t(static_cast<const unsigned char*>(view.base) - static_cast<const unsigned char*>(pool_base));
  size_t next = 0;
  for (uint32_t b = 0; b < batch; ++b) {
    const uint32_t q_len = s.seqs[b].first, len = s.seqs[b].second;
    const uint32_t prefix = len - q_len;
    const uint32_t lo = (window != 0 && prefix + 1 > window) ? prefix + 1 - window : 0;
    const uint32_t need = (len + T - 1) / T;
    for (uint32_t j = 0; j < need; ++j) {
      const bool read = q_len > 0 && j >= lo / T;
      const int32_t id = read ? blocks[next++] : -1;
      in.padded[size_t(b) * in.stride + j] = id;
      in.csr_indices.push_back(id);
      if (!read) continue;
      for (uint32_t t = j * T; t < std::min(len, (j + 1) * T); ++t)
        for (uint32_t k = 0; k < view.kv_factor; ++k)
          for (uint32_t h = 0; h < view.kv_heads; ++h) {
            const uint64_t at = base_offset + uint64_t(id) * view.block_stride +
                                k * view.kv_stride + (t % T) * view.token_stride +
                                h * view.head_stride;
            for (uint32_t d = 0; d < view.head_dim; ++d)
              kvc::store_f32(in.pool.data() + at + d * es, s.dtype, 0, kv_dist(rng));
          }
    }
    if (b % 2 == 1) in.csr_indices.push_back(-1);  // CSR rows may be longer than needed
    in.csr_indptr.push_back(int32_t(in.csr_indices.size()));
  }
  const size_t q_elems = size_t(in.total_q) * s.q_heads * s.head_dim;
  in.query.resize(q_elems * elem_size(s.q_dtype));
  for (size_t i = 0; i < q_elems; ++i) kvc::store_f32(in.query.data(), s.q_dtype, i, q_dist(rng));
  if (in.csr_indices.empty()) in.csr_indices.push_back(-1);
  return in;
}

// The arguments of a case over host pointers (device pointers are set by
// the caller for a CUDA cache).
inline kvc_prefill_args_t make_args(const Spec& s, const Inputs& in, bool csr) {
  kvc_prefill_args_t a = KVC_PREFILL_ARGS_INIT;
  a.layer = s.layer;
  a.batch = uint32_t(s.seqs.size());
  a.total_q = in.total_q;
  a.q_heads = s.q_heads;
  a.q_dtype = s.q_dtype;
  a.table_format = csr ? KVC_TABLE_CSR : KVC_TABLE_PADDED;
  a.query = in.query.data();
  a.qo_indptr = in.qo_indptr.data();
  a.kv_lens = in.kv_lens.data();
  a.block_table = csr ? in.csr_indices.data() : in.padded.data();
  a.indptr = csr ? in.csr_indptr.data() : nullptr;
  a.table_stride = csr ? 0 : in.stride;
  a.max_kv_len = in.max_kv_len;
  a.window = s.window;
  a.softmax_scale = s.softmax_scale;
  a.logits_soft_cap = s.soft_cap;
  a.k_scale = s.k_scale;
  a.v_scale = s.v_scale;
  return a;
}

// The naive reference in double: out [total_q][q_heads][head_dim] and
// lse [total_q][q_heads] (natural log).
inline void reference(const Spec& s, const Inputs& in, const kvc_layer_view_t& view,
                      const void* pool_base, std::vector<double>* out, std::vector<double>* lse) {
  const uint32_t D = s.head_dim, T = s.tokens_per_block;
  const uint32_t G = s.q_heads / s.kv_heads;
  const uint32_t window = s.resolved_window();
  const double scale = s.softmax_scale != 0.0f ? s.softmax_scale : 1.0 / std::sqrt(double(D));
  const bool fp8 = s.dtype == KVC_DTYPE_FP8_E4M3;
  const uint64_t base_offset = uint64_t(static_cast<const unsigned char*>(view.base) -
                                        static_cast<const unsigned char*>(pool_base));
  const size_t es = elem_size(s.dtype);
  out->assign(size_t(in.total_q) * s.q_heads * D, 0.0);
  lse->assign(size_t(in.total_q) * s.q_heads, 0.0);
  const uint32_t vk = s.kv_factor == 2 ? 1 : 0;
  const double ks = fp8 ? s.k_scale : 1.0, vs = fp8 ? s.v_scale : 1.0;
  std::vector<double> keys, values, q(D), scores, acc(D);
  for (size_t b = 0; b < s.seqs.size(); ++b) {
    const uint32_t q_len = s.seqs[b].first, len = s.seqs[b].second;
    if (q_len == 0) continue;
    // The sequence's K and V in double, per kv head, from its blocks.
    keys.assign(size_t(s.kv_heads) * len * D, 0.0);
    values.assign(keys.size(), 0.0);
    const uint32_t first_pos = len - q_len;
    const uint32_t first = (window != 0 && first_pos + 1 > window) ? first_pos + 1 - window : 0;
    for (uint32_t t = first; t < len; ++t) {
      const int32_t block = in.padded[b * in.stride + t / T];
      for (uint32_t h = 0; h < s.kv_heads; ++h)
        for (uint32_t d = 0; d < D; ++d) {
          const uint64_t at = base_offset + uint64_t(block) * view.block_stride +
                              (t % T) * view.token_stride + h * view.head_stride + d * es;
          keys[(size_t(h) * len + t) * D + d] = kvc::load_f32(in.pool.data() + at, s.dtype, 0) * ks;
          values[(size_t(h) * len + t) * D + d] =
              kvc::load_f32(in.pool.data() + at + vk * view.kv_stride, s.dtype, 0) * vs;
        }
    }
    for (uint32_t i = 0; i < q_len; ++i) {
      const uint32_t pos = len - q_len + i;
      const uint32_t lo = (window != 0 && pos + 1 > window) ? pos + 1 - window : 0;
      const uint32_t row = uint32_t(in.qo_indptr[b]) + i;
      for (uint32_t h = 0; h < s.q_heads; ++h) {
        const uint32_t kvh = h / G;
        for (uint32_t d = 0; d < D; ++d)
          q[d] = kvc::load_f32(in.query.data(), s.q_dtype, (size_t(row) * s.q_heads + h) * D + d);
        scores.assign(pos + 1 - lo, 0.0);
        double m = -INFINITY;
        for (uint32_t t = lo; t <= pos; ++t) {
          const double* k = &keys[(size_t(kvh) * len + t) * D];
          double dot = 0;
          for (uint32_t d = 0; d < D; ++d) dot += q[d] * k[d];
          double sc = dot * scale;
          if (s.soft_cap > 0) sc = s.soft_cap * std::tanh(sc / s.soft_cap);
          scores[t - lo] = sc;
          m = std::max(m, sc);
        }
        std::fill(acc.begin(), acc.end(), 0.0);
        double sum = 0;
        for (uint32_t t = lo; t <= pos; ++t) {
          const double p = std::exp(scores[t - lo] - m);
          sum += p;
          const double* v = &values[(size_t(kvh) * len + t) * D];
          for (uint32_t d = 0; d < D; ++d) acc[d] += p * v[d];
        }
        for (uint32_t d = 0; d < D; ++d) (*out)[(size_t(row) * s.q_heads + h) * D + d] = acc[d] / sum;
        (*lse)[size_t(row) * s.q_heads + h] = m + std::log(sum);
      }
    }
  }
}

// ||got - want|| / ||want|| over all elements; `nan` set when an element is
// not finite.
inline double rel_error(const std::vector<double>& got, const std::vector<double>& want, bool* nan) {
  double num = 0, den = 0;
  *nan = false;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) *nan = true;
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

inline std::vector<double> to_double(const std::vector<unsigned char>& bytes, kvc_dtype_t dtype) {
  std::vector<double> out(bytes.size() / elem_size(dtype));
  for (size_t i = 0; i < out.size(); ++i) out[i] = kvc::load_f32(bytes.data(), dtype, i);
  return out;
}

// Tolerance of an output rounded to `dtype` (relative L2 error).
inline double tolerance(kvc_dtype_t dtype) {
  return dtype == KVC_DTYPE_F32 ? 1e-5 : dtype == KVC_DTYPE_F16 ? 2e-3 : 8e-3;
}

}  // namespace prefill_case
