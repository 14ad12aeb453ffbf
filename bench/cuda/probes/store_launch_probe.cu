// launch_store_kv (cuda/store_kv.cu) compiled straight into the probe, no
// libkvcache: its host cost per call against a bare launch. Not part of the
// build; from the repository root:
//   nvcc -O2 -std=c++17 -arch=sm_90 --expt-relaxed-constexpr -Iinclude -Ibuild/cuda/include \
//     -Isrc -I. bench/cuda/probes/store_launch_probe.cu cuda/store_kv.cu -o probe
#include <cuda_runtime.h>
#include <time.h>
#include <algorithm>
#include <cstdio>
#include <vector>
#include "cuda/cuda_kernels.h"
#include "backend/kernel_work.h"
#include "kvcache/kvcache.h"
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { std::printf("CUDA error %s line %d\n", cudaGetErrorString(e_), __LINE__); return 1; } } while (0)
static double cpu_now() { timespec t; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); return t.tv_sec * 1e6 + t.tv_nsec * 1e-3; }
__global__ void empty_kernel() {}
int main() {
  cudaStream_t stream; CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const uint32_t tokens = 256, blocks = 4096;
  void *k, *v, *pool; int64_t* slots; kvc::KernelErrorRecord* err;
  CK(cudaMalloc(&k, tokens * 8 * 128 * 2)); CK(cudaMalloc(&v, tokens * 8 * 128 * 2));
  CK(cudaMalloc(&pool, size_t(blocks) * 16 * 8 * 128 * 2 * 2)); CK(cudaMalloc(&slots, tokens * 8));
  CK(cudaMalloc(&err, 4096)); CK(cudaMemset(err, 0, 4096));
  std::vector<int64_t> hs(tokens); for (uint32_t i = 0; i < tokens; ++i) hs[i] = i;
  CK(cudaMemcpy(slots, hs.data(), tokens * 8, cudaMemcpyHostToDevice));
  kvc::StoreKvWork w;
  w.kv.base = pool; w.kv.num_blocks = blocks; w.kv.tokens_per_block = 16; w.kv.kv_heads = 8; w.kv.head_dim = 128;
  w.kv.kv_factor = 2; w.kv.dtype = KVC_DTYPE_BF16; w.kv.layout = KVC_LAYOUT_NHD;
  w.kv.head_stride = 256; w.kv.token_stride = 8 * 256; w.kv.kv_stride = 16 * 8 * 256; w.kv.block_stride = 2 * w.kv.kv_stride;
  w.num_tokens = tokens; w.src_dtype = KVC_DTYPE_BF16; w.key = k; w.value = v; w.slot_mapping = slots;
  w.set_contiguous_source();
  cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
  for (int which = 0; which < 2; ++which)
    for (int rep = 0; rep < 3; ++rep) {
      std::vector<double> host, cpu;
      for (int s = 0; s < 9; ++s) {
        CK(cudaStreamSynchronize(stream)); CK(cudaEventRecord(a, stream));
        const double c0 = cpu_now();
        for (int i = 0; i < 2000; ++i) {
          if (which == 0) empty_kernel<<<1, 32, 0, stream>>>();
          else kvc::launch_store_kv(w, err, stream);
        }
        const double c1 = cpu_now();
        CK(cudaEventRecord(b, stream)); CK(cudaEventSynchronize(b));
        float ms; CK(cudaEventElapsedTime(&ms, a, b));
        host.push_back(ms * 1000 / 2000); cpu.push_back((c1 - c0) / 2000);
      }
      std::sort(host.begin(), host.end()); std::sort(cpu.begin(), cpu.end());
      std::printf("%-28s per host call %.2f us, CPU %.2f us\n", which ? "launch_store_kv (in probe)" : "empty kernel", host[4], cpu[4]);
    }
  return 0;
}
