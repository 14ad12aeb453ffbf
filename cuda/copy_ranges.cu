// Batched range copies (Device::copy_ranges): every range of a call in one
// launch (per kCopyRangesPerLaunch ranges). The range list travels by value
// in the kernel parameters, so nothing is allocated or staged, and the
// launch can be captured into a CUDA graph.
//
// Work split: each range is cut into chunks of kChunkBytes; one thread
// block copies one chunk; the grid is every chunk of every range, so a
// large range and many small ones spread over the GPU alike. A block finds
// its range by binary search over the ranges' first chunks (uniform across
// the block, from the constant bank).
//
// Alignment: a range moves as vectors of the widest width w <= 16 bytes at
// which its source and destination agree (src = dst mod w): the bytes
// before the destination's first w-aligned address (the head, < w) and
// after the last whole vector (the tail, < w) move one byte per thread; the
// body between them as w-byte vectors, 4 loads in flight per thread.
//
// Why a kernel and not cudaMemcpyBatchAsync (CUDA 12.8+): that call refuses
// the legacy NULL stream, which the C API accepts (a fork and a rewind copy
// on it), it takes host arrays the driver turns into copy operations of its
// own choosing, and it would raise the toolkit the library needs. A kernel
// is one launch on any stream, in any CUDA graph, on every toolkit.
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/cuda_check.h"
#include "cuda/cuda_kernels.h"

namespace kvc {

namespace {

constexpr int kThreads = 256;
constexpr uint64_t kChunkBytes = 16 * 1024;        // 4 vectors of 16 bytes per thread
constexpr int kUnroll = 4;                         // loads in flight per thread
constexpr uint64_t kMaxChunks = (1ull << 31) - 1;  // gridDim.x

static_assert(kChunkBytes % 16 == 0, "chunks keep the body's vectors aligned");

// 3 * 8 * 128 + 4 * 129 + 4 = 3592 bytes: under the classic 4 KiB limit.
struct RangeParams {
  unsigned char* dst[kCopyRangesPerLaunch];
  const unsigned char* src[kCopyRangesPerLaunch];
  uint64_t bytes[kCopyRangesPerLaunch];
  uint32_t first_chunk[kCopyRangesPerLaunch + 1];  // [count] = all chunks
  uint32_t count;
};

struct RangeSplit {
  uint32_t width;  // vector bytes: 16, 8, 4, 2 or 1
  uint64_t head;   // bytes before the body (< width)
  uint64_t body;   // bytes moved as vectors (a multiple of width)
};

__host__ __device__ inline RangeSplit split_range(uintptr_t dst, uintptr_t src, uint64_t bytes) {
  uint32_t w = 16;
  while (w > 1 && ((dst ^ src) & (w - 1)) != 0) w >>= 1;
  uint64_t head = (w - (dst & (w - 1))) & (w - 1);
  if (head > bytes) head = bytes;
  return RangeSplit{w, head, (bytes - head) / w * w};
}

inline uint64_t chunks_of(const RangeSplit& s) {
  return s.body == 0 ? 1 : (s.body + kChunkBytes - 1) / kChunkBytes;
}

// Vectors [0, n) of V from s to d, by the block's threads.
template <class V>
__device__ __forceinline__ void copy_vectors(V* __restrict__ d, const V* __restrict__ s,
                                             uint32_t n) {
  uint32_t i = threadIdx.x;
  for (; i + (kUnroll - 1) * kThreads < n; i += kUnroll * kThreads) {
    V r[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) r[u] = s[i + u * kThreads];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) d[i + u * kThreads] = r[u];
  }
  for (; i < n; i += kThreads) d[i] = s[i];
}

__global__ void __launch_bounds__(kThreads)
    copy_ranges_kernel(const __grid_constant__ RangeParams p) {
  const uint32_t chunk = blockIdx.x;
  uint32_t lo = 0, hi = p.count;  // the last range with first_chunk <= chunk
  while (hi - lo > 1) {
    const uint32_t mid = (lo + hi) / 2;
    if (p.first_chunk[mid] <= chunk)
      lo = mid;
    else
      hi = mid;
  }
  unsigned char* dst = p.dst[lo];
  const unsigned char* src = p.src[lo];
  const uint64_t bytes = p.bytes[lo];
  const uint32_t c = chunk - p.first_chunk[lo];
  const uint32_t last = p.first_chunk[lo + 1] - p.first_chunk[lo] - 1;
  const RangeSplit s =
      split_range(reinterpret_cast<uintptr_t>(dst), reinterpret_cast<uintptr_t>(src), bytes);
  if (c == 0 && threadIdx.x < s.head) dst[threadIdx.x] = src[threadIdx.x];
  if (c == last) {
    const uint64_t at = s.head + s.body;
    if (threadIdx.x < bytes - at) dst[at + threadIdx.x] = src[at + threadIdx.x];
  }
  const uint64_t from = uint64_t(c) * kChunkBytes;
  if (from >= s.body) return;
  const uint64_t len = s.body - from < kChunkBytes ? s.body - from : kChunkBytes;
  unsigned char* d = dst + s.head + from;
  const unsigned char* q = src + s.head + from;
  const uint32_t n = uint32_t(len / s.width);
  switch (s.width) {
    case 16:
      copy_vectors(reinterpret_cast<uint4*>(d), reinterpret_cast<const uint4*>(q), n);
      break;
    case 8:
      copy_vectors(reinterpret_cast<uint2*>(d), reinterpret_cast<const uint2*>(q), n);
      break;
    case 4:
      copy_vectors(reinterpret_cast<uint32_t*>(d), reinterpret_cast<const uint32_t*>(q), n);
      break;
    case 2:
      copy_vectors(reinterpret_cast<uint16_t*>(d), reinterpret_cast<const uint16_t*>(q), n);
      break;
    default:
      copy_vectors(d, q, n);
      break;
  }
}

}  // namespace

void launch_copy_ranges(const CopyRange* ranges, size_t count, cudaStream_t stream) {
  RangeParams p;
  size_t i = 0;
  while (i < count) {
    p.count = 0;
    uint64_t chunks = 0;
    for (; i < count && p.count < kCopyRangesPerLaunch; ++i) {
      const CopyRange& r = ranges[i];
      if (r.bytes == 0) continue;
      const uint64_t n = chunks_of(split_range(reinterpret_cast<uintptr_t>(r.dst),
                                               reinterpret_cast<uintptr_t>(r.src), r.bytes));
      if (p.count > 0 && chunks + n > kMaxChunks) break;  // the next launch takes it
      p.dst[p.count] = static_cast<unsigned char*>(r.dst);
      p.src[p.count] = static_cast<const unsigned char*>(r.src);
      p.bytes[p.count] = r.bytes;
      p.first_chunk[p.count] = uint32_t(chunks);
      chunks += n;
      ++p.count;
    }
    if (p.count == 0) continue;
    p.first_chunk[p.count] = uint32_t(chunks);
    copy_ranges_kernel<<<uint32_t(chunks), kThreads, 0, stream>>>(p);
    cuda_check(cudaGetLastError(), "copy_ranges kernel launch");
  }
}

}  // namespace kvc
