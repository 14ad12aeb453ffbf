// The pieces of a CUDA IPC transport for kvcache/transfer.h, shared by the
// example (cuda_ipc_transfer.cu) and the benchmark
// (bench/cuda/bench_ipc_transfer.cu). Not part of the library: a transport
// is the caller's (transfer.h).
//
//  - share_pool(): the sender's side: kvc_cache_describe_pool_share() and
//    one kvc_cache_export_pool_chunk() per physical allocation of the pool
//    (a POSIX file descriptor each, which this code closes once sent).
//  - send_fds()/recv_fds(): file descriptors over a Unix-domain socket
//    (SCM_RIGHTS): the kernel installs copies in the receiving process.
//  - PeerPool::map(): the receiver's side: cuMemImportFromShareableHandle
//    on each descriptor, cuMemAddressReserve of the pool's address space,
//    cuMemMap of every chunk at its offset, cuMemSetAccess. The peer's pool
//    byte at offset x is then at base + x in this process.
//  - gather_blocks(): one kernel copying every block of a transfer, from
//    the peer's mapped pool into this cache's import block ids (a
//    cudaMemcpy per block would be thousands of calls).
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kvcache/kvcache.h"

namespace kvc_ipc {

// What the sender sends first. Then: `num_chunks` Chunk (their file
// descriptors ride on that message, SCM_RIGHTS), `num_blocks` int32 export
// block ids, `num_layers` LayerPlace, `keys_bytes` of key blob.
struct Header {
  char magic[8];            // "KVCIPC02"
  int32_t device_ordinal;   // kvc_pool_share_t (the sender's numbering)
  uint32_t num_chunks;      // physical allocations of the pool
  uint64_t granularity;     // kvc_pool_share_t
  uint64_t reserved_bytes;  // kvc_pool_share_t
  uint64_t mapped_bytes;    // kvc_pool_share_t
  uint64_t block_stride;    // bytes between blocks (every layer's view)
  uint64_t block_bytes;     // bytes of one block of the group (all its layers)
  uint64_t group_offset;    // group 0's first layer view base - pool base
  uint64_t num_blocks;      // exported blocks (positions 0..num_blocks-1)
  uint64_t keys_bytes;      // key blob size
  uint32_t num_layers;      // LayerPlace entries
  uint32_t tokens_per_block;
  double export_us;  // host time of export + block ids + keys (benchmark)
};

struct Chunk {
  uint64_t offset;
  uint64_t size;
};

// Where layer l's part of a block lies: view.base - pool base, and the
// view's block stride. The receiver checks that its own layers sit at the
// same places relative to its pool (same geometry and layout).
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

// Sends `bytes` (at least 1) with `fds` attached. The kernel takes at most
// SCM_MAX_FD (253) descriptors per message: send more in several calls.
inline bool send_fds(int sock, const void* bytes, size_t n, const std::vector<int>& fds) {
  std::vector<char> control(CMSG_SPACE(sizeof(int) * fds.size()));
  iovec iov{const_cast<void*>(bytes), n};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control.data();
  msg.msg_controllen = control.size();
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
  std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  const ssize_t k = ::sendmsg(sock, &msg, MSG_NOSIGNAL);
  if (k <= 0) return false;
  // The descriptors went with the first byte; the rest is plain data.
  return send_all(sock, static_cast<const char*>(bytes) + k, n - size_t(k));
}

// Receives `n` bytes and the `count` descriptors sent with them.
inline bool recv_fds(int sock, void* bytes, size_t n, size_t count, std::vector<int>* fds) {
  std::vector<char> control(CMSG_SPACE(sizeof(int) * count));
  iovec iov{bytes, n};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control.data();
  msg.msg_controllen = control.size();
  const ssize_t k = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
  if (k <= 0) return false;
  fds->clear();
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t m = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < m; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      fds->push_back(fd);
    }
  }
  if ((msg.msg_flags & MSG_CTRUNC) != 0 || fds->size() != count) {
    for (int fd : *fds) close(fd);
    return false;
  }
  return recv_all(sock, static_cast<char*>(bytes) + k, n - size_t(k));
}

// The sender's side: fills the header's sharing fields, the chunks and a
// descriptor per chunk (the caller sends them, then closes them). False
// with kvc_last_error_message() saying why (descriptors already made are
// closed).
inline bool share_pool(const kvc_cache_t* cache, uint32_t rank, uint32_t pool, Header* hdr,
                       std::vector<Chunk>* chunks, std::vector<int>* fds) {
  kvc_pool_share_t share = KVC_POOL_SHARE_INIT;
  if (kvc_cache_describe_pool_share(cache, rank, pool, &share) != KVC_OK) return false;
  hdr->device_ordinal = share.device_ordinal;
  hdr->num_chunks = uint32_t(share.num_chunks);
  hdr->granularity = share.granularity;
  hdr->reserved_bytes = share.reserved_bytes;
  hdr->mapped_bytes = share.mapped_bytes;
  chunks->clear();
  fds->clear();
  for (uint64_t i = 0; i < share.num_chunks; ++i) {
    kvc_share_chunk_t c = KVC_SHARE_CHUNK_INIT;
    if (kvc_cache_export_pool_chunk(cache, rank, pool, i, &c) != KVC_OK) {
      for (int fd : *fds) close(fd);
      fds->clear();
      return false;
    }
    chunks->push_back(Chunk{c.offset, c.size});
    fds->push_back(c.fd);
  }
  return true;
}

// The receiver's side: the peer's pool mapped into this process.
struct PeerPool {
  CUdeviceptr base = 0;
  uint64_t reserved = 0;
  uint64_t mapped = 0;

  // Imports every descriptor (and closes it, mapped or not). On failure
  // returns the driver call that failed, with nothing left mapped.
  const char* map(const Header& hdr, const std::vector<Chunk>& chunks, const std::vector<int>& fds,
                  int device) {
    const char* failed = nullptr;
    std::vector<CUmemGenericAllocationHandle> handles;
    for (int fd : fds) {
      CUmemGenericAllocationHandle h = 0;
      // The POSIX fd handle type takes the descriptor's value as the pointer.
      if (failed == nullptr &&
          cuMemImportFromShareableHandle(&h, reinterpret_cast<void*>(uintptr_t(fd)),
                                         CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) != CUDA_SUCCESS)
        failed = "cuMemImportFromShareableHandle";
      else if (failed == nullptr)
        handles.push_back(h);
      close(fd);  // the handle holds the memory now
    }
    if (failed == nullptr &&
        cuMemAddressReserve(&base, hdr.reserved_bytes, hdr.granularity, 0, 0) != CUDA_SUCCESS) {
      base = 0;
      failed = "cuMemAddressReserve";
    }
    reserved = hdr.reserved_bytes;
    size_t k = 0;  // chunks mapped
    while (failed == nullptr && k < handles.size()) {
      if (cuMemMap(base + chunks[k].offset, chunks[k].size, 0, handles[k], 0) != CUDA_SUCCESS)
        failed = "cuMemMap";
      else
        ++k;
    }
    mapped = failed == nullptr ? hdr.mapped_bytes : 0;
    // A mapping holds its allocation: the handles can go now.
    for (CUmemGenericAllocationHandle h : handles) cuMemRelease(h);
    if (failed == nullptr) {
      CUmemAccessDesc access{};
      access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      access.location.id = device;
      access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
      if (cuMemSetAccess(base, mapped, &access, 1) != CUDA_SUCCESS) failed = "cuMemSetAccess";
    }
    if (failed != nullptr) {
      for (size_t i = 0; i < k; ++i) cuMemUnmap(base + chunks[i].offset, chunks[i].size);
      mapped = 0;
      unmap();
    }
    return failed;
  }

  void unmap() {
    if (base == 0) return;
    if (mapped != 0) cuMemUnmap(base, mapped);
    cuMemAddressFree(base, reserved);
    base = 0;
    mapped = 0;
  }

  char* ptr() const { return reinterpret_cast<char*>(base); }
};

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
