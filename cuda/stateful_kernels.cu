// The stateful mode's kernels (backend/stateful_work.h): the in-place
// append (a store of the new tokens at each row's length, quantizing to fp8
// on the way), the beam table reorder (a per-column gather, every read of a
// column before any write of it), and the row gather (compaction, export).
// Host arrays travel in the kernel parameters, so nothing is copied to the
// device first. The host checked every argument (src/stateful).
#include <cuda_runtime.h>

#include <algorithm>
#include <type_traits>

#include "base/dtype.h"
#include "cuda/cuda_check.h"
#include "cuda/cuda_numeric.cuh"
#include "cuda/stateful_kernels.h"
#include "cuda/vector_access.cuh"

namespace kvc {

namespace {

constexpr int kThreads = 256;
constexpr int kAppendRows = 64;  // rows per append launch (their positions ride along)

struct AppendParams {
  unsigned char* dst;
  uint64_t row_stride, kv_stride, head_stride, token_stride;
  const unsigned char* key;
  const unsigned char* value;
  uint64_t src_row_stride, src_head_stride, src_token_stride;
  uint32_t items_per_row;    // head_dim / E
  uint32_t items_per_token;  // kv_factor * heads * items_per_row
  uint32_t heads;
  uint32_t first_row;
  float k_scale, v_scale;
  int32_t* lengths;
  int32_t* table;
  uint32_t table_stride;
  uint32_t pos[kAppendRows];
  uint32_t count[kAppendRows];
};

template <class In, class Out>
__device__ __forceinline__ Out quantize(In x, float scale) {
  return from_f32<Out>(to_f32(x) / scale);
}

// One thread moves one item: E elements of one head row of one token.
template <class In, class Out, int E>
__global__ void __launch_bounds__(kThreads) append_kernel(const __grid_constant__ AppendParams p) {
  const uint32_t local = blockIdx.y;
  const uint32_t r = p.first_row + local;
  const uint32_t i = blockIdx.x * kThreads + threadIdx.x;
  const uint32_t j = i / p.items_per_token;
  if (blockIdx.x == 0 && threadIdx.x == 0) p.lengths[r] = int32_t(p.pos[local] + p.count[local]);
  if (j >= p.count[local]) return;
  const uint32_t rest = i - j * p.items_per_token;
  const uint32_t per_kv = p.heads * p.items_per_row;
  const uint32_t kv = rest / per_kv;
  const uint32_t h = (rest - kv * per_kv) / p.items_per_row;
  const uint32_t v = rest - kv * per_kv - h * p.items_per_row;
  const unsigned char* src = (kv == 0 ? p.key : p.value) + uint64_t(r) * p.src_row_stride +
                             uint64_t(h) * p.src_head_stride + uint64_t(j) * p.src_token_stride +
                             uint64_t(v) * sizeof(In) * E;
  unsigned char* dst = p.dst + uint64_t(r) * p.row_stride + uint64_t(kv) * p.kv_stride +
                       uint64_t(h) * p.head_stride +
                       uint64_t(p.pos[local] + j) * p.token_stride + uint64_t(v) * sizeof(Out) * E;
  Pack<In, E> in;
  load_pack(in, src);
  if constexpr (std::is_same_v<In, Out>) {
    store_pack(in, dst);
  } else {
    const float s = kv == 0 ? p.k_scale : p.v_scale;
    Pack<Out, E> out;
#pragma unroll
    for (int e = 0; e < E; ++e) out.elems[e] = quantize<In, Out>(in.elems[e], s);
    store_pack(out, dst);
  }
  if (p.table != nullptr && rest == 0)
    p.table[uint64_t(r) * p.table_stride + p.pos[local] + j] = int32_t(r);
}

template <class In, class Out, int E>
void launch_append(AppendParams p, const StatefulAppendWork& w, uint32_t head_dim,
                   cudaStream_t stream) {
  p.items_per_row = head_dim / E;
  p.items_per_token = w.kv.kv_factor * w.kv.kv_heads * p.items_per_row;
  for (uint32_t first = 0; first < w.kv.rows; first += kAppendRows) {
    const uint32_t rows = std::min<uint32_t>(kAppendRows, w.kv.rows - first);
    uint32_t most = 0;
    for (uint32_t i = 0; i < rows; ++i) {
      p.pos[i] = w.positions[first + i];
      p.count[i] = w.counts[first + i];
      most = std::max(most, p.count[i]);
    }
    p.first_row = first;
    const uint64_t items = uint64_t(std::max<uint32_t>(most, 1)) * p.items_per_token;
    const dim3 grid(uint32_t((items + kThreads - 1) / kThreads), rows);
    append_kernel<In, Out, E><<<grid, kThreads, 0, stream>>>(p);
    cuda_check(cudaGetLastError(), "stateful append kernel launch");
  }
}

// ---------------------------------------------------------------------------
// Beam table reorder: a block owns a tile of columns and every listed row.
// ---------------------------------------------------------------------------

template <int R>
struct ReorderParams {
  int32_t* table;
  uint32_t table_stride;
  uint32_t rows;
  uint32_t count;
  uint32_t first_column;
  int32_t* lengths;
  uint32_t num_layers;
  uint32_t dst[R], src[R], begin[R], end[R];
  uint32_t new_lengths[R];
};

constexpr int kReorderSmemInts = 4096;  // 16 KiB of staged entries per block

template <int R>
__global__ void __launch_bounds__(kThreads) reorder_kernel(const __grid_constant__ ReorderParams<R> p) {
  __shared__ int32_t staged[kReorderSmemInts];
  const uint32_t tile = kReorderSmemInts / p.count;  // columns per block (>= 4)
  const uint32_t t0 = p.first_column + blockIdx.x * tile;
  const uint32_t items = p.count * tile;
  for (uint32_t k = threadIdx.x; k < items; k += kThreads) {
    const uint32_t i = k / tile, t = t0 + k % tile;
    if (t >= p.begin[i] && t < p.end[i])
      staged[k] = p.table[uint64_t(p.src[i]) * p.table_stride + t];
  }
  __syncthreads();  // every read of these columns happened
  for (uint32_t k = threadIdx.x; k < items; k += kThreads) {
    const uint32_t i = k / tile, t = t0 + k % tile;
    if (t >= p.begin[i] && t < p.end[i])
      p.table[uint64_t(p.dst[i]) * p.table_stride + t] = staged[k];
  }
  if (blockIdx.x == 0)
    for (uint32_t k = threadIdx.x; k < p.num_layers * p.rows; k += kThreads)
      p.lengths[k] = int32_t(p.new_lengths[k % p.rows]);
}

template <int R>
void launch_reorder_rows(const TableReorderWork& w, cudaStream_t stream) {
  ReorderParams<R> p{};
  p.table = w.table;
  p.table_stride = w.table_stride;
  p.rows = w.rows;
  p.count = w.count;
  p.lengths = w.lengths;
  p.num_layers = w.num_layers;
  uint32_t lo = UINT32_MAX, hi = 0;
  for (uint32_t i = 0; i < w.count; ++i) {
    p.dst[i] = w.dst[i];
    p.src[i] = w.src[i];
    p.begin[i] = w.begin[i];
    p.end[i] = w.end[i];
    lo = std::min(lo, w.begin[i]);
    hi = std::max(hi, w.end[i]);
  }
  for (uint32_t r = 0; r < w.rows; ++r) p.new_lengths[r] = w.new_lengths[r];
  if (w.count == 0) {
    p.count = 1;  // no move: one block sets the lengths
    p.begin[0] = p.end[0] = 0;
    lo = hi = 0;
  }
  p.first_column = lo;
  const uint32_t tile = kReorderSmemInts / p.count;
  const uint32_t blocks = std::max<uint32_t>(1, (hi - lo + tile - 1) / tile);
  reorder_kernel<R><<<blocks, kThreads, 0, stream>>>(p);
  cuda_check(cudaGetLastError(), "beam table reorder kernel launch");
}

// ---------------------------------------------------------------------------
// Row gather: one thread per chunk of a head row.
// ---------------------------------------------------------------------------

struct GatherParams {
  const unsigned char* src;
  unsigned char* dst;
  uint64_t src_row, src_kv, src_head, src_token;
  uint64_t dst_row, dst_kv, dst_head, dst_token;
  const int32_t* table;
  uint32_t table_stride;
  uint32_t first_row;
  uint32_t length;
  uint32_t heads;
  uint32_t items_per_row;
  uint32_t items_per_token;
};

template <int W>
__global__ void __launch_bounds__(kThreads) gather_kernel(const __grid_constant__ GatherParams p) {
  const uint32_t i = blockIdx.y;
  const uint64_t k = uint64_t(blockIdx.x) * kThreads + threadIdx.x;
  const uint64_t t = k / p.items_per_token;
  if (t >= p.length) return;
  const uint32_t rest = uint32_t(k - t * p.items_per_token);
  const uint32_t per_kv = p.heads * p.items_per_row;
  const uint32_t kv = rest / per_kv;
  const uint32_t h = (rest - kv * per_kv) / p.items_per_row;
  const uint32_t v = rest - kv * per_kv - h * p.items_per_row;
  const uint32_t b = p.first_row + i;
  const uint32_t s = p.table != nullptr ? uint32_t(p.table[uint64_t(b) * p.table_stride + t]) : b;
  using V = typename VecOf<W>::type;
  const V* from = reinterpret_cast<const V*>(p.src + s * p.src_row + kv * p.src_kv +
                                             h * p.src_head + t * p.src_token) + v;
  V* to = reinterpret_cast<V*>(p.dst + i * p.dst_row + kv * p.dst_kv + h * p.dst_head +
                               t * p.dst_token) + v;
  *to = *from;
}

}  // namespace

void launch_stateful_append(const StatefulAppendWork& w, cudaStream_t stream) {
  const RowLayer& kv = w.kv;
  AppendParams p{};
  p.dst = static_cast<unsigned char*>(kv.base);
  p.row_stride = kv.row_stride;
  p.kv_stride = kv.kv_stride;
  p.head_stride = kv.head_stride;
  p.token_stride = kv.token_stride;
  p.key = static_cast<const unsigned char*>(w.key);
  p.value = static_cast<const unsigned char*>(w.value);
  p.src_row_stride = w.src_row_stride;
  p.src_head_stride = w.src_head_stride;
  p.src_token_stride = w.src_token_stride;
  p.heads = kv.kv_heads;
  p.k_scale = w.k_scale;
  p.v_scale = w.v_scale;
  p.lengths = w.lengths;
  p.table = w.table;
  p.table_stride = w.table_stride;
  const uint64_t src_es = dtype_size(w.src_dtype);
  const uint64_t addr_k = reinterpret_cast<uintptr_t>(w.key);
  const uint64_t addr_v = reinterpret_cast<uintptr_t>(w.value);
  const uint64_t addr_d = reinterpret_cast<uintptr_t>(kv.base);
  if (w.src_dtype == kv.dtype) {
    // Byte copies of head rows in the widest vectors the addresses allow.
    const uint64_t row = uint64_t(kv.head_dim) * src_es;
    const int width = common_alignment({row, addr_k, addr_v, addr_d, kv.row_stride, kv.kv_stride,
                                        kv.head_stride, kv.token_stride, w.src_row_stride,
                                        w.src_head_stride, w.src_token_stride});
    const uint32_t elems = uint32_t(row);  // "elements" are bytes here
    switch (width) {
      case 16: return launch_append<uint8_t, uint8_t, 16>(p, w, elems, stream);
      case 8: return launch_append<uint8_t, uint8_t, 8>(p, w, elems, stream);
      case 4: return launch_append<uint8_t, uint8_t, 4>(p, w, elems, stream);
      case 2: return launch_append<uint8_t, uint8_t, 2>(p, w, elems, stream);
      default: return launch_append<uint8_t, uint8_t, 1>(p, w, elems, stream);
    }
  }
  // fp8 quantization, 8 elements per item when rows and addresses allow.
  const bool by8 = kv.head_dim % 8 == 0 &&
                   common_alignment({addr_k, addr_v, w.src_row_stride, w.src_head_stride,
                                     w.src_token_stride}) >= int(std::min<uint64_t>(16, src_es * 8)) &&
                   common_alignment({addr_d, kv.row_stride, kv.kv_stride, kv.head_stride,
                                     kv.token_stride}) >= 8;
  switch (w.src_dtype) {
    case KVC_DTYPE_F32:
      return by8 ? launch_append<float, fp8_t, 8>(p, w, kv.head_dim, stream)
                 : launch_append<float, fp8_t, 1>(p, w, kv.head_dim, stream);
    case KVC_DTYPE_F16:
      return by8 ? launch_append<f16_t, fp8_t, 8>(p, w, kv.head_dim, stream)
                 : launch_append<f16_t, fp8_t, 1>(p, w, kv.head_dim, stream);
    default:
      return by8 ? launch_append<bf16_t, fp8_t, 8>(p, w, kv.head_dim, stream)
                 : launch_append<bf16_t, fp8_t, 1>(p, w, kv.head_dim, stream);
  }
}

void launch_table_reorder(const TableReorderWork& w, cudaStream_t stream) {
  if (w.rows <= 16) return launch_reorder_rows<16>(w, stream);
  return launch_reorder_rows<1024>(w, stream);
}

void launch_gather_rows(const RowGatherWork& w, cudaStream_t stream) {
  if (w.num_rows == 0 || w.length == 0) return;
  GatherParams p{};
  p.src = static_cast<const unsigned char*>(w.src.base);
  p.dst = static_cast<unsigned char*>(w.dst.base);
  p.src_row = w.src.row_stride;
  p.src_kv = w.src.kv_stride;
  p.src_head = w.src.head_stride;
  p.src_token = w.src.token_stride;
  p.dst_row = w.dst.row_stride;
  p.dst_kv = w.dst.kv_stride;
  p.dst_head = w.dst.head_stride;
  p.dst_token = w.dst.token_stride;
  p.table = w.table;
  p.table_stride = w.table_stride;
  p.first_row = w.first_row;
  p.length = w.length;
  p.heads = w.src.kv_heads;
  const uint64_t row = uint64_t(w.src.head_dim) * dtype_size(w.src.dtype);
  const int width = common_alignment(
      {row, reinterpret_cast<uintptr_t>(w.src.base), reinterpret_cast<uintptr_t>(w.dst.base),
       p.src_row, p.src_kv, p.src_head, p.src_token, p.dst_row, p.dst_kv, p.dst_head, p.dst_token});
  p.items_per_row = uint32_t(row / width);
  p.items_per_token = w.src.kv_factor * w.src.kv_heads * p.items_per_row;
  const uint64_t items = uint64_t(w.length) * p.items_per_token;
  const dim3 grid(uint32_t((items + kThreads - 1) / kThreads), w.num_rows);
  switch (width) {
    case 16: gather_kernel<16><<<grid, kThreads, 0, stream>>>(p); break;
    case 8: gather_kernel<8><<<grid, kThreads, 0, stream>>>(p); break;
    case 4: gather_kernel<4><<<grid, kThreads, 0, stream>>>(p); break;
    case 2: gather_kernel<2><<<grid, kThreads, 0, stream>>>(p); break;
    default: gather_kernel<1><<<grid, kThreads, 0, stream>>>(p); break;
  }
  cuda_check(cudaGetLastError(), "row gather kernel launch");
}

}  // namespace kvc
