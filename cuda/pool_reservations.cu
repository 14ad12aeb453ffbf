#include "cuda/pool_reservations.h"

#include <cuda_runtime.h>

#include "cuda/vmm_driver.h"

#include <string>

namespace kvc {

PoolReservations::PoolReservations(int ordinal) : ordinal_(ordinal) {
  const VmmDriver& d = vmm_driver();
  CUdevice dev = 0;
  int fd_ok = 0;
  if (!d.complete) {
    unshareable_ = "the driver lacks the virtual memory API";
  } else if (d.export_handle == nullptr) {
    unshareable_ = "the driver has no cuMemExportToShareableHandle";
  } else if (d.device_get(&dev, ordinal) != CUDA_SUCCESS ||
             d.device_attribute(&fd_ok,
                                CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED,
                                dev) != CUDA_SUCCESS ||
             fd_ok == 0) {
    unshareable_ =
        "the device does not support POSIX file descriptor handles "
        "(CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED is 0)";
  }
  const uint64_t plain = vmm_granularity(ordinal);
  if (unshareable_.empty()) {
    // Reservations are sized in the shareable allocations' granularity.
    const uint64_t g = vmm_granularity(ordinal, vmm_shareable_properties(ordinal));
    if (g == 0)
      unshareable_ =
          "cuMemGetAllocationGranularity refuses the POSIX file descriptor "
          "handle type";
    granularity_ = g != 0 && plain != 0 ? (g > plain ? g : plain) : plain;
  } else {
    granularity_ = plain;
  }
}

PoolReservations::~PoolReservations() {
  while (!ranges_.empty()) unreserve(reinterpret_cast<void*>(ranges_.back().va));
}

PoolReservations::Range* PoolReservations::find(void* base) {
  for (Range& r : ranges_)
    if (reinterpret_cast<void*>(r.va) == base) return &r;
  return nullptr;
}

bool PoolReservations::map_chunk(Range& r, uint64_t from, uint64_t to, const char** why) {
  const VmmDriver& d = vmm_driver();
  const uint64_t size = to - from;
  CUmemGenericAllocationHandle h = 0;
  bool shareable = unshareable_.empty();
  CUresult created = CUDA_ERROR_UNKNOWN;
  if (shareable) {
    const CUmemAllocationProp prop = vmm_shareable_properties(ordinal_);
    created = d.create(&h, size, &prop, 0);
    if (created != CUDA_SUCCESS && created != CUDA_ERROR_OUT_OF_MEMORY) {
      // The driver refuses the handle type here (a container without the
      // permission, a driver that lacks it): plain allocations from now on.
      unshareable_ = std::string("cuMemCreate refused the POSIX file descriptor handle type (") +
                     vmm_error_name(created) + ")";
      shareable = false;
    }
  }
  if (!shareable) {
    const CUmemAllocationProp prop = vmm_properties(ordinal_);
    created = d.create(&h, size, &prop, 0);
  }
  if (created != CUDA_SUCCESS) {
    *why = created == CUDA_ERROR_OUT_OF_MEMORY ? "cuMemCreate (out of memory)" : "cuMemCreate";
    return false;
  }
  const CUdeviceptr at = CUdeviceptr(r.va + from);
  if (d.map(at, size, 0, h, 0) != CUDA_SUCCESS) {
    d.release(h);
    *why = "cuMemMap";
    return false;
  }
  const CUmemAccessDesc access = vmm_access(ordinal_);
  if (d.set_access(at, size, &access, 1) != CUDA_SUCCESS) {
    d.unmap(at, size);
    d.release(h);
    *why = "cuMemSetAccess";
    return false;
  }
  r.chunks.push_back(Chunk{from, size, h, shareable});
  return true;
}

void PoolReservations::unmap_chunk(Range& r, const Chunk& c) noexcept {
  const VmmDriver& d = vmm_driver();
  d.unmap(CUdeviceptr(r.va + c.offset), c.size);
  d.release(CUmemGenericAllocationHandle(c.handle));
}

void* PoolReservations::reserve(uint64_t max_bytes, uint64_t bytes, const char** why) {
  std::lock_guard<std::mutex> lock(mu_);
  const VmmDriver& d = vmm_driver();
  CUdeviceptr va = 0;
  if (d.reserve(&va, max_bytes, 0, 0, 0) != CUDA_SUCCESS) {
    *why = "cuMemAddressReserve";
    return nullptr;
  }
  Range r;
  r.va = va;
  r.size = max_bytes;
  if (bytes != 0 && !map_chunk(r, 0, bytes, why)) {
    d.address_free(va, max_bytes);
    return nullptr;
  }
  ranges_.push_back(r);
  return reinterpret_cast<void*>(va);
}

bool PoolReservations::commit(void* base, uint64_t from, uint64_t to, const char** why) {
  std::lock_guard<std::mutex> lock(mu_);
  Range* r = find(base);
  if (r == nullptr) {
    *why = "not a reserved pool";
    return false;
  }
  return map_chunk(*r, from, to, why);
}

uint64_t PoolReservations::decommit(void* base, uint64_t from) noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  Range* r = find(base);
  if (r == nullptr) return from;
  // Work enqueued before the shrink may still read what goes.
  cudaDeviceSynchronize();
  cudaGetLastError();
  while (!r->chunks.empty() && r->chunks.back().offset >= from) {
    unmap_chunk(*r, r->chunks.back());
    r->chunks.pop_back();
  }
  return r->chunks.empty() ? 0 : r->chunks.back().offset + r->chunks.back().size;
}

std::string PoolReservations::shareable_why() {
  std::lock_guard<std::mutex> lock(mu_);
  return unshareable_;
}

bool PoolReservations::shared(const void* base, SharedMemory* out, std::string* why) {
  std::lock_guard<std::mutex> lock(mu_);
  const Range* r = find(const_cast<void*>(base));
  if (r == nullptr) {
    *why =
        "the pool is not a reservation of the virtual memory API (allocated with cudaMalloc: "
        "share it with cudaIpcGetMemHandle)";
    return false;
  }
  out->ordinal = ordinal_;
  out->granularity = granularity_;
  out->reserved_bytes = r->size;
  out->chunks.clear();
  for (const Chunk& c : r->chunks) {
    if (!c.shareable) {
      *why = "the allocation at offset " + std::to_string(c.offset) +
             " was created without a "
             "shareable handle type: " +
             unshareable_;
      return false;
    }
    out->chunks.push_back(SharedChunk{c.offset, c.size});
  }
  return true;
}

int PoolReservations::export_chunk(const void* base, uint64_t index, std::string* why,
                                   bool* bad_index) {
  std::lock_guard<std::mutex> lock(mu_);
  *bad_index = false;
  const Range* r = find(const_cast<void*>(base));
  if (r == nullptr) {
    *why = "the pool is not a reservation of the virtual memory API";
    return -1;
  }
  if (index >= r->chunks.size()) {
    *bad_index = true;
    *why = "chunk must be < num_chunks (" + std::to_string(r->chunks.size()) + "), got " +
           std::to_string(index);
    return -1;
  }
  const Chunk& c = r->chunks[index];
  if (!c.shareable) {
    *why = "the allocation at offset " + std::to_string(c.offset) +
           " was created without a "
           "shareable handle type: " +
           unshareable_;
    return -1;
  }
  int fd = -1;
  const CUresult e = vmm_driver().export_handle(&fd, CUmemGenericAllocationHandle(c.handle),
                                                CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
  if (e != CUDA_SUCCESS) {
    *why = std::string("cuMemExportToShareableHandle failed: ") + vmm_error_name(e);
    return -1;
  }
  return fd;
}

void PoolReservations::unreserve(void* base) noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < ranges_.size(); ++i) {
    if (reinterpret_cast<void*>(ranges_[i].va) != base) continue;
    Range& r = ranges_[i];
    cudaDeviceSynchronize();
    cudaGetLastError();
    for (size_t k = r.chunks.size(); k > 0; --k) unmap_chunk(r, r.chunks[k - 1]);
    vmm_driver().address_free(CUdeviceptr(r.va), r.size);
    ranges_.erase(ranges_.begin() + long(i));
    return;
  }
}

}  // namespace kvc
