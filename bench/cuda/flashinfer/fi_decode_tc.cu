// FlashInfer's tensor-core decode: its FA2 paged prefill kernel with one
// query per request and no mask (CTA_TILE_Q 16), as
// BatchDecodeWithPagedKVCacheWrapper(use_tensor_cores=True) runs it on sm_90.
#include <flashinfer/attention/prefill.cuh>

#include "fi_common.cuh"

namespace fi_peer {

bool launch_prefill_tile16(PrefillRun& r, const void* q, void* out, const int32_t* qo_indptr,
                           const PageTable& t, cudaStream_t stream) {
  try {
    __nv_bfloat16* tmp_v;
    float* tmp_s;
    auto p = prefill_params<__nv_bfloat16>(r, q, out, qo_indptr, t, &tmp_v, &tmp_s);
    cudaError_t e = flashinfer::BatchPrefillWithPagedKVCacheDispatched<
        16, kHeadDim, kHeadDim, flashinfer::PosEncodingMode::kNone, /*fp16_qk_reduction=*/false,
        flashinfer::MaskMode::kNone, Variant, decltype(p)>(p, tmp_v, tmp_s, /*enable_pdl=*/true,
                                                            stream);
    return cuda_ok(e, "BatchPrefillWithPagedKVCache (decode)");
  } catch (const std::exception& ex) {
    return fail(std::string("BatchPrefillWithPagedKVCache (decode): ") + ex.what());
  }
}

}  // namespace fi_peer
