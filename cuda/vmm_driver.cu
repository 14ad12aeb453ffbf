#include "cuda/vmm_driver.h"

#include <cuda_runtime.h>

#include <cstdio>
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
    if (!find("cuMemExportToShareableHandle", &d.export_handle)) d.export_handle = nullptr;
    if (!find("cuGetErrorName", &d.error_name)) d.error_name = nullptr;
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

CUmemAllocationProp vmm_shareable_properties(int ordinal) {
  CUmemAllocationProp prop = vmm_properties(ordinal);
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return prop;
}

const char* vmm_error_name(CUresult r) {
  const VmmDriver& d = vmm_driver();
  const char* name = nullptr;
  if (d.error_name != nullptr && d.error_name(r, &name) == CUDA_SUCCESS && name != nullptr)
    return name;
  static thread_local char buf[32];
  std::snprintf(buf, sizeof buf, "CUresult %d", int(r));
  return buf;
}

CUmemAccessDesc vmm_access(int ordinal) {
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = ordinal;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  return access;
}

uint64_t vmm_granularity(int ordinal) { return vmm_granularity(ordinal, vmm_properties(ordinal)); }

uint64_t vmm_granularity(int ordinal, const CUmemAllocationProp& prop) {
  const VmmDriver& d = vmm_driver();
  if (!d.complete) return 0;
  CUdevice dev = 0;
  int vmm = 0;
  if (d.device_get(&dev, ordinal) != CUDA_SUCCESS ||
      d.device_attribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev) !=
          CUDA_SUCCESS ||
      vmm == 0)
    return 0;
  size_t g = 0;
  if (d.granularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS) return 0;
  return g;
}

}  // namespace kvc
