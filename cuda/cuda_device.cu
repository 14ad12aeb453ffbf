#include "cuda/cuda_device.h"

#include <cuda_runtime.h>

#include <vector>

#include "backend/cuda_entry.h"
#include "cuda/cuda_check.h"

namespace kvc {

namespace {

int usable_device_count(cudaError_t* why) {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (why != nullptr) *why = err;
  if (err != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error for later calls
    return 0;
  }
  return n;
}

}  // namespace

CudaDevice::CudaDevice(int32_t ordinal) : ordinal_(ordinal) {
  cudaError_t why = cudaSuccess;
  const int n = usable_device_count(&why);
  if (n == 0) {
    fail(KVC_ERR_DEVICE,
         "cuda:" + std::to_string(ordinal) + " requested, but no CUDA device is usable: " +
             (why == cudaSuccess ? std::string("the driver reports 0 devices")
                                 : std::string(cudaGetErrorName(why)) + " (" +
                                       cudaGetErrorString(why) +
                                       "); is an NVIDIA GPU and its driver installed?"));
  }
  if (ordinal >= n)
    fail(KVC_ERR_DEVICE, "cuda:" + std::to_string(ordinal) + " requested, but only " +
                             std::to_string(n) + " CUDA device(s) are present");
  cudaDeviceProp prop{};
  cuda_check(cudaGetDeviceProperties(&prop, ordinal), "cudaGetDeviceProperties");
  name_ = "cuda:" + std::to_string(ordinal) + " (" + prop.name + ")";
}

void CudaDevice::activate() const { cuda_check(cudaSetDevice(ordinal_), "cudaSetDevice"); }

DeviceMemoryInfo CudaDevice::memory_info() const {
  activate();
  size_t free_b = 0, total_b = 0;
  cuda_check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
  return DeviceMemoryInfo{free_b, total_b};
}

void* CudaDevice::allocate(uint64_t bytes) {
  activate();
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, bytes);
  if (err != cudaSuccess) {
    cudaGetLastError();
    fail(KVC_ERR_OUT_OF_MEMORY, "cudaMalloc of " + std::to_string(bytes) + " bytes on " + name_ +
                                    " failed: " + cudaGetErrorName(err));
  }
  return p;
}

void CudaDevice::deallocate(void* ptr) noexcept {
  if (ptr == nullptr) return;
  cudaSetDevice(ordinal_);
  cudaFree(ptr);
}

void CudaDevice::copy_blocks(void* pool_base, const BlockGeometry& g, const BlockCopy* copies,
                             size_t count, void* stream) {
  // One 2D copy per block: each run's first n rows. A batched kernel for
  // many copies belongs to the kernels module.
  activate();
  auto* base = static_cast<unsigned char*>(pool_base);
  auto s = static_cast<cudaStream_t>(stream);
  for (size_t i = 0; i < count; ++i) {
    const BlockCopy& c = copies[i];
    unsigned char* dst = base + uint64_t(c.dst) * g.block_bytes;
    const unsigned char* src = base + uint64_t(c.src) * g.block_bytes;
    if (c.num_tokens >= g.tokens_per_block) {
      cuda_check(cudaMemcpyAsync(dst, src, g.block_bytes, cudaMemcpyDeviceToDevice, s),
                 "cudaMemcpyAsync");
    } else {
      cuda_check(cudaMemcpy2DAsync(dst, g.run_bytes(), src, g.run_bytes(),
                                   uint64_t(c.num_tokens) * g.row_bytes, g.num_runs,
                                   cudaMemcpyDeviceToDevice, s),
                 "cudaMemcpy2DAsync");
    }
  }
}

void CudaDevice::synchronize(void* stream) {
  activate();
  cuda_check(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "cudaStreamSynchronize");
}

std::unique_ptr<Device> create_cuda_device(int32_t ordinal) {
  return std::make_unique<CudaDevice>(ordinal);
}

bool cuda_backend_compiled() { return true; }

int cuda_backend_device_count() { return usable_device_count(nullptr); }

}  // namespace kvc
