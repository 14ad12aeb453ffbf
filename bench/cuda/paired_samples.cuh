// Paired timing of two calls on one GPU (bench_stateful part 3): samples
// of both taken alternately, each as GPU time (calls captured in a CUDA
// graph, replayed) or per host call (issued one at a time, with the host's
// issue time), so that a slow stretch of the machine lands on both sides of
// a pair; a point is the median of its pairs' ratios, with their spread.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "bench_common.cuh"

struct Sample {
  double us = 0;        // per call
  double issue_us = 0;  // host time to issue one call (host-issued samples)
};

// `calls` calls issued from the host, timed with events.
inline Sample host_sample(cudaStream_t stream, uint32_t calls, const std::function<void()>& call) {
  cudaEvent_t a, b;
  BENCH_CUDA(cudaEventCreate(&a));
  BENCH_CUDA(cudaEventCreate(&b));
  BENCH_CUDA(cudaEventRecord(a, stream));
  const auto h0 = std::chrono::steady_clock::now();
  for (uint32_t r = 0; r < calls; ++r) call();
  const auto h1 = std::chrono::steady_clock::now();
  BENCH_CUDA(cudaEventRecord(b, stream));
  BENCH_CUDA(cudaEventSynchronize(b));
  float ms = 0;
  BENCH_CUDA(cudaEventElapsedTime(&ms, a, b));
  BENCH_CUDA(cudaEventDestroy(a));
  BENCH_CUDA(cudaEventDestroy(b));
  Sample out;
  out.us = 1000.0 * ms / calls;
  out.issue_us = std::chrono::duration<double, std::micro>(h1 - h0).count() / calls;
  return out;
}

// A graph of `calls` calls; nullptr when a call fails or the driver refuses
// the capture.
inline cudaGraphExec_t capture_calls(cudaStream_t stream, uint32_t calls, const std::function<bool()>& call) {
  BENCH_CUDA(cudaStreamSynchronize(stream));
  cudaGraph_t graph = nullptr;
  BENCH_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  bool ok = true;
  for (uint32_t i = 0; i < calls && ok; ++i) ok = call();
  const cudaError_t end = cudaStreamEndCapture(stream, &graph);
  cudaGraphExec_t exec = nullptr;
  if (ok && end == cudaSuccess && graph != nullptr &&
      cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess)
    exec = nullptr;
  if (graph != nullptr) cudaGraphDestroy(graph);
  (void)cudaGetLastError();
  return exec;
}

inline double graph_sample(cudaStream_t stream, uint32_t calls, cudaGraphExec_t exec) {
  cudaEvent_t a, b;
  BENCH_CUDA(cudaEventCreate(&a));
  BENCH_CUDA(cudaEventCreate(&b));
  BENCH_CUDA(cudaEventRecord(a, stream));
  BENCH_CUDA(cudaGraphLaunch(exec, stream));
  BENCH_CUDA(cudaEventRecord(b, stream));
  BENCH_CUDA(cudaEventSynchronize(b));
  float ms = 0;
  BENCH_CUDA(cudaEventElapsedTime(&ms, a, b));
  BENCH_CUDA(cudaEventDestroy(a));
  BENCH_CUDA(cudaEventDestroy(b));
  return 1000.0 * ms / calls;
}

inline double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Samples of one way of timing a point: per call times of both sides and
// the pairs' ratios (paged / indirect), all rounds together.
struct Series {
  std::vector<double> indirect, paged, ratio, round_medians, issue_indirect, issue_paged;
  size_t round_start = 0;
  void add(const Sample& i, const Sample& p) {
    indirect.push_back(i.us);
    paged.push_back(p.us);
    ratio.push_back(p.us / i.us);
    issue_indirect.push_back(i.issue_us);
    issue_paged.push_back(p.issue_us);
  }
  void end_round() {
    round_medians.push_back(
        median_of(std::vector<double>(ratio.begin() + int64_t(round_start), ratio.end())));
    round_start = ratio.size();
  }
  // | indirect us | paged us | ratio | min-max | rounds |
  std::string cells() const {
    std::string rounds;
    for (double m : round_medians) {
      char b[16];
      std::snprintf(b, sizeof b, "%s%.2f", rounds.empty() ? "" : " / ", m);
      rounds += b;
    }
    char buf[256];
    std::snprintf(buf, sizeof buf, "%.1f | %.1f | %.2fx | %.2f-%.2f | %s", median_of(indirect),
                  median_of(paged), median_of(ratio), *std::min_element(ratio.begin(), ratio.end()),
                  *std::max_element(ratio.begin(), ratio.end()), rounds.c_str());
    return buf;
  }
};
