// Host side of the Hopper TMA prefill kernel (prefill_tma_kernel.cuh): the
// tensor maps over the K and V pools. A pool is addressed as a 4-D tensor
// [block][token in block][kv head][dim] with the cache's own strides (NHD
// and HND alike); one box is 64 dims x 1 head x min(block tokens, 64)
// tokens x 1 block, written by the TMA engine into shared memory in the
// 128-byte swizzle wgmma reads. cuTensorMapEncodeTiled comes from the driver
// through the runtime's entry-point query (no link against libcuda).
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>

#include <cstdint>
#include <cstring>
#include <mutex>

#include "cuda/prefill_params.h"

namespace kvc {

// Whether the TMA kernel can address this pool: tokens per block 8 or more
// (whole 8-row swizzle atoms per box), 16-byte aligned bases, strides
// multiples of 16 bytes below 2^40.
inline bool prefill_tma_addressable(const PrefillParams& p, uint32_t head_dim) {
  if (p.block_shift < 3) return false;
  if (head_dim != 64 && head_dim != 128) return false;
  const uint64_t strides[3] = {p.head_stride, p.token_stride, p.block_stride};
  for (uint64_t s : strides)
    if (s % 16 != 0 || s >= (uint64_t(1) << 40) || s == 0) return false;
  if (reinterpret_cast<uintptr_t>(p.k_base) % 16 != 0) return false;
  if (reinterpret_cast<uintptr_t>(p.v_base) % 16 != 0) return false;
  return p.num_blocks > 0;
}

inline PFN_cuTensorMapEncodeTiled_v12000 prefill_tma_encoder() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = nullptr;
  static std::once_flag once;
  std::call_once(once, [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q{};
#if CUDART_VERSION >= 12050
    const cudaError_t e =
        cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q);
#else
    const cudaError_t e = cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &f, cudaEnableDefault, &q);
#endif
    if (e == cudaSuccess && q == cudaDriverEntryPointSuccess)
      fn = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  });
  return fn;
}

// Fills p.tmap_k / p.tmap_v for 16-bit K/V of `head_dim` with `kv_heads`
// heads; false when the pool cannot be addressed (the caller then runs
// another kernel).
inline bool prefill_tma_encode(PrefillParams& p, uint32_t head_dim, uint32_t kv_heads) {
  if (!prefill_tma_addressable(p, head_dim)) return false;
  PFN_cuTensorMapEncodeTiled_v12000 enc = prefill_tma_encoder();
  if (enc == nullptr) return false;
  const uint32_t block_tokens = 1u << p.block_shift;
  const cuuint64_t dims[4] = {head_dim, kv_heads, block_tokens, p.num_blocks};
  const cuuint64_t strides[3] = {p.head_stride, p.token_stride, p.block_stride};
  const cuuint32_t box[4] = {64, 1, block_tokens < kTmaBoxTokens ? block_tokens : kTmaBoxTokens, 1};
  const cuuint32_t estr[4] = {1, 1, 1, 1};
  static_assert(sizeof(CUtensorMap) == sizeof(p.tmap_k), "CUtensorMap is 128 bytes");
  for (int kv = 0; kv < 2; ++kv) {
    CUtensorMap m;
    void* base = const_cast<unsigned char*>(kv == 0 ? p.k_base : p.v_base);
    if (enc(&m, CU_TENSOR_MAP_DATA_TYPE_UINT16, 4, base, dims, strides, box, estr,
            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS)
      return false;
    std::memcpy(kv == 0 ? p.tmap_k : p.tmap_v, &m, sizeof(m));
  }
  return true;
}

}  // namespace kvc
