// The pieces of a CUDA IPC transport for kvcache/transfer.h, shared by the
// example (cuda_ipc_transfer.cu) and the benchmark
// (bench/cuda/bench_ipc_transfer.cu). Not part of the library: a transport
// is the caller's (transfer.h).
//
//  - allocation_of(): the base of the cudaMalloc allocation holding a
//    pointer (cuMemGetAddressRange, found at run time through
//    cudaGetDriverEntryPointByVersion, so nothing links libcuda), and
//    whether legacy CUDA IPC can share it
//    (CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE: a growable cache's
//    pools, kvc_config_set_max_primary_bytes, are VMM allocations made with
//    cuMemCreate, which cudaIpcGetMemHandle cannot share).
//  - send_all()/recv_all(): whole buffers over a socket.
//  - gather_blocks(): one kernel copying every block of a transfer, from
//    the peer's pool opened with cudaIpcOpenMemHandle into this cache's
//    import block ids (a cudaMemcpy per block would be thousands of calls).
#pragma once

#include <cuda_runtime.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace kvc_ipc {

// What the prefill process sends, then `num_blocks` int32 export block ids,
// then `num_layers` LayerPlace, then `keys_bytes` of key blob.
struct Header {
  char magic[8];              // "KVCIPC01"
  cudaIpcMemHandle_t handle;  // the allocation holding the pool
  uint64_t pool_offset;       // group 0's first layer view base - allocation base
  uint64_t block_stride;      // bytes between blocks (every layer's view)
  uint64_t block_bytes;       // bytes of one block of the group (all its layers)
  uint64_t num_blocks;        // exported blocks (positions 0..num_blocks-1)
  uint64_t keys_bytes;        // key blob size
  uint32_t num_layers;        // LayerPlace entries
  uint32_t tokens_per_block;
  double export_us;  // host time of export + block ids + keys (benchmark)
};

// Where layer l's part of a block lies: view.base - allocation base, and
// the view's block stride. The decode side checks that its own layers sit
// at the same places relative to its pool (same geometry and layout).
struct LayerPlace {
  uint64_t offset;
  uint64_t block_stride;
};

inline bool send_all(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t k = ::send(fd, c, n, MSG_NOSIGNAL);
    if (k <= 0) return false;
    c += k;
    n -= size_t(k);
  }
  return true;
}

inline bool recv_all(int fd, void* p, size_t n) {
  char* c = static_cast<char*>(p);
  while (n > 0) {
    const ssize_t k = ::recv(fd, c, n, 0);
    if (k <= 0) return false;
    c += k;
    n -= size_t(k);
  }
  return true;
}

// Driver API, resolved at run time (the same way cuda/vmm_driver.cu does).
using CuMemGetAddressRange = int (*)(unsigned long long* base, size_t* size,
                                     unsigned long long ptr);
using CuPointerGetAttribute = int (*)(void* data, int attribute, unsigned long long ptr);
constexpr int kAttrIsLegacyIpcCapable = 18;  // CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE

template <class F>
bool driver_fn(const char* name, F* fn) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  if (cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess || p == nullptr) {
    cudaGetLastError();
    return false;
  }
  *fn = reinterpret_cast<F>(p);
  return true;
}

struct Allocation {
  char* base = nullptr;
  size_t size = 0;
  bool legacy_ipc = false;  // cudaIpcGetMemHandle can share it
};

// The allocation holding device pointer `p`; false with `why` set when the
// driver cannot tell.
inline bool allocation_of(const void* p, Allocation* out, std::string* why) {
  CuMemGetAddressRange range = nullptr;
  CuPointerGetAttribute attr = nullptr;
  if (!driver_fn("cuMemGetAddressRange", &range) || !driver_fn("cuPointerGetAttribute", &attr)) {
    *why = "the driver has no cuMemGetAddressRange or cuPointerGetAttribute";
    return false;
  }
  unsigned long long base = 0;
  size_t size = 0;
  const unsigned long long ptr = reinterpret_cast<unsigned long long>(p);
  int rc = range(&base, &size, ptr);
  if (rc != 0) {
    *why = "cuMemGetAddressRange failed (CUresult " + std::to_string(rc) + ")";
    return false;
  }
  int capable = 0;
  rc = attr(&capable, kAttrIsLegacyIpcCapable, ptr);
  if (rc != 0) {
    *why = "cuPointerGetAttribute(IS_LEGACY_CUDA_IPC_CAPABLE) failed (CUresult " +
           std::to_string(rc) + ")";
    return false;
  }
  out->base = reinterpret_cast<char*>(base);
  out->size = size;
  out->legacy_ipc = capable != 0;
  return true;
}

// Copies `bytes` (a multiple of 16) from src + src_off[i] to dst + dst_off[i]
// for every i: one CUDA block per (copy i = blockIdx.x, 64 KiB chunk =
// blockIdx.y), each thread with four 16-byte loads in flight.
__global__ void gather_kernel(const char* __restrict__ src, char* __restrict__ dst,
                              const uint64_t* __restrict__ src_off,
                              const uint64_t* __restrict__ dst_off, uint64_t bytes) {
  constexpr uint64_t kChunk = 64 * 1024;
  const uint64_t i = blockIdx.x;
  const uint64_t begin = uint64_t(blockIdx.y) * kChunk / 16;
  const uint64_t end = (begin * 16 + kChunk < bytes ? begin * 16 + kChunk : bytes) / 16;
  const int4* s = reinterpret_cast<const int4*>(src + src_off[i]);
  int4* d = reinterpret_cast<int4*>(dst + dst_off[i]);
  const uint64_t step = blockDim.x;
  uint64_t k = begin + threadIdx.x;
  for (; k + 3 * step < end; k += 4 * step) {
    const int4 a = s[k], b = s[k + step], c = s[k + 2 * step], e = s[k + 3 * step];
    d[k] = a;
    d[k + step] = b;
    d[k + 2 * step] = c;
    d[k + 3 * step] = e;
  }
  for (; k < end; k += step) d[k] = s[k];
}

// Enqueues the copy of n blocks of `bytes` each on `stream`. `offsets`
// holds 2*n device uint64 (n source offsets, then n destination offsets);
// every offset and `bytes` must be 16-byte aligned.
inline cudaError_t gather_blocks(const char* src, char* dst, const uint64_t* offsets, uint64_t n,
                                 uint64_t bytes, cudaStream_t stream) {
  if (bytes % 16 != 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  const uint64_t chunks = (bytes + 64 * 1024 - 1) / (64 * 1024);
  const dim3 grid{static_cast<unsigned>(n), static_cast<unsigned>(chunks), 1u};
  gather_kernel<<<grid, 256, 0, stream>>>(src, dst, offsets, offsets + n, bytes);
  return cudaGetLastError();
}

}  // namespace kvc_ipc
