// Batched block copies: every copy of a call in one launch (per kCopyBatch
// copies). The copy list travels in the kernel parameters, so no device
// memory is allocated or staged. Blocks of a copy are split over several
// thread blocks; each thread moves 16-byte vectors where the geometry allows.
#include <cuda_runtime.h>

#include <algorithm>
#include <initializer_list>

#include "cuda/cuda_check.h"
#include "cuda/cuda_kernels.h"
#include "cuda/vector_access.cuh"

namespace kvc {

namespace {

constexpr int kThreads = 256;
constexpr int kCopyBatch = 256;  // 3 KiB of parameters, under the classic 4 KiB limit

struct CopyParams {
  unsigned char* base;
  uint64_t block_bytes;
  uint64_t run_bytes;
  uint64_t block_vecs;     // vectors in a whole block
  uint32_t row_vecs;       // vectors in one token row of a run
  uint32_t num_runs;       // runs of tokens_per_block rows in a block
  uint32_t tokens_per_block;
  uint32_t src[kCopyBatch];
  uint32_t dst[kCopyBatch];
  uint32_t rows[kCopyBatch];  // token rows to copy; tokens_per_block = the whole block
};

template <int W>
__global__ void __launch_bounds__(kThreads) copy_blocks_kernel(const __grid_constant__ CopyParams p) {
  using V = typename VecOf<W>::type;
  const uint32_t c = blockIdx.y;
  const bool whole = p.rows[c] >= p.tokens_per_block;
  // A whole block is one contiguous run; a prefix copies the first rows of each run.
  const uint64_t per_run = whole ? p.block_vecs : uint64_t(p.rows[c]) * p.row_vecs;
  const uint64_t total = whole ? p.block_vecs : per_run * p.num_runs;
  const unsigned char* src = p.base + uint64_t(p.src[c]) * p.block_bytes;
  unsigned char* dst = p.base + uint64_t(p.dst[c]) * p.block_bytes;
  for (uint64_t i = uint64_t(blockIdx.x) * kThreads + threadIdx.x; i < total;
       i += uint64_t(gridDim.x) * kThreads) {
    uint64_t off;
    if (whole) {
      off = i * W;
    } else {
      const uint64_t run = i / per_run;
      off = run * p.run_bytes + (i - run * per_run) * W;
    }
    *reinterpret_cast<V*>(dst + off) = *reinterpret_cast<const V*>(src + off);
  }
}

}  // namespace

void launch_copy_blocks(void* pool_base, const BlockGeometry& g, const BlockCopy* copies,
                        size_t count, cudaStream_t stream) {
  const int width = common_alignment({reinterpret_cast<uintptr_t>(pool_base), g.block_bytes,
                                      g.run_bytes(), g.row_bytes});
  for (size_t first = 0; first < count; first += kCopyBatch) {
    const size_t n = std::min<size_t>(kCopyBatch, count - first);
    CopyParams p{};
    p.base = static_cast<unsigned char*>(pool_base);
    p.block_bytes = g.block_bytes;
    p.run_bytes = g.run_bytes();
    p.block_vecs = g.block_bytes / width;
    p.row_vecs = uint32_t(g.row_bytes / width);
    p.num_runs = uint32_t(g.num_runs);
    p.tokens_per_block = g.tokens_per_block;
    uint64_t most = 0;
    uint32_t used = 0;
    for (size_t i = 0; i < n; ++i) {
      const BlockCopy& c = copies[first + i];
      if (c.num_tokens == 0) continue;
      p.src[used] = c.src;
      p.dst[used] = c.dst;
      p.rows[used] = std::min(c.num_tokens, g.tokens_per_block);
      const uint64_t vecs = p.rows[used] >= g.tokens_per_block
                                ? p.block_vecs
                                : uint64_t(p.rows[used]) * p.row_vecs * p.num_runs;
      most = std::max(most, vecs);
      ++used;
    }
    if (used == 0) continue;
    // Enough thread blocks per copy for about four vectors per thread.
    const uint64_t want = (most + kThreads * 4 - 1) / (kThreads * 4);
    const dim3 grid(uint32_t(std::min<uint64_t>(std::max<uint64_t>(want, 1), 1024)), used);
    switch (width) {
      case 16: copy_blocks_kernel<16><<<grid, kThreads, 0, stream>>>(p); break;
      case 8: copy_blocks_kernel<8><<<grid, kThreads, 0, stream>>>(p); break;
      case 4: copy_blocks_kernel<4><<<grid, kThreads, 0, stream>>>(p); break;
      case 2: copy_blocks_kernel<2><<<grid, kThreads, 0, stream>>>(p); break;
      default: copy_blocks_kernel<1><<<grid, kThreads, 0, stream>>>(p); break;
    }
    cuda_check(cudaGetLastError(), "copy_blocks kernel launch");
  }
}

}  // namespace kvc
