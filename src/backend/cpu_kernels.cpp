#include "backend/cpu_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backend/numeric.h"
#include "base/dtype.h"

namespace kvc {

namespace {

unsigned char* element_row(const LayerSlabs& kv, uint64_t block, uint32_t k, uint32_t token,
                           uint32_t head) {
  return static_cast<unsigned char*>(kv.base) + block * kv.block_stride + k * kv.kv_stride +
         uint64_t(token) * kv.token_stride + uint64_t(head) * kv.head_stride;
}

}  // namespace

void cpu_store_kv(const StoreKvWork& w) {
  const LayerSlabs& kv = w.kv;
  const uint32_t T = kv.tokens_per_block;
  const uint64_t D = kv.head_dim;
  const uint64_t src_es = dtype_size(w.src_dtype);
  const bool same = w.src_dtype == kv.dtype;
  const unsigned char* src[2] = {static_cast<const unsigned char*>(w.key),
                                 static_cast<const unsigned char*>(w.value)};
  const float scale[2] = {w.k_scale, w.v_scale};
  for (uint32_t i = 0; i < w.num_tokens; ++i) {
    const int64_t slot = w.slot_mapping[i];
    if (slot < 0) continue;
    const uint64_t block = uint64_t(slot) / T;
    const uint32_t offset = uint32_t(uint64_t(slot) % T);
    const int64_t b = i / w.seq_len, t = i % w.seq_len;
    for (uint32_t k = 0; k < kv.kv_factor; ++k) {
      const int64_t* st = w.src_strides[k];
      for (uint32_t h = 0; h < kv.kv_heads; ++h) {
        const int64_t first = b * st[0] + t * st[1] + int64_t(h) * st[2];
        const unsigned char* row = src[k] + first * int64_t(src_es);
        unsigned char* dst = element_row(kv, block, k, offset, h);
        if (same) {
          std::memcpy(dst, row, D * src_es);
          continue;
        }
        // fp8 quantization: x / scale (a division, as the CUDA kernel does,
        // so both round identically).
        for (uint64_t d = 0; d < D; ++d)
          dst[d] = f32_to_fp8e4m3(load_f32(row, w.src_dtype, d) / scale[k]);
      }
    }
  }
}

void cpu_decode_attention(const DecodeWork& w) {
  const LayerSlabs& kv = w.kv;
  const uint32_t T = kv.tokens_per_block;
  const uint32_t D = kv.head_dim;
  const uint32_t G = w.q_heads / kv.kv_heads;
  const float kscale = kv.dtype == KVC_DTYPE_FP8_E4M3 ? w.k_scale : 1.0f;
  const float vscale = kv.dtype == KVC_DTYPE_FP8_E4M3 ? w.v_scale : 1.0f;
  const uint32_t vk = kv.kv_factor == 2 ? 1 : 0;  // K == V when kv_factor is 1
  std::vector<float> q(D), acc(D), scores;
  for (uint32_t b = 0; b < w.batch; ++b) {
    const uint32_t len = uint32_t(w.seq_lens[b]);
    const uint32_t start = (w.window != 0 && len > w.window) ? len - w.window : 0;
    const int32_t* row = w.table_format == KVC_TABLE_CSR
                             ? w.block_table + w.indptr[b]
                             : w.block_table + uint64_t(b) * w.table_stride;
    for (uint32_t h = 0; h < w.q_heads; ++h) {
      const uint32_t kvh = h / G;
      const uint64_t qbase = (uint64_t(b) * w.q_heads + h) * D;
      for (uint32_t d = 0; d < D; ++d) q[d] = load_f32(w.query, w.q_dtype, qbase + d);
      std::fill(acc.begin(), acc.end(), 0.0f);
      scores.assign(len - start, 0.0f);
      float m = -std::numeric_limits<float>::infinity();
      for (uint32_t t = start; t < len; ++t) {
        const uint32_t tok = w.contiguous_rows ? t : t % T;
        const unsigned char* krow = element_row(kv, uint64_t(row[t / T]), 0, tok, kvh);
        float s = 0.0f;
        for (uint32_t d = 0; d < D; ++d) s += q[d] * (load_f32(krow, kv.dtype, d) * kscale);
        s *= w.softmax_scale;
        scores[t - start] = s;
        m = std::max(m, s);
      }
      float sum = 0.0f;
      for (uint32_t t = start; t < len; ++t) {
        const float p = std::exp(scores[t - start] - m);
        sum += p;
        const uint32_t tok = w.contiguous_rows ? t : t % T;
        const unsigned char* vrow = element_row(kv, uint64_t(row[t / T]), vk, tok, kvh);
        for (uint32_t d = 0; d < D; ++d) acc[d] += p * (load_f32(vrow, kv.dtype, d) * vscale);
      }
      const float inv = len > start ? 1.0f / sum : 0.0f;
      for (uint32_t d = 0; d < D; ++d) store_f32(w.out, w.q_dtype, qbase + d, acc[d] * inv);
    }
  }
}

void cpu_prefill_attention(const PrefillWork& w) {
  const LayerSlabs& kv = w.kv;
  const uint32_t T = kv.tokens_per_block;
  const uint32_t D = kv.head_dim;
  const uint32_t G = w.q_heads / kv.kv_heads;
  const float kscale = kv.dtype == KVC_DTYPE_FP8_E4M3 ? w.k_scale : 1.0f;
  const float vscale = kv.dtype == KVC_DTYPE_FP8_E4M3 ? w.v_scale : 1.0f;
  const uint32_t vk = kv.kv_factor == 2 ? 1 : 0;  // K == V when kv_factor is 1
  std::vector<float> keys, values, q(D), acc(D), scores;
  for (uint32_t b = 0; b < w.batch; ++b) {
    const uint32_t row0 = uint32_t(w.qo_indptr[b]);
    const uint32_t q_len = uint32_t(w.qo_indptr[b + 1]) - row0;
    const uint32_t len = uint32_t(w.kv_lens[b]);
    if (q_len == 0) continue;
    const uint32_t prefix = len - q_len;
    const int32_t* row = w.table_format == KVC_TABLE_CSR
                             ? w.block_table + w.indptr[b]
                             : w.block_table + uint64_t(b) * w.table_stride;
    // The tokens any query of the sequence attends, converted once per kv
    // head: [first, len).
    const uint32_t first =
        (w.window != 0 && prefix + 1 > w.window) ? prefix + 1 - w.window : 0;
    keys.resize(size_t(len - first) * D);
    values.resize(keys.size());
    for (uint32_t kvh = 0; kvh < kv.kv_heads; ++kvh) {
      for (uint32_t t = first; t < len; ++t) {
        const uint64_t block = uint64_t(row[t / T]);
        const unsigned char* krow = element_row(kv, block, 0, t % T, kvh);
        const unsigned char* vrow = element_row(kv, block, vk, t % T, kvh);
        float* kd = keys.data() + size_t(t - first) * D;
        float* vd = values.data() + size_t(t - first) * D;
        for (uint32_t d = 0; d < D; ++d) {
          kd[d] = load_f32(krow, kv.dtype, d) * kscale;
          vd[d] = load_f32(vrow, kv.dtype, d) * vscale;
        }
      }
      for (uint32_t i = 0; i < q_len; ++i) {
        const uint32_t pos = prefix + i;
        const uint32_t lo = (w.window != 0 && pos + 1 > w.window) ? pos + 1 - w.window : 0;
        for (uint32_t g = 0; g < G; ++g) {
          const uint32_t h = kvh * G + g;
          const uint64_t qbase = (uint64_t(row0 + i) * w.q_heads + h) * D;
          for (uint32_t d = 0; d < D; ++d) q[d] = load_f32(w.query, w.q_dtype, qbase + d);
          scores.assign(pos + 1 - lo, 0.0f);
          float m = -std::numeric_limits<float>::infinity();
          for (uint32_t t = lo; t <= pos; ++t) {
            const float* kd = keys.data() + size_t(t - first) * D;
            float s = 0.0f;
            for (uint32_t d = 0; d < D; ++d) s += q[d] * kd[d];
            s *= w.softmax_scale;
            if (w.soft_cap > 0.0f) s = w.soft_cap * std::tanh(s / w.soft_cap);
            scores[t - lo] = s;
            m = std::max(m, s);
          }
          std::fill(acc.begin(), acc.end(), 0.0f);
          float sum = 0.0f;
          for (uint32_t t = lo; t <= pos; ++t) {
            const float p = std::exp(scores[t - lo] - m);
            sum += p;
            const float* vd = values.data() + size_t(t - first) * D;
            for (uint32_t d = 0; d < D; ++d) acc[d] += p * vd[d];
          }
          const float inv = 1.0f / sum;  // sum >= 1: the highest score adds exp(0)
          for (uint32_t d = 0; d < D; ++d) store_f32(w.out, w.q_dtype, qbase + d, acc[d] * inv);
          if (w.lse != nullptr) w.lse[uint64_t(row0 + i) * w.q_heads + h] = m + std::log(sum);
        }
      }
    }
  }
}

}  // namespace kvc
