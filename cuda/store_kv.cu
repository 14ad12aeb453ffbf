// store_kv: scatters the K/V of each token to its slot. A thread moves
// items of E elements of one head row, up to 16 bytes: one item for the
// contiguous 16-byte copy (more thread blocks, so small calls spread over
// the SMs), four elsewhere, all loads in flight before the stores; the fp8
// path quantizes x / scale on the way. A contiguous
// source ([tokens][heads][dim]) is addressed from one token stride; a
// strided one (kvc_store_kv_strided) through its byte strides, in a kernel
// of its own so the contiguous one keeps its instructions.
#include <cuda_runtime.h>

#include <atomic>
#include <initializer_list>
#include <type_traits>

#include "base/dtype.h"
#include "cuda/cuda_check.h"
#include "cuda/cuda_kernels.h"
#include "cuda/cuda_numeric.cuh"
#include "cuda/vector_access.cuh"

namespace kvc {

namespace {

constexpr int kThreads = 256;
constexpr int kMaxThreads = 1024;
constexpr int kItemsPerThread = 4;  // but one for the contiguous 16-byte copy (items_per_thread)

struct StoreParams {
  const unsigned char* key;
  const unsigned char* value;
  const int64_t* slots;
  unsigned char* base;
  uint64_t block_stride;
  uint64_t kv_stride;
  uint64_t token_stride;
  uint64_t head_stride;
  int64_t num_slots;
  uint32_t token_begin;      // first token of this launch
  uint32_t num_items;        // items of this launch (< 2^31)
  uint32_t items_per_token;  // kv_factor * items_per_kv
  uint32_t items_per_kv;     // kv_heads * items_per_row
  uint32_t items_per_row;    // head_dim / E
  uint32_t src_token_bytes;  // kv_heads * head_dim * src elem size
  uint32_t seq_len;          // strided: tokens per source sequence
  int64_t src_strides[2][3]; // strided: [key, value][seq, token, head] in bytes
  uint32_t block_shift;      // log2(tokens_per_block)
  // items_per_token, items_per_kv and items_per_row all powers of two (the
  // common shapes): an item's indices by shifts (their log2 below) instead
  // of three 32-bit divisions, which cost the small copies' issue slots.
  uint32_t pow2;
  uint32_t token_shift, kv_shift, row_shift;
  float k_scale;
  float v_scale;
  KernelErrorRecord* err;
  uint32_t layer;
};

template <class In, class Out>
__device__ __forceinline__ Out convert(In x, float scale);
template <>
__device__ __forceinline__ fp8_t convert<float, fp8_t>(float x, float s) {
  return from_f32<fp8_t>(x / s);
}
template <>
__device__ __forceinline__ fp8_t convert<f16_t, fp8_t>(f16_t x, float s) {
  return from_f32<fp8_t>(to_f32(x) / s);
}
template <>
__device__ __forceinline__ fp8_t convert<bf16_t, fp8_t>(bf16_t x, float s) {
  return from_f32<fp8_t>(to_f32(x) / s);
}

// IPT items per thread; blocks of kThreads threads, or up to kMaxThreads
// for one item per thread (set_store_kv_threads_override).
template <class In, class Out, int E, bool Strided, int IPT>
__global__ void __launch_bounds__(IPT == 1 ? kMaxThreads : kThreads) store_kv_kernel(StoreParams p) {
  constexpr uint32_t kDstItemBytes = sizeof(Out) * E;
  constexpr uint32_t kSrcItemBytes = sizeof(In) * E;
  const uint32_t first = blockIdx.x * (blockDim.x * IPT) + threadIdx.x;
  Pack<In, E> data[IPT];
  unsigned char* dst[IPT];
  float scale[IPT];
  // All loads first, so that IPT of them are in flight at once.
#pragma unroll
  for (int j = 0; j < IPT; ++j) {
    dst[j] = nullptr;
    const uint32_t i = first + j * blockDim.x;
    if (i >= p.num_items) continue;
    uint32_t tok, r, kv, rr, h, v;
    if (p.pow2 != 0) {
      tok = i >> p.token_shift;
      r = i & (p.items_per_token - 1);
      kv = r >> p.kv_shift;
      rr = r & (p.items_per_kv - 1);
      h = rr >> p.row_shift;
      v = rr & (p.items_per_row - 1);
    } else {
      tok = i / p.items_per_token;
      r = i - tok * p.items_per_token;
      kv = r / p.items_per_kv;
      rr = r - kv * p.items_per_kv;
      h = rr / p.items_per_row;
      v = rr - h * p.items_per_row;
    }
    const uint64_t token = uint64_t(p.token_begin) + tok;
    // The source row does not depend on the slot: load both at once rather
    // than one after the other (two memory latencies per small call).
    const unsigned char* src;
    if constexpr (Strided) {
      const uint32_t b = uint32_t(token) / p.seq_len;
      const uint32_t t = uint32_t(token) - b * p.seq_len;
      const int64_t* st = p.src_strides[kv];
      src = (kv == 0 ? p.key : p.value) + int64_t(b) * st[0] + int64_t(t) * st[1] +
            int64_t(h) * st[2] + int64_t(v) * kSrcItemBytes;
    } else {
      src = (kv == 0 ? p.key : p.value) + token * p.src_token_bytes + uint64_t(rr) * kSrcItemBytes;
    }
    load_pack(data[j], src);
    const int64_t slot = p.slots[token];
    if (slot < 0 || slot >= p.num_slots) {
      if (slot != -1 && r == 0)
        record_kernel_error(p.err, kSlotOutOfRange, p.layer, int64_t(token), slot, p.num_slots);
      continue;
    }
    const uint64_t block = uint64_t(slot) >> p.block_shift;
    const uint64_t offset = uint64_t(slot) & ((uint64_t(1) << p.block_shift) - 1);
    dst[j] = p.base + block * p.block_stride + kv * p.kv_stride + offset * p.token_stride +
             h * p.head_stride + uint64_t(v) * kDstItemBytes;
    scale[j] = kv == 0 ? p.k_scale : p.v_scale;
  }
#pragma unroll
  for (int j = 0; j < IPT; ++j) {
    if (dst[j] == nullptr) continue;
    if constexpr (std::is_same_v<In, Out>) {
      store_pack(data[j], dst[j]);  // a plain copy: whole vectors, no per-byte work
    } else {
      Pack<Out, E> out;
#pragma unroll
      for (int e = 0; e < E; ++e) out.elems[e] = convert<In, Out>(data[j].elems[e], scale[j]);
      store_pack(out, dst[j]);
    }
  }
}

template <class In, class Out, int E, bool Strided, int IPT = kItemsPerThread>
void launch_with(StoreParams p, uint32_t num_tokens, cudaStream_t stream, uint32_t threads = kThreads) {
  auto log2_of = [](uint32_t x) -> int { return x != 0 && (x & (x - 1)) == 0 ? __builtin_ctz(x) : -1; };
  const int ts = log2_of(p.items_per_token), ks = log2_of(p.items_per_kv), rs = log2_of(p.items_per_row);
  p.pow2 = ts >= 0 && ks >= 0 && rs >= 0;
  p.token_shift = uint32_t(p.pow2 ? ts : 0);
  p.kv_shift = uint32_t(p.pow2 ? ks : 0);
  p.row_shift = uint32_t(p.pow2 ? rs : 0);
  // 32-bit item indices: a launch takes at most 2^31 items.
  const uint32_t max_tokens = uint32_t((uint64_t(1) << 31) / p.items_per_token);
  for (uint32_t begin = 0; begin < num_tokens; begin += max_tokens) {
    const uint32_t n = num_tokens - begin < max_tokens ? num_tokens - begin : max_tokens;
    p.token_begin = begin;
    p.num_items = n * p.items_per_token;
    const uint32_t per_block = threads * IPT;
    const uint32_t blocks = (p.num_items + per_block - 1) / per_block;
    store_kv_kernel<In, Out, E, Strided, IPT><<<blocks, threads, 0, stream>>>(p);
    cuda_check(cudaGetLastError(), "store_kv kernel launch");
  }
}

template <class In, class Out, int E>
void launch(StoreParams p, uint32_t num_tokens, cudaStream_t stream) {
  if (p.seq_len == 0)
    launch_with<In, Out, E, false>(p, num_tokens, stream);
  else
    launch_with<In, Out, E, true>(p, num_tokens, stream);
}

std::atomic<int> g_items_override{0};
std::atomic<int> g_threads_override{0};

// Items per thread of the contiguous 16-byte copy (the common case: a
// prefill's or a decode step's K/V): one. On an H200 (bench/results/
// 2026-11-28-kernels-h200.md) one item per thread was faster than 2, 4 and
// 8 from 256 to 16384 tokens of 8 x 128 bf16 heads (256 tokens: 2.18 us
// against 3.17 at four, the 32768 items spread over 128 blocks instead of
// 32) and level with 2 at 65536; the other paths keep kItemsPerThread.
int items_per_thread() {
  const int forced = g_items_override.load(std::memory_order_relaxed);
  return forced != 0 ? forced : 1;
}

void launch_copy16(StoreParams p, uint32_t num_tokens, cudaStream_t stream) {
  if (p.seq_len != 0) return launch_with<uint8_t, uint8_t, 16, true>(p, num_tokens, stream);
  switch (items_per_thread()) {
    case 1: {
      const int forced = g_threads_override.load(std::memory_order_relaxed);
      return launch_with<uint8_t, uint8_t, 16, false, 1>(p, num_tokens, stream,
                                                        forced != 0 ? uint32_t(forced) : kThreads);
    }
    case 2: return launch_with<uint8_t, uint8_t, 16, false, 2>(p, num_tokens, stream);
    case 8: return launch_with<uint8_t, uint8_t, 16, false, 8>(p, num_tokens, stream);
    default: return launch_with<uint8_t, uint8_t, 16, false, 4>(p, num_tokens, stream);
  }
}

}  // namespace

void set_store_kv_items_override(int items) { g_items_override.store(items, std::memory_order_relaxed); }

void set_store_kv_threads_override(int threads) {
  g_threads_override.store(threads, std::memory_order_relaxed);
}

void launch_store_kv(const StoreKvWork& w, KernelErrorRecord* err, cudaStream_t stream) {
  const LayerSlabs& kv = w.kv;
  const uint64_t src_es = dtype_size(w.src_dtype);
  StoreParams p{};
  p.key = static_cast<const unsigned char*>(w.key);
  p.value = static_cast<const unsigned char*>(w.value != nullptr ? w.value : w.key);
  p.slots = w.slot_mapping;
  p.base = static_cast<unsigned char*>(kv.base);
  p.block_stride = kv.block_stride;
  p.kv_stride = kv.kv_stride;
  p.token_stride = kv.token_stride;
  p.head_stride = kv.head_stride;
  p.num_slots = int64_t(kv.num_slots());
  p.src_token_bytes = uint32_t(uint64_t(kv.kv_heads) * kv.head_dim * src_es);
  p.block_shift = block_shift_of(kv.tokens_per_block);
  p.k_scale = w.k_scale;
  p.v_scale = w.v_scale;
  p.err = err;
  p.layer = kv.layer;
  auto items = [&](uint32_t e) {
    p.items_per_row = kv.head_dim / e;
    p.items_per_kv = kv.kv_heads * p.items_per_row;
    p.items_per_token = kv.kv_factor * p.items_per_kv;
  };
  const uint64_t key_addr = reinterpret_cast<uintptr_t>(w.key);
  const uint64_t value_addr = reinterpret_cast<uintptr_t>(p.value);
  const uint64_t base_addr = reinterpret_cast<uintptr_t>(kv.base);
  // Strided sources: seq_len != 0 selects the strided kernel; the strides'
  // bytes bound the vector width like the addresses do. (Negative strides
  // wrap to the same residues modulo the power-of-two widths.)
  uint64_t stride_align = 16;
  if (!w.contiguous_source()) {
    p.seq_len = w.seq_len;
    const uint32_t kvs = w.value != nullptr ? 2 : 1;
    for (uint32_t k = 0; k < 2; ++k)
      for (int j = 0; j < 3; ++j) {
        p.src_strides[k][j] = w.src_strides[k < kvs ? k : 0][j] * int64_t(src_es);
        // The sequence stride is never multiplied by a non-zero b with one sequence.
        if (j == 0 && w.seq_len == w.num_tokens) continue;
        stride_align = uint64_t(common_alignment({stride_align, uint64_t(p.src_strides[k][j])}));
      }
  }

  if (w.src_dtype == kv.dtype) {
    // A byte copy of each head row, in the widest vectors every address allows.
    const uint64_t row = uint64_t(kv.head_dim) * src_es;
    const int width = common_alignment({row, key_addr, value_addr, base_addr, kv.block_stride,
                                        kv.kv_stride, kv.token_stride, kv.head_stride,
                                        stride_align});
    p.items_per_row = uint32_t(row / width);
    p.items_per_kv = kv.kv_heads * p.items_per_row;
    p.items_per_token = kv.kv_factor * p.items_per_kv;
    switch (width) {
      case 16: return launch_copy16(p, w.num_tokens, stream);
      case 8: return launch<uint8_t, uint8_t, 8>(p, w.num_tokens, stream);
      case 4: return launch<uint8_t, uint8_t, 4>(p, w.num_tokens, stream);
      case 2: return launch<uint8_t, uint8_t, 2>(p, w.num_tokens, stream);
      default: return launch<uint8_t, uint8_t, 1>(p, w.num_tokens, stream);
    }
  }
  // fp8 quantization: 8 elements per item when the rows and addresses allow.
  const bool by8 = kv.head_dim % 8 == 0 &&
                   common_alignment({key_addr, value_addr, stride_align}) >=
                       int(src_es * 8 > 16 ? 16 : src_es * 8) &&
                   common_alignment({base_addr, kv.block_stride, kv.kv_stride, kv.token_stride,
                                     kv.head_stride}) >= 8;
  items(by8 ? 8 : 1);
  switch (w.src_dtype) {
    case KVC_DTYPE_F32:
      return by8 ? launch<float, fp8_t, 8>(p, w.num_tokens, stream)
                 : launch<float, fp8_t, 1>(p, w.num_tokens, stream);
    case KVC_DTYPE_F16:
      return by8 ? launch<f16_t, fp8_t, 8>(p, w.num_tokens, stream)
                 : launch<f16_t, fp8_t, 1>(p, w.num_tokens, stream);
    default:
      return by8 ? launch<bf16_t, fp8_t, 8>(p, w.num_tokens, stream)
                 : launch<bf16_t, fp8_t, 1>(p, w.num_tokens, stream);
  }
}

}  // namespace kvc
