// Host-tier copies: whole blocks between a device pool and its pinned,
// mapped host pool, read and written by one kernel through the host pool's
// device address. A per-block cudaMemcpyAsync pays a few microseconds of
// launch and DMA setup per block, which dominates for 16-32 KiB blocks; the
// kernel moves a whole batch at PCIe speed with at most kMaxThreadBlocks
// thread blocks, leaving the rest of the GPU to the model. Each thread keeps
// kUnroll 16-byte loads in flight, enough to cover the PCIe round trip of
// reads from host memory.
#include <cuda_runtime.h>

#include <algorithm>
#include <initializer_list>

#include "cuda/cuda_check.h"
#include "cuda/cuda_kernels.h"
#include "cuda/vector_access.cuh"

namespace kvc {

namespace {

constexpr int kThreads = 1024;
constexpr int kUnroll = 4;
constexpr int kBatch = 1024;  // copies per launch: 8 KiB of parameters (CUDA >= 12.1, sm_70+)

struct TierParams {
  const unsigned char* src;
  unsigned char* dst;
  uint64_t block_vecs;  // vectors per block
  uint64_t total_vecs;  // block_vecs * count
  uint64_t block_bytes;
  uint32_t src_block[kBatch];
  uint32_t dst_block[kBatch];
};

template <int W>
__global__ void __launch_bounds__(kThreads) tier_copy_kernel(const __grid_constant__ TierParams p) {
  using V = typename VecOf<W>::type;
  const uint64_t stride = uint64_t(gridDim.x) * kThreads;
  for (uint64_t base = uint64_t(blockIdx.x) * kThreads + threadIdx.x; base < p.total_vecs;
       base += stride * kUnroll) {
    V v[kUnroll];
    uint64_t dst_off[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const uint64_t i = base + u * stride;
      if (i < p.total_vecs) {
        const uint64_t c = i / p.block_vecs;
        const uint64_t in_block = (i - c * p.block_vecs) * W;
        v[u] = *reinterpret_cast<const V*>(p.src + p.src_block[c] * p.block_bytes + in_block);
        dst_off[u] = p.dst_block[c] * p.block_bytes + in_block;
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (base + u * stride < p.total_vecs) *reinterpret_cast<V*>(p.dst + dst_off[u]) = v[u];
  }
}

}  // namespace

void launch_tier_copy(bool to_host, void* device_pool, void* host_pool_device_ptr,
                      uint64_t block_bytes, const TierCopy* copies, size_t count,
                      cudaStream_t stream) {
  const int width = common_alignment({reinterpret_cast<uintptr_t>(device_pool),
                                      reinterpret_cast<uintptr_t>(host_pool_device_ptr),
                                      block_bytes});
  auto* dev = static_cast<unsigned char*>(device_pool);
  auto* host = static_cast<unsigned char*>(host_pool_device_ptr);
  for (size_t first = 0; first < count; first += kBatch) {
    const size_t n = std::min<size_t>(kBatch, count - first);
    TierParams p;
    p.src = to_host ? dev : host;
    p.dst = to_host ? host : dev;
    p.block_bytes = block_bytes;
    p.block_vecs = block_bytes / width;
    p.total_vecs = p.block_vecs * n;
    for (size_t i = 0; i < n; ++i) {
      const TierCopy& c = copies[first + i];
      p.src_block[i] = to_host ? c.device_block : c.host_block;
      p.dst_block[i] = to_host ? c.host_block : c.device_block;
    }
    const uint64_t want = (p.total_vecs + uint64_t(kThreads) * kUnroll - 1) / (uint64_t(kThreads) * kUnroll);
    const uint32_t grid = uint32_t(std::min<uint64_t>(std::max<uint64_t>(want, 1), kMaxTierThreadBlocks));
    switch (width) {
      case 16: tier_copy_kernel<16><<<grid, kThreads, 0, stream>>>(p); break;
      case 8: tier_copy_kernel<8><<<grid, kThreads, 0, stream>>>(p); break;
      case 4: tier_copy_kernel<4><<<grid, kThreads, 0, stream>>>(p); break;
      case 2: tier_copy_kernel<2><<<grid, kThreads, 0, stream>>>(p); break;
      default: tier_copy_kernel<1><<<grid, kThreads, 0, stream>>>(p); break;
    }
    cuda_check(cudaGetLastError(), "tier copy kernel launch");
  }
}

}  // namespace kvc
