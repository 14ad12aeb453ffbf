// Standalone probe of the host cost of one kvc_store_kv call on a CUDA
// cache against a bare kernel launch: per host call (events around N calls
// issued back to back) and the issuing thread's CPU time per call.
// Not part of the build; from the repository root, against a built
// library:
//   nvcc -O2 -std=c++17 -arch=sm_90 -Iinclude -Ibuild/cuda/generated/include \
//     bench/cuda/probes/launch_overhead_probe.cu -Lbuild/cuda -l:libkvcache.so.0 -lcuda -o probe
#include <cuda.h>
#include <cuda_runtime.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "kvcache/kvcache.h"

#define CK(x)                                                                        \
  do {                                                                               \
    cudaError_t e_ = (x);                                                            \
    if (e_ != cudaSuccess) {                                                         \
      std::printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)
#define OK(x)                                                                         \
  do {                                                                                \
    if ((x) != KVC_OK) {                                                              \
      std::printf("kvcache error at %s:%d: %s\n", __FILE__, __LINE__, kvc_last_error_message()); \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)

struct Big {
  void* p[8];
  long long s[8];
  int i[16];
};

__global__ void empty_kernel() {}
__global__ void param_kernel(Big b) {
  if (b.i[0] == 12345 && threadIdx.x == 0) b.s[0] = 1;
}

static double cpu_now() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1e6 + t.tv_nsec * 1e-3;
}

template <class F>
static void measure(const char* name, cudaStream_t stream, int calls, F&& f) {
  std::vector<double> host, cpu;
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int rep = 0; rep < 9; ++rep) {
    CK(cudaStreamSynchronize(stream));
    CK(cudaEventRecord(a, stream));
    const double c0 = cpu_now();
    for (int i = 0; i < calls; ++i) f(i);
    const double c1 = cpu_now();
    CK(cudaEventRecord(b, stream));
    CK(cudaEventSynchronize(b));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    host.push_back(ms * 1000.0 / calls);
    cpu.push_back((c1 - c0) / calls);
  }
  std::sort(host.begin(), host.end());
  std::sort(cpu.begin(), cpu.end());
  std::printf("%-40s per host call %6.2f us [%5.2f-%5.2f]  issuing CPU %6.2f us [%5.2f-%5.2f]\n", name,
              host[4], host[0], host[8], cpu[4], cpu[0], cpu[8]);
}

int main() {
  cudaStream_t stream;
  CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const int calls = 2000;
  measure("empty kernel <<<1, 32>>>", stream, calls,
          [&](int) { empty_kernel<<<1, 32, 0, stream>>>(); });
  Big big{};
  measure("kernel <<<128, 256>>>, 256-byte params", stream, calls,
          [&](int) { param_kernel<<<128, 256, 0, stream>>>(big); });
  measure("the same + cudaGetLastError", stream, calls, [&](int) {
    param_kernel<<<128, 256, 0, stream>>>(big);
    (void)cudaGetLastError();
  });
  {
    cudaFunction_t rf = nullptr;
    CK(cudaGetFuncBySymbol(&rf, reinterpret_cast<const void*>(param_kernel)));
    CUfunction fn = reinterpret_cast<CUfunction>(rf);
    void* params[] = {&big};
    measure("the same through cuLaunchKernel (driver)", stream, calls, [&](int) {
      cuLaunchKernel(fn, 128, 1, 1, 256, 1, 1, 0, reinterpret_cast<CUstream>(stream), params, nullptr);
    });
    measure("the same through cudaLaunchKernel", stream, calls, [&](int) {
      (void)cudaLaunchKernel(reinterpret_cast<const void*>(param_kernel), dim3(128), dim3(256), params, 0,
                             stream);
    });
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(128);
    cfg.blockDim = dim3(256);
    cfg.stream = stream;
    measure("the same through cudaLaunchKernelEx", stream, calls,
            [&](int) { (void)cudaLaunchKernelEx(&cfg, param_kernel, big); });
  }
  measure("cudaGetDevice + cudaGetLastError only", stream, calls, [&](int) {
    int d = 0;
    (void)cudaGetDevice(&d);
    (void)cudaGetLastError();
  });

  // kvc_store_kv: 8 kv heads, dim 128, bf16, 16-token blocks, 256 tokens.
  kvc_config_t* c = nullptr;
  OK(kvc_config_create(&c));
  OK(kvc_config_set_num_layers(c, 1));
  OK(kvc_config_set_kv_heads(c, 8));
  OK(kvc_config_set_head_dim(c, 128));
  OK(kvc_config_set_dtype(c, KVC_DTYPE_BF16));
  OK(kvc_config_set_tokens_per_block(c, 16));
  OK(kvc_config_set_max_tokens(c, 1u << 16));
  OK(kvc_config_set_device(c, KVC_DEVICE_CUDA, 0));
  kvc_cache_t* cache = nullptr;
  OK(kvc_cache_create(c, &cache));
  kvc_config_destroy(c);
  const uint32_t tokens = 256;
  const size_t bytes = size_t(tokens) * 8 * 128 * 2;
  void *k = nullptr, *v = nullptr;
  int64_t* slots = nullptr;
  CK(cudaMalloc(&k, bytes));
  CK(cudaMalloc(&v, bytes));
  CK(cudaMalloc(&slots, tokens * sizeof(int64_t)));
  std::vector<int64_t> hs(tokens);
  for (uint32_t i = 0; i < tokens; ++i) hs[i] = i;
  CK(cudaMemcpy(slots, hs.data(), tokens * sizeof(int64_t), cudaMemcpyHostToDevice));
  kvc_store_args_t a = KVC_STORE_ARGS_INIT;
  a.layer = 0;
  a.num_tokens = tokens;
  a.src_dtype = KVC_DTYPE_BF16;
  a.key = k;
  a.value = v;
  a.slot_mapping = slots;
  measure("kvc_store_kv, 256 tokens", stream, calls, [&](int) { OK(kvc_store_kv(cache, &a, stream)); });
  a.num_tokens = 1;
  measure("kvc_store_kv, 1 token", stream, calls, [&](int) { OK(kvc_store_kv(cache, &a, stream)); });
  a.num_tokens = 0;
  measure("kvc_store_kv, 0 tokens (no launch)", stream, calls,
          [&](int) { OK(kvc_store_kv(cache, &a, stream)); });
  kvc_layer_view_t view;
  kvc_layer_view_init(&view);
  measure("kvc_cache_layer_view", stream, calls, [&](int) { OK(kvc_cache_layer_view(cache, 0, &view)); });
  kvc_cache_destroy(cache);
  return 0;
}
