// FlashInfer's FA2 paged prefill (BatchPrefillWithPagedKVCacheDispatched,
// causal, CTA_TILE_Q 128: what its planner picks for prompts of more than
// 64 packed query rows at head dim 128), beside kvc_prefill_attention.
#include <flashinfer/attention/prefill.cuh>

#include "fi_common.cuh"

namespace fi_peer {

struct Prefill {
  PrefillRun run;
};

Prefill* prefill_plan(const PagedKv& kv, uint32_t q_heads, const int32_t* qo_indptr_host,
                      const PageTable& t, cudaStream_t stream) {
  if (kv.head_dim != kHeadDim || kv.fp8_e4m3) {
    fail("peer instantiated for bf16 KV, head dim 128 only");
    return nullptr;
  }
  Prefill* p = new Prefill;
  p->run.kv = kv;
  p->run.q_heads = q_heads;
  if (!plan_prefill_kernel(p->run, qo_indptr_host, t, stream)) {
    delete p;
    return nullptr;
  }
  if (p->run.info.cta_tile_q != 128) {
    fail("prefill: plan picked cta_tile_q " + std::to_string(p->run.info.cta_tile_q) +
         ", only 128 is instantiated");
    delete p;
    return nullptr;
  }
  return p;
}

bool prefill_run(Prefill* pf, const void* q, void* out, const int32_t* qo_indptr_device,
                 const PageTable& t, cudaStream_t stream) {
  try {
    __nv_bfloat16* tmp_v;
    float* tmp_s;
    auto p = prefill_params<__nv_bfloat16>(pf->run, q, out, qo_indptr_device, t, &tmp_v, &tmp_s);
    cudaError_t e = flashinfer::BatchPrefillWithPagedKVCacheDispatched<
        128, kHeadDim, kHeadDim, flashinfer::PosEncodingMode::kNone, /*fp16_qk_reduction=*/false,
        flashinfer::MaskMode::kCausal, Variant, decltype(p)>(p, tmp_v, tmp_s, /*enable_pdl=*/true,
                                                              stream);
    return cuda_ok(e, "BatchPrefillWithPagedKVCache");
  } catch (const std::exception& ex) {
    return fail(std::string("BatchPrefillWithPagedKVCache: ") + ex.what());
  }
}

void prefill_destroy(Prefill* p) { delete p; }

}  // namespace fi_peer
