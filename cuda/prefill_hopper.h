// The Hopper (sm_90a, wgmma) variant of paged prefill attention
// (prefill_wgmma_kernel.cuh), compiled in its own translation unit for
// sm_90a alone (CMakeLists.txt builds cuda/prefill_wgmma.cu only when the
// build targets sm_90 and nvcc knows sm_90a; it defines KVC_HAVE_SM90A).
// prefill_attention.cu asks for it at run time and falls back to the
// mma.sync kernel when there is none.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/prefill_params.h"
#include "kvcache/config.h"

namespace kvc {

struct PrefillHopperKernel {
  void (*attend)(PrefillParams);
  size_t smem_bytes;
  int threads;
  int blocks_per_sm;
};

// wgmma: prefill_wgmma_kernel.cuh (cp.async K/V gather, any block size);
// tma: prefill_tma_kernel.cuh (TMA-fed K/V, warp-specialized), for pools
// prefill_tma_map.h can address (tokens per block >= 8), with the tensor
// maps in the parameters.
struct PrefillHopperVariant {
  PrefillHopperKernel wgmma;
  PrefillHopperKernel tma;
};

// The Hopper kernels for 16-bit K/V of `dtype` (queries of the same dtype),
// head dim 64 or 128, with or without a soft cap, on the current device;
// NULL when the device is not compute capability 9.0 or the combination has
// no Hopper kernel (fp8 K/V, head dim 256). Thread safe.
const PrefillHopperVariant* prefill_hopper_variant(kvc_dtype_t dtype, uint32_t head_dim, bool cap);

}  // namespace kvc
