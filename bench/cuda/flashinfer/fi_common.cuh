// Shared by the FlashInfer peer translation units: workspace, the page
// table in FlashInfer's paged_kv_t, error capture. FlashInfer throws
// flashinfer::Error on a refused shape; the peer turns that into a message.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <cmath>
#include <exception>
#include <string>

#include <flashinfer/attention/default_decode_params.cuh>
#include <flashinfer/attention/default_prefill_params.cuh>
#include <flashinfer/attention/scheduler.cuh>
#include <flashinfer/attention/variants.cuh>
#include <flashinfer/page.cuh>

#include "fi_peer.h"

namespace fi_peer {

std::string& error_text();  // fi_decode_cc.cu

inline bool fail(const std::string& what) {
  error_text() = what;
  return false;
}

inline bool cuda_ok(cudaError_t e, const char* what) {
  return e == cudaSuccess ? true : fail(std::string(what) + ": " + cudaGetErrorString(e));
}

// FlashInfer's float / int workspace and the pinned host copy its planner
// fills (the Python wrapper's defaults are 128 MiB and 8 MiB).
struct Workspace {
  void* float_buf = nullptr;
  void* int_buf = nullptr;
  void* host_int = nullptr;
  size_t float_bytes = size_t(256) << 20;
  size_t int_bytes = size_t(16) << 20;
  bool allocate() {
    return cuda_ok(cudaMalloc(&float_buf, float_bytes), "cudaMalloc") &&
           cuda_ok(cudaMalloc(&int_buf, int_bytes), "cudaMalloc") &&
           cuda_ok(cudaMallocHost(&host_int, int_bytes), "cudaMallocHost");
  }
  ~Workspace() {
    if (float_buf) cudaFree(float_buf);
    if (int_buf) cudaFree(int_buf);
    if (host_int) cudaFreeHost(host_int);
  }
};

template <class T>
T* at(void* base, int64_t offset) {
  return reinterpret_cast<T*>(static_cast<char*>(base) + offset);
}

// The kvcache layer's strides, given in NHD order (page, token, head):
// paged_kv_t's explicit-stride constructor reads them as such whatever the
// physical layout.
template <class DTypeKV>
flashinfer::paged_kv_t<DTypeKV, int32_t> make_paged(const PagedKv& kv, const PageTable& t) {
  const int64_t strides[3] = {kv.stride_page, kv.stride_n, kv.stride_h};
  return flashinfer::paged_kv_t<DTypeKV, int32_t>(
      kv.kv_heads, kv.page_size, kv.head_dim, t.batch, flashinfer::QKVLayout::kNHD,
      static_cast<DTypeKV*>(kv.k_data), static_cast<DTypeKV*>(kv.v_data), strides,
      const_cast<int32_t*>(t.indices), const_cast<int32_t*>(t.indptr),
      const_cast<int32_t*>(t.last_page_len));
}

using Variant = flashinfer::DefaultAttention</*custom_mask=*/false, /*sliding_window=*/false,
                                             /*soft_cap=*/false, /*alibi=*/false>;
constexpr uint32_t kHeadDim = 128;
constexpr float kRopeTheta = 1e4f;

// The shared prefill-kernel path (tensor-core decode and paged prefill):
// FlashInfer's PrefillPlan, then BatchPrefillWithPagedKVCacheDispatched with
// the CTA tile the plan picked (only `kTileQ` is instantiated per caller).
struct PrefillRun {
  Workspace ws;
  flashinfer::PrefillPlanInfo info;
  PagedKv kv{};
  uint32_t q_heads = 0;
};

bool plan_prefill_kernel(PrefillRun& r, const int32_t* qo_indptr_host, const PageTable& t,
                         cudaStream_t stream);

template <class DTypeKV>
flashinfer::BatchPrefillPagedParams<__nv_bfloat16, DTypeKV, __nv_bfloat16, int32_t> prefill_params(
    PrefillRun& r, const void* q, void* out, const int32_t* qo_indptr_device, const PageTable& t,
    __nv_bfloat16** tmp_v, float** tmp_s) {
  flashinfer::BatchPrefillPagedParams<__nv_bfloat16, DTypeKV, __nv_bfloat16, int32_t> p;
  p.q = static_cast<__nv_bfloat16*>(const_cast<void*>(q));
  p.paged_kv = make_paged<DTypeKV>(r.kv, t);
  p.q_indptr = const_cast<int32_t*>(qo_indptr_device);
  p.o = static_cast<__nv_bfloat16*>(out);
  p.lse = nullptr;
  p.num_qo_heads = r.q_heads;
  p.group_size = flashinfer::uint_fastdiv(r.q_heads / r.kv.kv_heads);
  p.q_stride_n = int32_t(r.q_heads * kHeadDim);
  p.q_stride_h = int32_t(kHeadDim);
  p.window_left = -1;
  p.logits_soft_cap = 0.0f;
  p.sm_scale = 1.0f / std::sqrt(float(kHeadDim));
  p.rope_rcp_scale = 1.0f;
  p.rope_rcp_theta = 1.0f / kRopeTheta;
  const auto& i = r.info;
  p.request_indices = at<int32_t>(r.ws.int_buf, i.request_indices_offset);
  p.qo_tile_indices = at<int32_t>(r.ws.int_buf, i.qo_tile_indices_offset);
  p.kv_tile_indices = at<int32_t>(r.ws.int_buf, i.kv_tile_indices_offset);
  p.o_indptr = at<int32_t>(r.ws.int_buf, i.o_indptr_offset);
  p.kv_chunk_size_ptr = at<int32_t>(r.ws.int_buf, i.kv_chunk_size_ptr_offset);
  *tmp_v = nullptr;
  *tmp_s = nullptr;
  if (i.split_kv) {
    p.merge_indptr = at<int32_t>(r.ws.int_buf, i.merge_indptr_offset);
    *tmp_v = at<__nv_bfloat16>(r.ws.float_buf, i.v_offset);
    *tmp_s = at<float>(r.ws.float_buf, i.s_offset);
  }
  p.padded_batch_size = uint32_t(i.padded_batch_size);
  p.max_total_num_rows = uint32_t(i.total_num_rows);
  p.total_num_rows = nullptr;
  return p;
}

}  // namespace fi_peer
