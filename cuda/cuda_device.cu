#include "cuda/cuda_device.h"

#include <cuda_runtime.h>

#include <vector>

#include "backend/cuda_entry.h"
#include "cuda/cuda_check.h"
#include "cuda/growth_memory.h"
#include "cuda/pool_reservations.h"
#include "cuda/stateful_kernels.h"

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

// A kernel of this build: whether the device can load it tells whether the
// build has code for the device's compute capability (the default build
// has sm_90 code and compute_90 PTX, which no older GPU can run).
__global__ void build_fits_device_kernel() {}

void require_code_for(int ordinal, const cudaDeviceProp& prop) {
  cudaFuncAttributes attr{};
  const cudaError_t err = cudaFuncGetAttributes(&attr, build_fits_device_kernel);
  if (err == cudaSuccess) return;
  cudaGetLastError();  // not sticky, but leave nothing behind
  fail(KVC_ERR_DEVICE,
       "cuda:" + std::to_string(ordinal) + " (" + prop.name + ") has compute capability " +
           std::to_string(prop.major) + "." + std::to_string(prop.minor) +
           ", which this build of kvcache has no code for: " + cudaGetErrorName(err) + " (" +
           cudaGetErrorString(err) + "); its kernels need compute capability 9.0 or newer " +
           "(the default build targets sm_90 and compute_90)");
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
  gpu_.sm_count = prop.multiProcessorCount;
  activate();
  require_code_for(ordinal, prop);
  errors_ = static_cast<KernelErrorRecord*>(allocate(sizeof(KernelErrorRecord)));
  cuda_check(cudaMemset(errors_, 0, sizeof(KernelErrorRecord)), "cudaMemset");
  cuda_check(cudaEventCreateWithFlags(&tier_event_, cudaEventDisableTiming), "cudaEventCreate");
  growth_ = std::make_unique<GrowthMemory>(ordinal);
  reservations_ = std::make_unique<PoolReservations>(ordinal);
}

CudaDevice::~CudaDevice() {
  // Waits for the pending frees of growth buffers. Outstanding frees of
  // the pool complete on their own (cudaMemPoolDestroy).
  cudaSetDevice(ordinal_);
  growth_.reset();
  reservations_.reset();
  if (pool_ != nullptr) cudaMemPoolDestroy(pool_);
  deallocate(errors_);
  if (tier_event_ != nullptr) cudaEventDestroy(tier_event_);
}

void CudaDevice::activate() const {
  // Kernel calls come per layer and step: skip the switch when it is a no-op.
  int current = -1;
  if (cudaGetDevice(&current) == cudaSuccess && current == ordinal_) return;
  cuda_check(cudaSetDevice(ordinal_), "cudaSetDevice");
}

DeviceMemoryInfo CudaDevice::memory_info() const {
  activate();
  size_t free_b = 0, total_b = 0;
  cuda_check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
  return DeviceMemoryInfo{free_b, total_b};
}

void* CudaDevice::allocate(uint64_t bytes) {
  activate();
  if (inject(FaultSite::kAllocate))
    fail(KVC_ERR_OUT_OF_MEMORY, "cudaMalloc of " + std::to_string(bytes) + " bytes on " + name_ +
                                    " failed (injected fault)");
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, bytes);
  if (err != cudaSuccess) {
    cudaGetLastError();
    fail(KVC_ERR_OUT_OF_MEMORY, "cudaMalloc of " + std::to_string(bytes) + " bytes on " + name_ +
                                    " failed: " + cudaGetErrorName(err));
  }
  note_allocated(FaultSite::kAllocate, p);
  return p;
}

uint64_t CudaDevice::reserve_granularity() const { return reservations_->granularity(); }

void* CudaDevice::reserve(uint64_t max_bytes, uint64_t bytes) {
  activate();
  if (inject(FaultSite::kAllocate))
    fail(KVC_ERR_OUT_OF_MEMORY, "reserving " + std::to_string(max_bytes) + " bytes backed by " +
                                    std::to_string(bytes) + " on " + name_ +
                                    " failed (injected fault)");
  const char* why = "";
  void* p = reservations_->reserve(max_bytes, bytes, &why);
  if (p == nullptr)
    fail(KVC_ERR_OUT_OF_MEMORY, "reserving " + std::to_string(max_bytes) + " bytes backed by " +
                                    std::to_string(bytes) + " on " + name_ + " failed: " + why);
  note_allocated(FaultSite::kAllocate, p);
  return p;
}

void CudaDevice::commit(void* base, uint64_t from, uint64_t to) {
  activate();
  if (inject(FaultSite::kAllocate))
    fail(KVC_ERR_OUT_OF_MEMORY, "backing " + std::to_string(to - from) + " more pool bytes on " +
                                    name_ + " failed (injected fault)");
  const char* why = "";
  if (!reservations_->commit(base, from, to, &why))
    fail(KVC_ERR_OUT_OF_MEMORY, "backing " + std::to_string(to - from) + " more pool bytes on " +
                                    name_ + " failed: " + why);
}

uint64_t CudaDevice::decommit(void* base, uint64_t from, uint64_t /*to*/) noexcept {
  cudaSetDevice(ordinal_);
  return reservations_->decommit(base, from);
}

void CudaDevice::unreserve(void* base, uint64_t /*max_bytes*/, uint64_t /*bytes*/) noexcept {
  note_released(FaultSite::kAllocate, base);
  cudaSetDevice(ordinal_);
  reservations_->unreserve(base);
}

SharedMemory CudaDevice::shared_memory(const void* base) const {
  SharedMemory m;
  std::string why;
  if (!reservations_->shared(base, &m, &why))
    fail(KVC_ERR_UNSUPPORTED, "the pool memory on " + name_ + " cannot be shared: " + why);
  return m;
}

int CudaDevice::export_chunk(const void* base, uint64_t index) const {
  activate();
  std::string why;
  bool bad_index = false;
  const int fd = reservations_->export_chunk(base, index, &why, &bad_index);
  if (fd >= 0) return fd;
  if (bad_index) fail(KVC_ERR_INVALID_ARGUMENT, why);
  if (why.rfind("cuMemExportToShareableHandle", 0) == 0)
    fail(KVC_ERR_DEVICE, why + " on " + name_);
  fail(KVC_ERR_UNSUPPORTED, "the pool memory on " + name_ + " cannot be shared: " + why);
}

void CudaDevice::deallocate(void* ptr) noexcept {
  if (ptr == nullptr) return;
  note_released(FaultSite::kAllocate, ptr);
  cudaSetDevice(ordinal_);
  cudaFree(ptr);
}

void CudaDevice::copy_blocks(void* pool_base, const BlockGeometry& g, const BlockCopy* copies,
                             size_t count, void* stream) {
  if (count == 0) return;
  activate();
  launch_copy_blocks(pool_base, g, copies, count, static_cast<cudaStream_t>(stream));
}

void* CudaDevice::allocate_host(uint64_t bytes) {
  activate();
  if (inject(FaultSite::kAllocateHost))
    fail(KVC_ERR_OUT_OF_MEMORY, "cudaHostAlloc of " + std::to_string(bytes) +
                                    " bytes of pinned host memory for the host tier failed "
                                    "(injected fault)");
  void* p = nullptr;
  const cudaError_t err =
      cudaHostAlloc(&p, bytes == 0 ? 1 : bytes, cudaHostAllocMapped | cudaHostAllocPortable);
  if (err != cudaSuccess) {
    cudaGetLastError();
    fail(KVC_ERR_OUT_OF_MEMORY, "cudaHostAlloc of " + std::to_string(bytes) +
                                    " bytes of pinned host memory for the host tier failed: " +
                                    cudaGetErrorName(err));
  }
  void* dev = nullptr;
  const cudaError_t map_err = cudaHostGetDevicePointer(&dev, p, 0);
  if (map_err != cudaSuccess) {
    cudaGetLastError();
    cudaFreeHost(p);
    fail(KVC_ERR_DEVICE, std::string("cudaHostGetDevicePointer for the host tier on ") + name_ +
                             " failed: " + cudaGetErrorName(map_err));
  }
  host_maps_.emplace_back(p, dev);
  note_allocated(FaultSite::kAllocateHost, p);
  return p;
}

void CudaDevice::deallocate_host(void* ptr) noexcept {
  if (ptr == nullptr) return;
  note_released(FaultSite::kAllocateHost, ptr);
  for (size_t i = 0; i < host_maps_.size(); ++i)
    if (host_maps_[i].first == ptr) {
      host_maps_.erase(host_maps_.begin() + long(i));
      break;
    }
  cudaFreeHost(ptr);
}

void CudaDevice::copy_tier(TierDirection direction, void* device_pool, void* host_pool,
                           uint64_t block_bytes, const TierCopy* copies, size_t count,
                           void* stream) {
  if (count == 0) return;
  activate();
  void* host_dev = nullptr;
  for (const auto& m : host_maps_)
    if (m.first == host_pool) host_dev = m.second;
  if (host_dev == nullptr)
    fail(KVC_ERR_INTERNAL, "tier copy from a host pool this device did not allocate");
  auto s = static_cast<cudaStream_t>(stream);
  // An injected fault copies the first half, as a copy that broke off would.
  const bool broken = inject(FaultSite::kCopyTier);
  const size_t done = broken ? count / 2 : count;
  if (done > 0)
    launch_tier_copy(direction == TierDirection::kOffload, device_pool, host_dev, block_bytes,
                     copies, done, s);
  if (broken)
    fail(KVC_ERR_DEVICE, std::string(direction == TierDirection::kOffload ? "offload" : "onboard") +
                             " copy of " + std::to_string(count) + " blocks failed after " +
                             std::to_string(done) + " (injected fault)");
  cuda_check(cudaEventRecord(tier_event_, s), "cudaEventRecord");
  tier_recorded_ = true;
  tier_stream_ = stream;
}

void CudaDevice::order_after_tier_copies(void* stream) {
  if (!tier_recorded_ || stream == tier_stream_) return;
  activate();
  cuda_check(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), tier_event_, 0),
             "cudaStreamWaitEvent");
}

void* CudaDevice::allocate_on(uint64_t bytes, void* stream) {
  if (bytes == 0) return nullptr;
  if (inject(FaultSite::kAllocate))
    fail(KVC_ERR_OUT_OF_MEMORY, "allocation of " + std::to_string(bytes) +
                                    " bytes of growth memory on " + name_ + " failed (injected fault)");
  activate();
  void* p = nullptr;
  if (growth_->available()) {
    // One mapping per buffer (growth_memory.h): freed memory goes back to
    // the driver when the work before the free is done.
    const char* why = "";
    p = growth_->allocate(bytes, &why);
    if (p == nullptr)
      fail(KVC_ERR_OUT_OF_MEMORY, std::string(why) + " for a buffer of " + std::to_string(bytes) +
                                      " bytes on " + name_ + " failed");
  } else {
    // No virtual memory API: a stream-ordered pool of this device's own,
    // trimmed before each allocation.
    if (pool_ == nullptr) {
      cudaMemPoolProps props{};
      props.allocType = cudaMemAllocationTypePinned;
      props.location.type = cudaMemLocationTypeDevice;
      props.location.id = ordinal_;
      cuda_check(cudaMemPoolCreate(&pool_, &props), "cudaMemPoolCreate");
    }
    cuda_check(cudaMemPoolTrimTo(pool_, 0), "cudaMemPoolTrimTo");
    const cudaError_t err =
        cudaMallocFromPoolAsync(&p, bytes, pool_, static_cast<cudaStream_t>(stream));
    if (err != cudaSuccess) {
      cudaGetLastError();
      fail(KVC_ERR_OUT_OF_MEMORY, "cudaMallocFromPoolAsync of " + std::to_string(bytes) +
                                      " bytes on " + name_ + " failed: " + cudaGetErrorName(err));
    }
  }
  note_allocated(FaultSite::kAllocate, p);
  return p;
}

void CudaDevice::deallocate_on(void* ptr, void* stream) noexcept {
  if (ptr == nullptr) return;
  note_released(FaultSite::kAllocate, ptr);
  cudaSetDevice(ordinal_);
  if (!growth_->release(ptr, static_cast<cudaStream_t>(stream)))
    cudaFreeAsync(ptr, static_cast<cudaStream_t>(stream));
}

void CudaDevice::copy_2d(void* dst, uint64_t dst_pitch, const void* src, uint64_t src_pitch,
                         uint64_t width, uint64_t height, CopyKind /*kind*/, void* stream) {
  if (width == 0 || height == 0) return;
  activate();
  auto s = static_cast<cudaStream_t>(stream);
  if (height == 1)
    cuda_check(cudaMemcpyAsync(dst, src, width, cudaMemcpyDefault, s), "cudaMemcpyAsync");
  else
    cuda_check(cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, width, height, cudaMemcpyDefault, s),
               "cudaMemcpy2DAsync");
}

void CudaDevice::copy_ranges(const CopyRange* ranges, size_t count, void* stream) {
  if (count == 0) return;
  activate();
  launch_copy_ranges(ranges, count, static_cast<cudaStream_t>(stream));
}

void CudaDevice::stateful_append(const StatefulAppendWork& work, void* stream) {
  activate();
  // Buffers replaced by earlier growths go back to the driver as soon as
  // their work is done, not only at the next growth.
  growth_->collect();
  launch_stateful_append(work, static_cast<cudaStream_t>(stream));
}

void CudaDevice::table_reorder(const TableReorderWork& work, void* stream) {
  activate();
  launch_table_reorder(work, static_cast<cudaStream_t>(stream));
}

void CudaDevice::gather_rows(const RowGatherWork& work, void* stream) {
  activate();
  launch_gather_rows(work, static_cast<cudaStream_t>(stream));
}

void CudaDevice::stateful_decode(const StatefulDecodeWork& work, void* stream) {
  activate();
  launch_stateful_decode(work, gpu_, errors_, static_cast<cudaStream_t>(stream));
}

uint64_t CudaDevice::stateful_decode_workspace_bytes(const DecodeWork& work) const {
  activate();
  return kvc::stateful_decode_workspace_bytes(work, gpu_);
}

void CudaDevice::store_kv(const StoreKvWork& work, void* stream) {
  activate();
  launch_store_kv(work, errors_, static_cast<cudaStream_t>(stream));
}

void CudaDevice::decode_attention(const DecodeWork& work, void* stream) {
  activate();
  launch_decode_attention(work, gpu_, errors_, static_cast<cudaStream_t>(stream));
}

uint64_t CudaDevice::decode_workspace_bytes(const DecodeWork& work) const {
  activate();
  return kvc::decode_workspace_bytes(work, gpu_);
}

void CudaDevice::prefill_attention(const PrefillWork& work, void* stream) {
  activate();
  launch_prefill_attention(work, gpu_, errors_, static_cast<cudaStream_t>(stream));
}

uint64_t CudaDevice::prefill_workspace_bytes(const PrefillWork& work) const {
  activate();
  return kvc::prefill_workspace_bytes(work, gpu_);
}

AsyncError CudaDevice::async_error(void* stream) {
  activate();
  auto s = static_cast<cudaStream_t>(stream);
  AsyncError out;
  const cudaError_t err = cudaStreamSynchronize(s);
  if (err != cudaSuccess) {
    // A fault in enqueued work (an illegal address) is sticky: the context
    // is unusable and every later call reports it again.
    out.status = KVC_ERR_DEVICE;
    out.message = std::string("enqueued work on ") + name_ + " failed: " + cudaGetErrorName(err) +
                  " (" + cudaGetErrorString(err) + ")";
    return out;
  }
  std::lock_guard<std::mutex> lock(errors_mutex_);
  KernelErrorRecord record{};
  cuda_check(cudaMemcpyAsync(&record, errors_, sizeof record, cudaMemcpyDeviceToHost, s),
             "cudaMemcpyAsync");
  cuda_check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  if (record.code > 0) {
    out.status = KVC_ERR_INVALID_ARGUMENT;
    out.message = describe_kernel_error(record);
    // Reported: clear it so that the next error is recorded.
    cuda_check(cudaMemsetAsync(errors_, 0, sizeof(KernelErrorRecord), s), "cudaMemsetAsync");
    cuda_check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  }
  return out;
}

void CudaDevice::synchronize(void* stream) {
  activate();
  cuda_check(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "cudaStreamSynchronize");
}

void* CudaDevice::create_fence() {
  activate();
  cudaEvent_t e = nullptr;
  cuda_check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
  return e;
}

void CudaDevice::record_fence(void* fence, void* stream) {
  activate();
  cuda_check(cudaEventRecord(static_cast<cudaEvent_t>(fence), static_cast<cudaStream_t>(stream)),
             "cudaEventRecord");
}

bool CudaDevice::wait_fence(void* fence) noexcept {
  // Called from a store's worker thread: this device made current there
  // first, so that the runtime does not create device 0's primary context
  // on that thread (memory on a GPU the cache does not use).
  int current = -1;
  if (cudaGetDevice(&current) != cudaSuccess) return false;
  if (current != ordinal_ && cudaSetDevice(ordinal_) != cudaSuccess) return false;
  return cudaEventSynchronize(static_cast<cudaEvent_t>(fence)) == cudaSuccess;
}

void CudaDevice::destroy_fence(void* fence) noexcept {
  if (fence != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(fence));
}

std::unique_ptr<Device> create_cuda_device(int32_t ordinal) {
  return std::make_unique<CudaDevice>(ordinal);
}

bool cuda_backend_compiled() { return true; }

int cuda_backend_device_count() { return usable_device_count(nullptr); }

}  // namespace kvc
