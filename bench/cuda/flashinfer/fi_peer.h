// FlashInfer as a peer of the kvcache attention benchmarks, behind an
// interface that includes nothing of FlashInfer, so that the benchmarks
// build without it. The implementation (fi_decode.cu, fi_prefill.cu) is
// compiled only when the benchmark script passes FlashInfer's headers
// (-DKVCACHE_BENCH_FLASHINFER_DIR=...; see bench/flashinfer/README.md):
// FlashInfer is never a dependency of the library or of CI.
//
// Every peer reads the kvcache pool itself (the layer view's strides), the
// same blocks in the same order as the kvcache call it is compared with,
// through FlashInfer's CSR page table (indptr / indices / last_page_len).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace fi_peer {

// One layer of a kvcache pool in FlashInfer's terms; strides in elements.
struct PagedKv {
  void* k_data;
  void* v_data;
  int64_t stride_page;  // between pages (kvcache blocks)
  int64_t stride_n;     // between tokens of a page
  int64_t stride_h;     // between heads
  uint32_t kv_heads;
  uint32_t page_size;
  uint32_t head_dim;  // 128 only (the instantiated kernels)
  bool fp8_e4m3;      // KV element type: bf16 when false
};

// Device page table in FlashInfer's CSR form, and the host copy of indptr
// that its planner reads.
struct PageTable {
  const int32_t* indices;        // device
  const int32_t* indptr;         // device, [batch + 1]
  const int32_t* last_page_len;  // device, [batch]
  const int32_t* indptr_host;    // host, [batch + 1]
  uint32_t batch;
};

enum class DecodeKernel {
  kCudaCore,    // BatchDecodeWithPagedKVCache (decode.cuh)
  kTensorCore,  // BatchPrefillWithPagedKVCache with one query per request
                // (what BatchDecodeWithPagedKVCacheWrapper(use_tensor_cores=True) runs: FA2)
};

struct Decode;
struct Prefill;

// Plans a bf16-query decode over `table` (FlashInfer's plan(): host work and
// one small copy on `stream`). Returns nullptr and sets last_error() when
// FlashInfer refuses the shape.
Decode* decode_plan(DecodeKernel kernel, const PagedKv& kv, uint32_t q_heads, const PageTable& table,
                    cudaStream_t stream);
// Enqueues one decode on `stream`: q and out are [batch][q_heads][head_dim]
// bf16; `table` may differ from the planned one in its device arrays only
// (same batch and page counts). Returns false and sets last_error() on a
// launch error.
bool decode_run(Decode* d, const void* q, void* out, const PageTable& table, cudaStream_t stream);
void decode_destroy(Decode* d);

// Plans a causal paged prefill: qo_indptr_host [batch + 1] query rows,
// table.indptr_host the pages; q/out [rows][q_heads][head_dim] bf16.
Prefill* prefill_plan(const PagedKv& kv, uint32_t q_heads, const int32_t* qo_indptr_host,
                      const PageTable& table, cudaStream_t stream);
bool prefill_run(Prefill* p, const void* q, void* out, const int32_t* qo_indptr_device,
                 const PageTable& table, cudaStream_t stream);
void prefill_destroy(Prefill* p);

const char* last_error();

}  // namespace fi_peer
