// The Hopper prefill attention variants (prefill_hopper.h): instantiates
// prefill_wgmma_kernel.cuh and prefill_tma_kernel.cuh for f16 / bf16, head
// dim 64 / 128, with and without a soft cap. Compiled for sm_90a only (wgmma); the launch code in
// prefill_attention.cu asks for a variant and falls back to the mma.sync
// kernel when this returns NULL.
#include <cuda_runtime.h>

#include <mutex>

#include "cuda/cuda_check.h"
#include "cuda/prefill_hopper.h"
#include "cuda/prefill_tma_kernel.cuh"

namespace kvc {

namespace {

constexpr int kMaxDevices = 64;
constexpr int kStages = 2;  // K/V stages: 2 leave room for two thread blocks per SM
// The TMA kernel: K/V tiles of 128 tokens, 3 stages (224 KB of shared memory
// at head dim 128, one thread block per SM), ping-pong consumers: the
// fastest of the probe's variants on every row (bench/results/
// 2026-11-28-prefill-h200-r2.md).
constexpr int kTmaStages = 3;
constexpr int kTmaBN = 128;

template <class F>
void setup(PrefillHopperKernel& k, F f, size_t smem, int threads) {
  k.attend = f;
  k.smem_bytes = smem;
  k.threads = threads;
  cuda_check(cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)),
             "cudaFuncSetAttribute");
  cuda_check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&k.blocks_per_sm, f, threads, smem),
             "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
}

template <class Q, int D, bool CAP>
const PrefillHopperVariant* variant() {
  static PrefillHopperVariant per_device[kMaxDevices];
  static bool usable[kMaxDevices];
  static std::once_flag once[kMaxDevices];
  int device = 0;
  cuda_check(cudaGetDevice(&device), "cudaGetDevice");
  if (device >= kMaxDevices) fail(KVC_ERR_UNSUPPORTED, "CUDA device ordinal >= 64");
  std::call_once(once[device], [device] {
    int major = 0, minor = 0;
    cuda_check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device),
               "cudaDeviceGetAttribute");
    cuda_check(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device),
               "cudaDeviceGetAttribute");
    // sm_90a code runs on compute capability 9.0 only.
    if (major != 9 || minor != 0) return;
    PrefillHopperVariant& r = per_device[device];
    setup(r.wgmma, prefill_wgmma_kernel<Q, D, CAP, kStages>, size_t(WgSmem<D, kStages>::kBytes),
          kWgThreads);
    if (r.wgmma.blocks_per_sm < 1) return;
    setup(r.tma, prefill_tma_kernel<Q, D, CAP, kTmaStages, true, kTmaBN>,
          size_t(TmaSmem<D, kTmaStages, kTmaBN>::kBytes), kTmaThreads);
    if (r.tma.blocks_per_sm < 1) r.tma.attend = nullptr;  // the wgmma kernel then runs alone
    usable[device] = true;
  });
  return usable[device] ? &per_device[device] : nullptr;
}

template <class Q, bool CAP>
const PrefillHopperVariant* pick_dim(uint32_t head_dim) {
  switch (head_dim) {
    case 64: return variant<Q, 64, CAP>();
    case 128: return variant<Q, 128, CAP>();
    default: return nullptr;
  }
}

template <class Q>
const PrefillHopperVariant* pick_cap(uint32_t head_dim, bool cap) {
  return cap ? pick_dim<Q, true>(head_dim) : pick_dim<Q, false>(head_dim);
}

}  // namespace

const PrefillHopperVariant* prefill_hopper_variant(kvc_dtype_t dtype, uint32_t head_dim, bool cap) {
  switch (dtype) {
    case KVC_DTYPE_F16: return pick_cap<f16_t>(head_dim, cap);
    case KVC_DTYPE_BF16: return pick_cap<bf16_t>(head_dim, cap);
    default: return nullptr;
  }
}

}  // namespace kvc
