#include "cuda/pool_reservations.h"

#include <cuda_runtime.h>

#include "cuda/vmm_driver.h"

namespace kvc {

PoolReservations::PoolReservations(int ordinal)
    : ordinal_(ordinal), granularity_(vmm_granularity(ordinal)) {}

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
  const CUmemAllocationProp prop = vmm_properties(ordinal_);
  const uint64_t size = to - from;
  CUmemGenericAllocationHandle h = 0;
  const CUresult created = d.create(&h, size, &prop, 0);
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
  r.chunks.push_back(Chunk{from, size, h});
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
