// FlashInfer's CUDA-core paged decode (BatchDecodeWithPagedKVCacheDispatched,
// decode.cuh) as the Python wrapper plans and runs it with
// use_tensor_cores=False: bf16 query / KV / output, head dim 128, no RoPE,
// PDL on (its default on sm_90). Also the planner of the prefill-kernel
// peers (host code only).
#include <flashinfer/attention/decode.cuh>

#include "fi_common.cuh"

namespace fi_peer {

std::string& error_text() {
  static std::string text;
  return text;
}

const char* last_error() { return error_text().c_str(); }

using CcParams = flashinfer::BatchDecodeParams<__nv_bfloat16, __nv_bfloat16, __nv_bfloat16, int32_t>;

struct Decode {
  DecodeKernel kernel;
  Workspace ws;
  PagedKv kv{};
  uint32_t q_heads = 0;
  flashinfer::DecodePlanInfo cc_info;
  // Tensor-core path (fi_decode_tc.cu): the prefill plan, and the device
  // qo_indptr of one query per request.
  PrefillRun tc;
  int32_t* qo_indptr = nullptr;
  ~Decode() {
    if (qo_indptr) cudaFree(qo_indptr);
  }
};

// fi_decode_tc.cu
bool launch_prefill_tile16(PrefillRun& r, const void* q, void* out, const int32_t* qo_indptr,
                           const PageTable& t, cudaStream_t stream);

bool decode_run_tc(Decode* d, const void* q, void* out, const PageTable& t, cudaStream_t stream) {
  return launch_prefill_tile16(d->tc, q, out, d->qo_indptr, t, stream);
}

bool plan_prefill_kernel(PrefillRun& r, const int32_t* qo_indptr_host, const PageTable& t,
                         cudaStream_t stream) {
  try {
    if (!r.ws.allocate()) return false;
    const uint32_t rows = uint32_t(qo_indptr_host[t.batch]);
    cudaError_t e = flashinfer::PrefillPlan<int32_t>(
        r.ws.float_buf, r.ws.float_bytes, r.ws.int_buf, r.ws.host_int, r.ws.int_bytes, r.info,
        const_cast<int32_t*>(qo_indptr_host), const_cast<int32_t*>(t.indptr_host), rows, t.batch,
        r.q_heads, r.kv.kv_heads, kHeadDim, kHeadDim, r.kv.page_size,
        /*enable_cuda_graph=*/false, /*sizeof_dtype_o=*/2, /*window_left=*/-1,
        /*fixed_split_size=*/-1, /*disable_split_kv=*/false, /*num_colocated_ctas=*/0,
        /*uniform_q_len=*/0, stream, /*kv_dtype_bytes=*/r.kv.fp8_e4m3 ? 1 : 2);
    if (!cuda_ok(e, "PrefillPlan")) return false;
    return cuda_ok(cudaStreamSynchronize(stream), "PrefillPlan copy");
  } catch (const std::exception& ex) {
    return fail(std::string("PrefillPlan: ") + ex.what());
  }
}

Decode* decode_plan(DecodeKernel kernel, const PagedKv& kv, uint32_t q_heads, const PageTable& t,
                    cudaStream_t stream) {
  if (kv.head_dim != kHeadDim || kv.fp8_e4m3) {
    fail("peer instantiated for bf16 KV, head dim 128 only");
    return nullptr;
  }
  Decode* d = new Decode;
  d->kernel = kernel;
  d->kv = kv;
  d->q_heads = q_heads;
  if (kernel == DecodeKernel::kTensorCore) {
    d->tc.kv = kv;
    d->tc.q_heads = q_heads;
    std::vector<int32_t> qo(t.batch + 1);
    for (uint32_t b = 0; b <= t.batch; ++b) qo[b] = int32_t(b);
    if (!cuda_ok(cudaMalloc(&d->qo_indptr, qo.size() * 4), "cudaMalloc") ||
        !cuda_ok(cudaMemcpy(d->qo_indptr, qo.data(), qo.size() * 4, cudaMemcpyHostToDevice),
                 "cudaMemcpy") ||
        !plan_prefill_kernel(d->tc, qo.data(), t, stream)) {
      delete d;
      return nullptr;
    }
    if (d->tc.info.cta_tile_q != 16) {
      fail("tensor-core decode: plan picked cta_tile_q " + std::to_string(d->tc.info.cta_tile_q) +
           ", only 16 is instantiated");
      delete d;
      return nullptr;
    }
    return d;
  }
  try {
    if (!d->ws.allocate()) {
      delete d;
      return nullptr;
    }
    cudaError_t e = cudaErrorInvalidValue;
    DISPATCH_GQA_GROUP_SIZE(q_heads / kv.kv_heads, GROUP_SIZE, {
      auto work = flashinfer::BatchDecodeWithPagedKVCacheWorkEstimationDispatched<
          GROUP_SIZE, kHeadDim, flashinfer::PosEncodingMode::kNone, Variant, CcParams>;
      e = flashinfer::DecodePlan<kHeadDim, flashinfer::PosEncodingMode::kNone, Variant, CcParams>(
          d->ws.float_buf, d->ws.float_bytes, d->ws.int_buf, d->ws.host_int, d->ws.int_bytes,
          d->cc_info, const_cast<int32_t*>(t.indptr_host), t.batch, q_heads, kv.page_size,
          /*enable_cuda_graph=*/false, stream, work);
    });
    if (!cuda_ok(e, "DecodePlan") || !cuda_ok(cudaStreamSynchronize(stream), "DecodePlan copy")) {
      delete d;
      return nullptr;
    }
  } catch (const std::exception& ex) {
    fail(std::string("DecodePlan: ") + ex.what());
    delete d;
    return nullptr;
  }
  return d;
}

bool decode_run(Decode* d, const void* q, void* out, const PageTable& t, cudaStream_t stream) {
  if (d->kernel == DecodeKernel::kTensorCore) return decode_run_tc(d, q, out, t, stream);
  try {
    CcParams p;
    p.q = static_cast<__nv_bfloat16*>(const_cast<void*>(q));
    p.paged_kv = make_paged<__nv_bfloat16>(d->kv, t);
    p.o = static_cast<__nv_bfloat16*>(out);
    p.lse = nullptr;
    p.num_qo_heads = d->q_heads;
    p.q_stride_n = int32_t(d->q_heads * kHeadDim);
    p.q_stride_h = int32_t(kHeadDim);
    p.window_left = -1;
    p.logits_soft_cap = 0.0f;
    p.sm_scale = 1.0f / std::sqrt(float(kHeadDim));
    p.rope_rcp_scale = 1.0f;
    p.rope_rcp_theta = 1.0f / kRopeTheta;
    const auto& i = d->cc_info;
    p.request_indices = at<int32_t>(d->ws.int_buf, i.request_indices_offset);
    p.kv_tile_indices = at<int32_t>(d->ws.int_buf, i.kv_tile_indices_offset);
    p.o_indptr = at<int32_t>(d->ws.int_buf, i.o_indptr_offset);
    p.kv_chunk_size_ptr = at<int32_t>(d->ws.int_buf, i.kv_chunk_size_ptr_offset);
    __nv_bfloat16* tmp_v = nullptr;
    float* tmp_s = nullptr;
    if (i.split_kv) {
      tmp_v = at<__nv_bfloat16>(d->ws.float_buf, i.v_offset);
      tmp_s = at<float>(d->ws.float_buf, i.s_offset);
    }
    p.padded_batch_size = uint32_t(i.padded_batch_size);
    cudaError_t e =
        flashinfer::BatchDecodeWithPagedKVCacheDispatched<kHeadDim, flashinfer::PosEncodingMode::kNone,
                                                          Variant>(p, tmp_v, tmp_s,
                                                                   /*enable_pdl=*/true, stream);
    return cuda_ok(e, "BatchDecodeWithPagedKVCache");
  } catch (const std::exception& ex) {
    return fail(std::string("BatchDecodeWithPagedKVCache: ") + ex.what());
  }
}

void decode_destroy(Decode* d) { delete d; }

}  // namespace fi_peer
