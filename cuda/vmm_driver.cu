#include "cuda/vmm_driver.h"

#include <cuda_runtime.h>

#include <mutex>

namespace kvc {

namespace {

template <class F>
bool find(const char* name, F* fn) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  // The ABI of these functions has not changed since CUDA 10.2; ask for 12.0's.
  if (cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &found) !=
          cudaSuccess ||
      found != cudaDriverEntryPointSuccess || p == nullptr) {
    cudaGetLastError();
    return false;
  }
  *fn = reinterpret_cast<F>(p);
  return true;
}

}  // namespace

const VmmDriver& vmm_driver() {
  static VmmDriver d;
  static std::once_flag once;
  std::call_once(once, [] {
    d.complete = find("cuDeviceGet", &d.device_get) &&
                 find("cuDeviceGetAttribute", &d.device_attribute) &&
                 find("cuMemGetAllocationGranularity", &d.granularity) &&
                 find("cuMemAddressReserve", &d.reserve) &&
                 find("cuMemAddressFree", &d.address_free) && find("cuMemCreate", &d.create) &&
                 find("cuMemRelease", &d.release) && find("cuMemMap", &d.map) &&
                 find("cuMemUnmap", &d.unmap) && find("cuMemSetAccess", &d.set_access);
  });
  return d;
}

CUmemAllocationProp vmm_properties(int ordinal) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = ordinal;
  return prop;
}

CUmemAccessDesc vmm_access(int ordinal) {
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = ordinal;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  return access;
}

uint64_t vmm_granularity(int ordinal) {
  const VmmDriver& d = vmm_driver();
  if (!d.complete) return 0;
  CUdevice dev = 0;
  int vmm = 0;
  if (d.device_get(&dev, ordinal) != CUDA_SUCCESS ||
      d.device_attribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev) !=
          CUDA_SUCCESS ||
      vmm == 0)
    return 0;
  const CUmemAllocationProp prop = vmm_properties(ordinal);
  size_t g = 0;
  if (d.granularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS) return 0;
  return g;
}

}  // namespace kvc
