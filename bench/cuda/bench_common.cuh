// Shared pieces of the CUDA kernel benchmarks: error checks, event timing
// (median of samples, each the mean of back-to-back calls), random fills.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <vector>

#include "kvcache/kvcache.h"

#define BENCH_CUDA(call)                                                                  \
  do {                                                                                    \
    cudaError_t e_ = (call);                                                              \
    if (e_ != cudaSuccess) {                                                              \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call,                   \
                   cudaGetErrorString(e_));                                               \
      std::exit(1);                                                                       \
    }                                                                                     \
  } while (0)

#define BENCH_KVC(call)                                                                   \
  do {                                                                                    \
    kvc_status_t s_ = (call);                                                             \
    if (s_ != KVC_OK) {                                                                   \
      std::fprintf(stderr, "%s:%d %s: %s: %s\n", __FILE__, __LINE__, #call,               \
                   kvc_status_string(s_), kvc_last_error_message());                      \
      std::exit(1);                                                                       \
    }                                                                                     \
  } while (0)

// Median over `samples` of the mean time of `reps` back-to-back calls, in
// microseconds, after warm-up calls.
inline double time_us(cudaStream_t stream, int reps, int samples, const std::function<void()>& call) {
  for (int i = 0; i < 3; ++i) call();
  BENCH_CUDA(cudaStreamSynchronize(stream));
  cudaEvent_t a, b;
  BENCH_CUDA(cudaEventCreate(&a));
  BENCH_CUDA(cudaEventCreate(&b));
  std::vector<double> t;
  for (int s = 0; s < samples; ++s) {
    BENCH_CUDA(cudaEventRecord(a, stream));
    for (int r = 0; r < reps; ++r) call();
    BENCH_CUDA(cudaEventRecord(b, stream));
    BENCH_CUDA(cudaEventSynchronize(b));
    float ms = 0;
    BENCH_CUDA(cudaEventElapsedTime(&ms, a, b));
    t.push_back(1000.0 * ms / reps);
  }
  BENCH_CUDA(cudaEventDestroy(a));
  BENCH_CUDA(cudaEventDestroy(b));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Random bf16 values in [-1, 1) (never zeros: they can run faster than data).
__global__ void fill_random_bf16(unsigned short* p, size_t n, unsigned long long seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    unsigned long long x = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed;
    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 29;
    const float f = float(x >> 40) / float(1ull << 24) * 2.0f - 1.0f;
    p[i] = (unsigned short)(__float_as_uint(f) >> 16);
  }
}

inline void fill_bf16(void* p, size_t n, unsigned long long seed) {
  fill_random_bf16<<<1024, 256>>>(static_cast<unsigned short*>(p), n, seed);
  BENCH_CUDA(cudaGetLastError());
  BENCH_CUDA(cudaDeviceSynchronize());
}

// Device-to-device copy bandwidth of a large buffer, bytes read + written
// per second: the ceiling the kernels are measured against.
inline double copy_bandwidth_gbs(cudaStream_t stream, size_t bytes) {
  void *a = nullptr, *b = nullptr;
  BENCH_CUDA(cudaMalloc(&a, bytes));
  BENCH_CUDA(cudaMalloc(&b, bytes));
  fill_bf16(a, bytes / 2, 7);
  const double us = time_us(stream, 5, 9, [&] {
    BENCH_CUDA(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, stream));
  });
  BENCH_CUDA(cudaFree(a));
  BENCH_CUDA(cudaFree(b));
  return 2.0 * double(bytes) / us / 1e3;
}

inline const char* device_name() {
  static cudaDeviceProp prop;
  BENCH_CUDA(cudaGetDeviceProperties(&prop, 0));
  return prop.name;
}

inline kvc_cache_t* make_llama_cache(kvc_layout_t layout, uint64_t max_tokens) {
  kvc_config_t* c = nullptr;
  BENCH_KVC(kvc_config_create(&c));
  BENCH_KVC(kvc_config_set_num_layers(c, 1));
  BENCH_KVC(kvc_config_set_kv_heads(c, 8));
  BENCH_KVC(kvc_config_set_head_dim(c, 128));
  BENCH_KVC(kvc_config_set_dtype(c, KVC_DTYPE_BF16));
  BENCH_KVC(kvc_config_set_layout(c, layout));
  BENCH_KVC(kvc_config_set_tokens_per_block(c, 16));
  BENCH_KVC(kvc_config_set_max_tokens(c, max_tokens));
  BENCH_KVC(kvc_config_set_device(c, KVC_DEVICE_CUDA, 0));
  kvc_cache_t* cache = nullptr;
  BENCH_KVC(kvc_cache_create(c, &cache));
  kvc_config_destroy(c);
  return cache;
}
