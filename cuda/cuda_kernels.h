// Host-side launchers of the CUDA kernels, called by CudaDevice. Arguments
// passed the host checks (backend/kernel_checks.h); values in device memory
// are checked by the kernels into `err`.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backend/device.h"
#include "backend/kernel_work.h"
#include "cuda/kernel_errors.h"

namespace kvc {

// What decode attention needs to know about the GPU to split its work.
struct GpuInfo {
  int sm_count = 0;
};

// log2 of tokens_per_block (a power of two): slots split into block and row
// with a shift and a mask.
inline uint32_t block_shift_of(uint32_t tokens_per_block) {
  uint32_t s = 0;
  while ((1u << s) < tokens_per_block) ++s;
  return s;
}

void launch_store_kv(const StoreKvWork& w, KernelErrorRecord* err, cudaStream_t stream);

// Benchmarks and tests only: force the items per thread (1, 2, 4 or 8) of
// the contiguous 16-byte store kernel, and its threads per block (1 to
// 1024, with one item per thread); 0 restores the default (one item, 256
// threads). Not thread safe; not in the C API.
void set_store_kv_items_override(int items);
void set_store_kv_threads_override(int threads);

// All copies in one launch per kCopyBatch copies (the list travels in the
// kernel parameters, so nothing is allocated).
void launch_copy_blocks(void* pool_base, const BlockGeometry& g, const BlockCopy* copies,
                        size_t count, cudaStream_t stream);

// Contiguous ranges of any size and alignment (copy_ranges.cu): one launch
// per kCopyRangesPerLaunch ranges, the list in the kernel parameters (so
// nothing is allocated); 16-byte vectors where a range's source and
// destination agree modulo 16, narrower ones otherwise, bytes at the ends.
constexpr size_t kCopyRangesPerLaunch = 128;
void launch_copy_ranges(const CopyRange* ranges, size_t count, cudaStream_t stream);

// Host-tier copies: at most this many thread blocks, so the copy leaves
// the GPU to the model.
constexpr uint32_t kMaxTierThreadBlocks = 16;

// Whole blocks between a device pool and a mapped host pool (its device
// address), all copies of a call in one launch per 1024.
void launch_tier_copy(bool to_host, void* device_pool, void* host_pool_device_ptr,
                      uint64_t block_bytes, const TierCopy* copies, size_t count,
                      cudaStream_t stream);

uint64_t decode_workspace_bytes(const DecodeWork& w, const GpuInfo& gpu);
void launch_decode_attention(const DecodeWork& w, const GpuInfo& gpu, KernelErrorRecord* err,
                             cudaStream_t stream);
// Tests and benchmarks only: which decode kernel runs. 0 (default) and 2:
// the tensor-core kernel wherever it is supported (head dim 64 or 128,
// group <= 16 or a multiple of 16), CUDA cores elsewhere; 1: CUDA cores
// always; 3: as 2 with the other pipeline depth (fp8: four blocks per SM).
// The workspace size covers
// both kernels. Not thread safe; not in the C API.
void set_decode_kernel_override(int path);

// Stateful decode attention (stateful_decode.cu): through the beam table,
// rows that read the same K/V over a chunk read it once.
uint64_t stateful_decode_workspace_bytes(const DecodeWork& w, const GpuInfo& gpu);
void launch_stateful_decode(const StatefulDecodeWork& w, const GpuInfo& gpu,
                            KernelErrorRecord* err, cudaStream_t stream);
// Benchmarks only: the resident blocks the chunk planner is told of, in
// percent of the real ones (0 restores the default). Not thread safe; not
// in the C API.
void set_stateful_decode_wave_percent(uint32_t percent);

// Paged prefill attention (prefill_attention.cu); qo_indptr and kv_lens are
// host arrays, read here to size and plan the launch.
uint64_t prefill_workspace_bytes(const PrefillWork& w, const GpuInfo& gpu);
void launch_prefill_attention(const PrefillWork& w, const GpuInfo& gpu, KernelErrorRecord* err,
                              cudaStream_t stream);

}  // namespace kvc
