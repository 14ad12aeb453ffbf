// Shared pieces of the CUDA kernel benchmarks: error checks, timing, random
// fills, the bandwidth ceilings.
//
// Two kinds of time, labelled apart in every table:
//  - GPU time (gpu_time_us): N calls captured in one CUDA graph, the graph
//    replayed; per call = replay time / N. No host launch cost, so this is
//    what the kernel costs on the GPU;
//  - per host call (time_us / host_call_us): CUDA events around calls issued
//    one at a time from the host, back to back. For small kernels this is
//    the host's launch rate, not the kernel.
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

// Per host call: events around `calls` back-to-back host-issued calls,
// call(i) for i = 0..calls-1 (so a caller can rotate over data sets);
// median of `samples`, in microseconds per call.
inline double host_call_us(cudaStream_t stream, int calls, int samples,
                           const std::function<void(int)>& call) {
  return time_us(stream, 1, samples, [&, i = 0]() mutable {
    for (int c = 0; c < calls; ++c) call(i++ % calls);
  }) / calls;
}

// How the last gpu_time_us() timed: 'G' graph, 'E' events (fallback).
inline char g_last_timing = 'G';

// GPU time: call(0..calls-1) captured in one CUDA graph, replayed `samples`
// times after one warm-up replay; median per call, in microseconds. A call
// returns false to report a failure (the capture is dropped); so does a
// capture the driver refuses. Returns a negative value on failure.
inline double gpu_time_us(cudaStream_t stream, int calls, int samples,
                          const std::function<bool(int)>& call) {
  for (int i = 0; i < std::min(calls, 2); ++i)
    if (!call(i)) return -1;
  BENCH_CUDA(cudaStreamSynchronize(stream));
  cudaGraph_t graph = nullptr;
  BENCH_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  bool ok = true;
  for (int i = 0; i < calls && ok; ++i) ok = call(i);
  const cudaError_t end = cudaStreamEndCapture(stream, &graph);
  (void)cudaGetLastError();
  if (!ok || end != cudaSuccess || graph == nullptr) {
    if (graph) cudaGraphDestroy(graph);
    if (!ok) return -1;
    // The driver refused the capture: events around back-to-back calls
    // (GPU time too once a call outlasts its launch), marked 'E'.
    std::fprintf(stderr, "graph capture failed (%s): timing with events\n", cudaGetErrorString(end));
    BENCH_CUDA(cudaStreamSynchronize(stream));
    g_last_timing = 'E';
    bool good = true;
    const double us = time_us(stream, 1, samples, [&] {
      for (int i = 0; i < calls && good; ++i) good = call(i);
    }) / calls;
    return good ? us : -1;
  }
  g_last_timing = 'G';
  cudaGraphExec_t exec;
  BENCH_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  BENCH_CUDA(cudaGraphLaunch(exec, stream));
  BENCH_CUDA(cudaStreamSynchronize(stream));
  cudaEvent_t a, b;
  BENCH_CUDA(cudaEventCreate(&a));
  BENCH_CUDA(cudaEventCreate(&b));
  std::vector<double> t;
  for (int s = 0; s < samples; ++s) {
    BENCH_CUDA(cudaEventRecord(a, stream));
    BENCH_CUDA(cudaGraphLaunch(exec, stream));
    BENCH_CUDA(cudaEventRecord(b, stream));
    BENCH_CUDA(cudaEventSynchronize(b));
    float ms = 0;
    BENCH_CUDA(cudaEventElapsedTime(&ms, a, b));
    t.push_back(1000.0 * ms / calls);
  }
  BENCH_CUDA(cudaEventDestroy(a));
  BENCH_CUDA(cudaEventDestroy(b));
  BENCH_CUDA(cudaGraphExecDestroy(exec));
  BENCH_CUDA(cudaGraphDestroy(graph));
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

// Random fp8-e4m3 bytes of magnitude below 1 (exponent field <= 6: never
// the NaN pattern).
__global__ void fill_random_fp8(unsigned char* p, size_t n, unsigned long long seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    unsigned long long x = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed;
    x ^= x >> 29;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 32;
    p[i] = (unsigned char)((x & 0x80) | (x % 0x38));
  }
}

inline void fill_fp8(void* p, size_t n, unsigned long long seed) {
  fill_random_fp8<<<1024, 256>>>(static_cast<unsigned char*>(p), n, seed);
  BENCH_CUDA(cudaGetLastError());
  BENCH_CUDA(cudaDeviceSynchronize());
}

// Reads n 16-byte words once each (a reduction nobody can elide): the
// read-only stream decode attention is bound by.
__global__ void read_only_kernel(const uint4* __restrict__ p, size_t n, unsigned* out) {
  unsigned acc = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const uint4 v = __ldcs(p + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9E3779B9u) out[0] = acc;  // practically never: keeps the loads
}

// Read-only bandwidth of a large buffer, bytes read per second.
inline double read_bandwidth_gbs(cudaStream_t stream, size_t bytes) {
  void* a = nullptr;
  unsigned* sink = nullptr;
  BENCH_CUDA(cudaMalloc(&a, bytes));
  BENCH_CUDA(cudaMalloc(&sink, sizeof(unsigned)));
  fill_bf16(a, bytes / 2, 17);
  int sms = 0;
  BENCH_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const double us = time_us(stream, 5, 9, [&] {
    read_only_kernel<<<sms * 8, 512, 0, stream>>>(static_cast<const uint4*>(a), bytes / 16, sink);
  });
  BENCH_CUDA(cudaGetLastError());
  BENCH_CUDA(cudaFree(a));
  BENCH_CUDA(cudaFree(sink));
  return double(bytes) / us / 1e3;
}

inline const char* device_name() {
  static cudaDeviceProp prop;
  BENCH_CUDA(cudaGetDeviceProperties(&prop, 0));
  return prop.name;
}

inline kvc_cache_t* make_cache(uint32_t kv_heads, kvc_dtype_t dtype, kvc_layout_t layout,
                               uint64_t max_tokens, uint32_t num_layers = 1) {
  kvc_config_t* c = nullptr;
  BENCH_KVC(kvc_config_create(&c));
  BENCH_KVC(kvc_config_set_num_layers(c, num_layers));
  BENCH_KVC(kvc_config_set_kv_heads(c, kv_heads));
  BENCH_KVC(kvc_config_set_head_dim(c, 128));
  BENCH_KVC(kvc_config_set_dtype(c, dtype));
  BENCH_KVC(kvc_config_set_layout(c, layout));
  BENCH_KVC(kvc_config_set_tokens_per_block(c, 16));
  BENCH_KVC(kvc_config_set_max_tokens(c, max_tokens));
  BENCH_KVC(kvc_config_set_device(c, KVC_DEVICE_CUDA, 0));
  kvc_cache_t* cache = nullptr;
  BENCH_KVC(kvc_cache_create(c, &cache));
  kvc_config_destroy(c);
  return cache;
}

// Llama-3.1-8B's KV shape: 8 kv heads, head dim 128, bf16, 16-token blocks.
inline kvc_cache_t* make_llama_cache(kvc_layout_t layout, uint64_t max_tokens) {
  return make_cache(8, KVC_DTYPE_BF16, layout, max_tokens);
}
