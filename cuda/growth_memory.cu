#include "cuda/growth_memory.h"

#include <cuda.h>

#include "cuda/vmm_driver.h"

#include <algorithm>
#include <mutex>

namespace kvc {

namespace {

using Driver = VmmDriver;
const Driver& driver() { return vmm_driver(); }
CUmemAllocationProp properties(int ordinal) { return vmm_properties(ordinal); }

}  // namespace

GrowthMemory::GrowthMemory(int ordinal) : ordinal_(ordinal) {
  granularity_ = vmm_granularity(ordinal);
  available_ = granularity_ != 0;
}

GrowthMemory::~GrowthMemory() {
  std::lock_guard<std::mutex> lock(mu_);
  reap(true);
  if (spare_.size != 0) unmap(spare_);
  for (const Mapping& m : live_) unmap(m);
  for (cudaEvent_t e : spare_events_) cudaEventDestroy(e);
}

bool GrowthMemory::map(uint64_t size, Mapping* out, const char** why) {
  const Driver& d = driver();
  const CUmemAllocationProp prop = properties(ordinal_);
  CUdeviceptr va = 0;
  if (d.reserve(&va, size, 0, 0, 0) != CUDA_SUCCESS) {
    *why = "cuMemAddressReserve";
    return false;
  }
  CUmemGenericAllocationHandle h = 0;
  const CUresult created = d.create(&h, size, &prop, 0);
  if (created != CUDA_SUCCESS) {
    d.address_free(va, size);
    *why = created == CUDA_ERROR_OUT_OF_MEMORY ? "cuMemCreate (out of memory)" : "cuMemCreate";
    return false;
  }
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = ordinal_;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  if (d.map(va, size, 0, h, 0) != CUDA_SUCCESS) {
    d.release(h);
    d.address_free(va, size);
    *why = "cuMemMap";
    return false;
  }
  if (d.set_access(va, size, &access, 1) != CUDA_SUCCESS) {
    d.unmap(va, size);
    d.release(h);
    d.address_free(va, size);
    *why = "cuMemSetAccess";
    return false;
  }
  out->va = va;
  out->size = size;
  out->handle = h;
  return true;
}

void GrowthMemory::unmap(const Mapping& m) noexcept {
  const Driver& d = driver();
  d.unmap(CUdeviceptr(m.va), m.size);
  d.release(CUmemGenericAllocationHandle(m.handle));
  d.address_free(CUdeviceptr(m.va), m.size);
}

void GrowthMemory::reap(bool wait) noexcept {
  size_t kept = 0;
  for (size_t i = 0; i < pending_.size(); ++i) {
    Pending& p = pending_[i];
    const cudaError_t state = wait ? cudaEventSynchronize(p.done) : cudaEventQuery(p.done);
    if (state == cudaErrorNotReady) {
      pending_[kept++] = p;
      continue;
    }
    // Completed, or the context failed (then nothing reads the buffer any more).
    if (state != cudaSuccess) cudaGetLastError();
    keep_or_unmap(p.mapping);
    spare_events_.push_back(p.done);
  }
  pending_.resize(kept);
}

void GrowthMemory::keep_or_unmap(const Mapping& m) noexcept {
  if (spare_.size == 0) {
    spare_ = m;
  } else if (m.size > spare_.size) {
    unmap(spare_);
    spare_ = m;
  } else {
    unmap(m);
  }
}

void* GrowthMemory::allocate(uint64_t bytes, const char** why) {
  std::lock_guard<std::mutex> lock(mu_);
  reap(false);
  const uint64_t size = (bytes + granularity_ - 1) / granularity_ * granularity_;
  Mapping m;
  if (spare_.size == size) {
    m = spare_;  // no driver call
    spare_ = Mapping{};
  } else {
    // A spare that does not fit goes first, so it never adds to a peak.
    if (spare_.size != 0) unmap(spare_);
    spare_ = Mapping{};
    if (!map(size, &m, why)) {
      // The memory of buffers freed on the way may be what is missing.
      reap(true);
      if (spare_.size != 0) unmap(spare_);
      spare_ = Mapping{};
      if (!map(size, &m, why)) return nullptr;
    }
  }
  // The end of the buffer at the end of the mapping: an access past it
  // faults instead of reading the granularity's padding.
  m.ptr = reinterpret_cast<void*>(m.va + ((size - bytes) & ~uint64_t(255)));
  live_.push_back(m);
  return m.ptr;
}

void GrowthMemory::collect() noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  if (!pending_.empty()) reap(false);
}

bool GrowthMemory::release(void* ptr, cudaStream_t stream) noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = std::find_if(live_.begin(), live_.end(),
                               [ptr](const Mapping& m) { return m.ptr == ptr; });
  if (it == live_.end()) return false;
  const Mapping m = *it;
  live_.erase(it);
  cudaEvent_t e = nullptr;
  if (!spare_events_.empty()) {
    e = spare_events_.back();
    spare_events_.pop_back();
  } else if (cudaEventCreateWithFlags(&e, cudaEventDisableTiming) != cudaSuccess) {
    cudaGetLastError();
    e = nullptr;
  }
  if (e == nullptr || cudaEventRecord(e, stream) != cudaSuccess) {
    // No event to wait on: wait for the stream instead.
    cudaGetLastError();
    cudaStreamSynchronize(stream);
    cudaGetLastError();
    keep_or_unmap(m);
    if (e != nullptr) spare_events_.push_back(e);
  } else {
    pending_.push_back(Pending{m, e});
  }
  reap(false);
  return true;
}

}  // namespace kvc
