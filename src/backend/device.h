// The Device interface: everything the core needs from the memory that holds
// KV (allocation, copies, kernels). The core reaches CUDA only through here.
// Work that takes a `stream` is enqueued on it (a cudaStream_t on CUDA, NULL
// for the default stream); the CPU backend runs it synchronously.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/fault_hook.h"
#include "backend/kernel_work.h"
#include "backend/stateful_work.h"
#include "base/block_geometry.h"
#include "kvcache/config.h"

namespace kvc {

// One block copy inside a pool: the first `num_tokens` token rows of every
// run (num_tokens == tokens_per_block copies the whole block).
struct BlockCopy {
  uint32_t src = 0;
  uint32_t dst = 0;
  uint32_t num_tokens = 0;
};

// The two directions of a tier copy: a whole block from a device pool to
// the matching host (secondary tier) pool, or back.
enum class TierDirection : uint8_t { kOffload, kOnboard };

// One whole-block copy between a device pool and its host pool.
struct TierCopy {
  uint32_t device_block = 0;
  uint32_t host_block = 0;
};

// One contiguous copy of copy_ranges: `bytes` bytes from `src` to `dst`,
// any alignment, any size (0 copies nothing).
struct CopyRange {
  void* dst = nullptr;
  const void* src = nullptr;
  uint64_t bytes = 0;
};

// Direction of a 2D copy (copy_2d); host memory may be pageable.
enum class CopyKind : uint8_t { kDeviceToDevice, kHostToDevice, kDeviceToHost };

// Pool memory another process can map (kvc_cache_describe_pool_share): the
// physical allocations backing a reservation, each at `offset` from its
// base, contiguous from offset 0.
struct SharedChunk {
  uint64_t offset = 0;
  uint64_t size = 0;
};
struct SharedMemory {
  int32_t ordinal = 0;          // the device, in this process's numbering
  uint64_t granularity = 0;     // every offset and size is a multiple of it
  uint64_t reserved_bytes = 0;  // the reservation's address space
  std::vector<SharedChunk> chunks;
};

struct DeviceMemoryInfo {
  uint64_t free_bytes = 0;   // 0 when the device does not report it (CPU)
  uint64_t total_bytes = 0;
};

class Device {
 public:
  virtual ~Device() = default;

  virtual kvc_device_kind_t kind() const = 0;
  virtual int32_t ordinal() const = 0;
  virtual std::string name() const = 0;
  virtual DeviceMemoryInfo memory_info() const = 0;

  // Pool memory. allocate throws Error(KVC_ERR_OUT_OF_MEMORY) with the size.
  virtual void* allocate(uint64_t bytes) = 0;
  virtual void deallocate(void* ptr) noexcept = 0;

  // Growable pool memory (kvc_cache_resize): `max_bytes` of address space
  // reserved once, of which a prefix is backed by memory. The base never
  // moves, so pointers into the backed prefix (layer views, a CUDA graph's
  // arguments) stay valid while the prefix grows or shrinks at its end.
  // reserve_granularity() is the unit every size below is a multiple of; 0
  // means this device cannot reserve (then pools are allocate()d and a
  // resize is refused as unsupported).
  virtual uint64_t reserve_granularity() const { return 0; }
  // Reserves max_bytes and backs the first `bytes`. Throws
  // Error(KVC_ERR_OUT_OF_MEMORY) (fault site kAllocate), nothing reserved.
  virtual void* reserve(uint64_t max_bytes, uint64_t bytes);
  // Backs [from, to) of a reservation (from < to <= max_bytes). Throws
  // Error(KVC_ERR_OUT_OF_MEMORY) (fault site kAllocate) with nothing changed.
  virtual void commit(void* base, uint64_t from, uint64_t to);
  // Returns the backing of [from, to) (its bytes are gone), as far as the
  // device can: it answers where the backed prefix ends now, between from
  // and to (CUDA returns whole physical allocations only).
  virtual uint64_t decommit(void* base, uint64_t from, uint64_t to) noexcept;
  // Releases a reservation whose first `bytes` are backed.
  virtual void unreserve(void* base, uint64_t max_bytes, uint64_t bytes) noexcept;
  // Sharing a reservation with another process: what backs the reservation
  // at `base` now, and a new file descriptor (owned by the caller) for its
  // chunk `index`. Both throw Error(KVC_ERR_UNSUPPORTED) saying why this
  // device or this memory cannot be shared (the defaults: always), and
  // export_chunk Error(KVC_ERR_INVALID_ARGUMENT) for an index past the
  // chunks, Error(KVC_ERR_DEVICE) when the driver fails.
  virtual SharedMemory shared_memory(const void* base) const;
  virtual int export_chunk(const void* base, uint64_t index) const;

  // Copies between blocks of one pool laid out as `geometry`, enqueued on
  // `stream`. Sources and destinations must not overlap.
  virtual void copy_blocks(void* pool_base, const BlockGeometry& geometry,
                           const BlockCopy* copies, size_t count, void* stream) = 0;

  // Host memory of the secondary tier: pinned and mapped into the device's
  // address space on CUDA (copies and kernels reach it), plain host memory
  // on the CPU backend. allocate_host throws Error(KVC_ERR_OUT_OF_MEMORY).
  virtual void* allocate_host(uint64_t bytes) = 0;
  virtual void deallocate_host(void* ptr) noexcept = 0;

  // Copies whole blocks of `block_bytes` between the device pool at
  // `device_pool` and the host pool at `host_pool` (offload: device to
  // host; onboard: host to device), all enqueued on `stream` at once. Throws
  // Error(KVC_ERR_DEVICE) when the copies cannot be enqueued; the
  // destinations' bytes are then undefined, the sources untouched.
  virtual void copy_tier(TierDirection direction, void* device_pool, void* host_pool,
                         uint64_t block_bytes, const TierCopy* copies, size_t count,
                         void* stream) = 0;
  // Makes the work enqueued on `stream` from now on wait for every tier
  // copy enqueued so far, on any stream: a block a copy reads or writes is
  // not handed out on another stream before the copy is done.
  virtual void order_after_tier_copies(void* /*stream*/) {}

  // Waits for the work enqueued on `stream`.
  virtual void synchronize(void* stream) = 0;

  // Fences: a point in a stream's work that another thread can wait for
  // (copies out of the pools handed to a store's worker, which must not
  // read the bytes before the copies are done). create_fence throws
  // Error(KVC_ERR_DEVICE); record_fence marks the work enqueued on `stream`
  // so far (throws Error(KVC_ERR_DEVICE)); wait_fence, callable from any
  // thread while no record_fence of the same fence runs, returns once that
  // work is done (false: the device failed; the work's results are then
  // undefined). The defaults suit a device whose work is done when it is
  // enqueued (the CPU backend): record_fence synchronizes, wait_fence
  // returns true at once.
  virtual void* create_fence() { return nullptr; }
  virtual void record_fence(void* /*fence*/, void* stream) { synchronize(stream); }
  virtual bool wait_fence(void* /*fence*/) noexcept { return true; }
  virtual void destroy_fence(void* /*fence*/) noexcept {}

  // Stream-ordered memory for buffers replaced while work may still read
  // them (stateful growth): freeing waits for the work enqueued on `stream`
  // so far. allocate_on throws Error(KVC_ERR_OUT_OF_MEMORY). The defaults
  // use allocate and synchronize.
  virtual void* allocate_on(uint64_t bytes, void* stream);
  virtual void deallocate_on(void* ptr, void* stream) noexcept;
  // `height` rows of `width` bytes, rows `src_pitch` / `dst_pitch` apart,
  // enqueued on `stream`. A copy from or to host memory may complete before
  // it returns (pageable memory); one to the host is complete after
  // synchronize(stream). Throws Error(KVC_ERR_DEVICE).
  virtual void copy_2d(void* dst, uint64_t dst_pitch, const void* src, uint64_t src_pitch,
                       uint64_t width, uint64_t height, CopyKind kind, void* stream);
  // Copies every range of `ranges` (count of them; memory of this device:
  // device memory on CUDA, host memory on the CPU backend), all enqueued on
  // `stream` as one piece of work: CUDA launches one kernel per 128 ranges
  // (kCopyRangesPerLaunch, cuda/cuda_kernels.h), their list passed by value
  // in the kernel's parameters, so nothing is allocated. No destination overlaps another
  // range's destination or any source. Throws Error(KVC_ERR_DEVICE) when
  // the work cannot be enqueued; the destinations' bytes are then
  // undefined, the sources untouched. The default: one copy_2d per range.
  virtual void copy_ranges(const CopyRange* ranges, size_t count, void* stream);

  // Stateful kernels (stateful_work.h); the stateful cache checked the
  // arguments. The defaults fail with KVC_ERR_UNSUPPORTED.
  virtual void stateful_append(const StatefulAppendWork& work, void* stream);
  virtual void table_reorder(const TableReorderWork& work, void* stream);
  virtual void gather_rows(const RowGatherWork& work, void* stream);
  // Stateful decode attention; the defaults run decode_attention on
  // work.decode (the CPU reference) and size its workspace.
  virtual void stateful_decode(const StatefulDecodeWork& work, void* stream);
  virtual uint64_t stateful_decode_workspace_bytes(const DecodeWork& work) const;

  // Kernels (kvcache/kernels.h). The arguments passed check_*_args()
  // (kernel_checks.h); values inside the arrays are the backend's to check.
  // A backend without them (a test double) fails with KVC_ERR_UNSUPPORTED.
  virtual void store_kv(const StoreKvWork& work, void* stream);
  virtual void decode_attention(const DecodeWork& work, void* stream);
  // Workspace bytes decode_attention needs; never decreases as batch or
  // max_seq_len grows.
  virtual uint64_t decode_workspace_bytes(const DecodeWork& work) const;
  // Paged prefill attention; qo_indptr and kv_lens (host arrays) passed
  // check_prefill_args().
  virtual void prefill_attention(const PrefillWork& work, void* stream);
  // Workspace bytes prefill_attention needs; never decreases as batch,
  // total_q or max_kv_len grows.
  virtual uint64_t prefill_workspace_bytes(const PrefillWork& work) const;
  // Waits for `stream`, then returns (and clears, unless sticky) the first
  // error recorded by enqueued kernel work.
  virtual AsyncError async_error(void* stream);

  // Tests only (fault_hook.h): the hook asked before every allocation and
  // tier copy; nullptr (the default) injects nothing. Not owned.
  void set_fault_hook(FaultHook* hook) { fault_hook_ = hook; }

 protected:
  bool inject(FaultSite site) const { return fault_hook_ != nullptr && fault_hook_->fail(site); }
  void note_allocated(FaultSite site, const void* p) const {
    if (fault_hook_ != nullptr) fault_hook_->allocated(site, p);
  }
  void note_released(FaultSite site, const void* p) const {
    if (fault_hook_ != nullptr && p != nullptr) fault_hook_->released(site, p);
  }

 private:
  FaultHook* fault_hook_ = nullptr;
};

// Creates the device of a config: the CPU backend, or CUDA device `ordinal`.
// Throws Error(KVC_ERR_DEVICE) saying why a CUDA device cannot be used.
std::unique_ptr<Device> create_device(kvc_device_kind_t kind, int32_t ordinal);

// True when the library was built with the CUDA backend.
bool cuda_compiled();
// Usable CUDA devices now (0 without the backend, a driver or a GPU).
int cuda_device_count();

}  // namespace kvc
