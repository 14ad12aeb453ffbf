// The CUDA driver's virtual memory management functions (cuMemCreate,
// cuMemMap, ...), found at run time through the runtime's
// cudaGetDriverEntryPointByVersion, so the library links only the static
// CUDA runtime and loads without libcuda. Shared by the stateful mode's
// growth buffers (growth_memory.h) and the growable pools
// (pool_reservations.h).
#pragma once

#include <cuda.h>

#include <cstdint>

namespace kvc {

struct VmmDriver {
  decltype(&cuDeviceGet) device_get = nullptr;
  decltype(&cuDeviceGetAttribute) device_attribute = nullptr;
  decltype(&cuMemGetAllocationGranularity) granularity = nullptr;
  decltype(&cuMemAddressReserve) reserve = nullptr;
  decltype(&cuMemAddressFree) address_free = nullptr;
  decltype(&cuMemCreate) create = nullptr;
  decltype(&cuMemRelease) release = nullptr;
  decltype(&cuMemMap) map = nullptr;
  decltype(&cuMemUnmap) unmap = nullptr;
  decltype(&cuMemSetAccess) set_access = nullptr;
  bool complete = false;  // every function found
  // Sharing with another process (pool_reservations.h); may be null.
  decltype(&cuMemExportToShareableHandle) export_handle = nullptr;
  decltype(&cuGetErrorName) error_name = nullptr;
};

// Found once per process.
const VmmDriver& vmm_driver();
// Pinned device memory of device `ordinal`.
CUmemAllocationProp vmm_properties(int ordinal);
// The same, exportable as a POSIX file descriptor
// (cuMemExportToShareableHandle) so that another process can map it.
CUmemAllocationProp vmm_shareable_properties(int ordinal);
// "CUDA_ERROR_..." of `r` ("CUresult <n>" when the driver cannot name it).
const char* vmm_error_name(CUresult r);
// Read-write access for device `ordinal`.
CUmemAccessDesc vmm_access(int ordinal);
// The minimum allocation granularity when device `ordinal` supports the
// API, else 0.
uint64_t vmm_granularity(int ordinal);
// The same for `prop` (0 when the driver refuses it).
uint64_t vmm_granularity(int ordinal, const CUmemAllocationProp& prop);

}  // namespace kvc
