// Paged prefill attention, Llama-3.1-8B shape (32 query heads, 8 kv heads,
// head dim 128, bf16, 16-token blocks in random places of the pool):
//  - prompts with no cached prefix: 1 x 4K, 4 x 4K, 1 x 16K;
//  - 50% and 90% of the context cached (8K and 16K contexts);
//  - chunked prefill: one 512-token chunk over 4K..32K contexts.
// Time is GPU time: CUDA events around back-to-back calls on one stream
// (median of 9 samples). FLOPs count the attended (query, key) pairs of the
// causal mask exactly: 4 * head_dim * q_heads * pairs. With --json FILE
// writes one JSON object per row for bench/torch_prefill.py, which times
// PyTorch's SDPA on the same shapes in the same session.
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>

#include "bench_common.cuh"
#include "cuda/prefill_plan.h"
#ifdef KVC_BENCH_FLASHINFER
#include "flashinfer/fi_peer.h"
#endif

namespace {

struct Row {
  const char* kind;
  uint32_t batch;
  uint32_t q_len;
  uint32_t kv_len;
};

}  // namespace

int main(int argc, char** argv) {
  const char* json_path = nullptr;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--json") == 0) json_path = argv[i + 1];
  FILE* json = json_path ? std::fopen(json_path, "w") : nullptr;

  cudaStream_t stream;
  BENCH_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const uint32_t Hq = 32, Hkv = 8, D = 128, T = 16;
  const Row rows[] = {
      {"no prefix", 1, 4096, 4096},     {"no prefix", 4, 4096, 4096},
      {"no prefix", 1, 16384, 16384},   {"50% cached", 1, 4096, 8192},
      {"90% cached", 1, 832, 8192},     {"50% cached", 1, 8192, 16384},
      {"90% cached", 1, 1664, 16384},   {"chunk 512", 1, 512, 4096},
      {"chunk 512", 1, 512, 8192},      {"chunk 512", 1, 512, 16384},
      {"chunk 512", 1, 512, 32768},     {"chunk 512", 4, 512, 32768},
  };
  uint64_t max_tokens = 0;
  for (const Row& r : rows) max_tokens = std::max<uint64_t>(max_tokens, uint64_t(r.batch) * r.kv_len);
  kvc_cache_t* cache = make_llama_cache(KVC_LAYOUT_NHD, max_tokens + 4096);
  kvc_pool_desc_t pool = KVC_POOL_DESC_INIT;
  BENCH_KVC(kvc_cache_describe_pool(cache, 0, &pool));
  fill_bf16(pool.base, pool.bytes / 2, 5);
  std::mt19937_64 rng(7);
  std::vector<int32_t> blocks(pool.num_blocks);
  std::iota(blocks.begin(), blocks.end(), 0);
  std::shuffle(blocks.begin(), blocks.end(), rng);

  uint64_t max_q = 0;
  for (const Row& r : rows) max_q = std::max<uint64_t>(max_q, uint64_t(r.batch) * r.q_len);
  void *query, *out;
  BENCH_CUDA(cudaMalloc(&query, max_q * Hq * D * 2));
  BENCH_CUDA(cudaMalloc(&out, max_q * Hq * D * 2));
  fill_bf16(query, max_q * Hq * D, 9);

  std::printf("device: %s; bf16, %u q / %u kv heads, dim %u, %u-token blocks, NHD\n", device_name(),
              Hq, Hkv, D, T);
  std::printf("time: GPU time, CUDA events around back-to-back calls, median of 9 samples\n");
  std::printf("%-11s %5s %6s %7s %10s %9s %7s\n", "case", "batch", "q_len", "kv_len", "us",
              "TFLOP/s", "ws MB");
  // config 0 = the library's choice; the sweep after the table times the
  // other thread block configurations of bf16 head dim 128 on a few rows.
  auto run_row = [&](const Row& r, int config, bool print) -> double {
    const uint32_t stride = (r.kv_len + T - 1) / T;
    std::vector<int32_t> table(size_t(r.batch) * stride);
    std::copy(blocks.begin(), blocks.begin() + table.size(), table.begin());
    std::vector<int32_t> qo(r.batch + 1), lens(r.batch, int32_t(r.kv_len));
    for (uint32_t b = 0; b <= r.batch; ++b) qo[b] = int32_t(b * r.q_len);
    void *dtable, *ws = nullptr;
    BENCH_CUDA(cudaMalloc(&dtable, table.size() * 4));
    BENCH_CUDA(cudaMemcpy(dtable, table.data(), table.size() * 4, cudaMemcpyHostToDevice));
    kvc_prefill_args_t a = KVC_PREFILL_ARGS_INIT;
    a.batch = r.batch;
    a.total_q = r.batch * r.q_len;
    a.q_heads = Hq;
    a.q_dtype = KVC_DTYPE_BF16;
    a.query = query;
    a.out = out;
    a.qo_indptr = qo.data();
    a.kv_lens = lens.data();
    a.block_table = static_cast<const int32_t*>(dtable);
    a.table_stride = stride;
    a.max_kv_len = r.kv_len;
    uint64_t ws_bytes = 0;
    BENCH_KVC(kvc_prefill_workspace_size(cache, &a, &ws_bytes));
    if (ws_bytes) BENCH_CUDA(cudaMalloc(&ws, ws_bytes));
    a.workspace = ws;
    a.workspace_bytes = ws_bytes;
    const uint64_t prefix = r.kv_len - r.q_len;
    const double pairs = double(r.batch) * (double(r.q_len) * prefix + double(r.q_len) * (r.q_len + 1) / 2);
    const double flops = 4.0 * D * Hq * pairs;
    const int reps = std::max(3, std::min(50, int(2e12 / flops)));
    kvc::set_prefill_config_override(config);
    const double us = time_us(stream, reps, 9, [&] { BENCH_KVC(kvc_prefill_attention(cache, &a, stream)); });
    kvc::set_prefill_config_override(0);
    kvc_status_t async = KVC_OK;
    BENCH_KVC(kvc_cache_get_async_error(cache, stream, &async));
    if (async != KVC_OK) {
      std::fprintf(stderr, "prefill reported: %s\n", kvc_last_error_message());
      std::exit(1);
    }
    const double tflops = flops / us / 1e6;
    // FlashInfer's paged prefill on the same pool and blocks (printed rows).
    double fi_us = -1, fi_diff = -1;
#ifdef KVC_BENCH_FLASHINFER
    if (print) {
      std::vector<int32_t> kv_indptr(r.batch + 1), last(r.batch);
      for (uint32_t b = 0; b <= r.batch; ++b) kv_indptr[b] = int32_t(b * stride);
      for (uint32_t b = 0; b < r.batch; ++b) last[b] = int32_t(r.kv_len - (stride - 1) * T);
      int32_t *dqo, *dindptr, *dlast;
      void* fi_out;
      BENCH_CUDA(cudaMalloc(&dqo, qo.size() * 4));
      BENCH_CUDA(cudaMalloc(&dindptr, kv_indptr.size() * 4));
      BENCH_CUDA(cudaMalloc(&dlast, last.size() * 4));
      BENCH_CUDA(cudaMalloc(&fi_out, size_t(r.batch) * r.q_len * Hq * D * 2));
      BENCH_CUDA(cudaMemcpy(dqo, qo.data(), qo.size() * 4, cudaMemcpyHostToDevice));
      BENCH_CUDA(cudaMemcpy(dindptr, kv_indptr.data(), kv_indptr.size() * 4, cudaMemcpyHostToDevice));
      BENCH_CUDA(cudaMemcpy(dlast, last.data(), last.size() * 4, cudaMemcpyHostToDevice));
      kvc_layer_view_t view = KVC_LAYER_VIEW_INIT;
      BENCH_KVC(kvc_cache_layer_view(cache, 0, &view));
      fi_peer::PagedKv kv{view.base, static_cast<char*>(view.base) + view.kv_stride,
                          int64_t(view.block_stride / 2), int64_t(view.token_stride / 2),
                          int64_t(view.head_stride / 2), Hkv, T, D, false};
      fi_peer::PageTable t{static_cast<const int32_t*>(dtable), dindptr, dlast, kv_indptr.data(), r.batch};
      fi_peer::Prefill* pf = fi_peer::prefill_plan(kv, Hq, qo.data(), t, stream);
      if (pf != nullptr) {
        bool ok = true;
        fi_us = time_us(stream, reps, 9, [&] { ok = ok && fi_peer::prefill_run(pf, query, fi_out, dqo, t, stream); });
        if (!ok) fi_us = -1;
        BENCH_KVC(kvc_prefill_attention(cache, &a, stream));
        BENCH_CUDA(cudaStreamSynchronize(stream));
        const size_t n = size_t(r.batch) * r.q_len * Hq * D;
        std::vector<unsigned short> x(n), y(n);
        BENCH_CUDA(cudaMemcpy(x.data(), out, n * 2, cudaMemcpyDeviceToHost));
        BENCH_CUDA(cudaMemcpy(y.data(), fi_out, n * 2, cudaMemcpyDeviceToHost));
        fi_diff = 0;
        for (size_t i = 0; i < n; ++i) {
          uint32_t ux = uint32_t(x[i]) << 16, uy = uint32_t(y[i]) << 16;
          float fx, fy;
          std::memcpy(&fx, &ux, 4);
          std::memcpy(&fy, &uy, 4);
          const double d = std::fabs(double(fx) - double(fy));
          fi_diff = d == d ? std::max(fi_diff, d) : 1e30;
        }
        fi_peer::prefill_destroy(pf);
      } else {
        std::fprintf(stderr, "flashinfer prefill plan: %s\n", fi_peer::last_error());
      }
      BENCH_CUDA(cudaFree(dqo));
      BENCH_CUDA(cudaFree(dindptr));
      BENCH_CUDA(cudaFree(dlast));
      BENCH_CUDA(cudaFree(fi_out));
    }
#endif
    BENCH_CUDA(cudaFree(dtable));
    if (ws) BENCH_CUDA(cudaFree(ws));
    if (!print) return tflops;
    std::printf("%-11s %5u %6u %7u %10.1f %9.1f %7.1f", r.kind, r.batch, r.q_len, r.kv_len, us,
                tflops, double(ws_bytes) / 1e6);
    if (fi_us > 0) std::printf("  flashinfer %10.1f us (diff %.2g)", fi_us, fi_diff);
    std::printf("\n");
    std::fflush(stdout);
    if (json)
      std::fprintf(json,
                   "{\"bench\":\"prefill\",\"case\":\"%s\",\"batch\":%u,\"q_len\":%u,\"kv_len\":%u,"
                   "\"us\":%.3f,\"flops\":%.0f,\"fi_us\":%.3f,\"fi_diff\":%.4g}\n",
                   r.kind, r.batch, r.q_len, r.kv_len, us, flops, fi_us, fi_diff);
    return tflops;
  };
  for (const Row& r : rows) run_row(r, 0, true);
  std::printf("config sweep (TFLOP/s): 0 = default (the Hopper TMA kernel on compute capability "
              "9.0, else 2), 4 = the Hopper wgmma kernel (cp.async gather, no TMA), 2 = mma.sync kernel "
              "(4 warps x 32 rows, masked and lean tile loops), 1 = mma.sync, 4 warps, one loop, "
              "3 = mma.sync, 8 warps x 16 rows\n");
  for (const Row& r : {rows[0], rows[2], rows[5], rows[10]}) {
    std::printf("%-11s %5u %6u %7u", r.kind, r.batch, r.q_len, r.kv_len);
    for (int config : {0, 4, 2, 1, 3}) std::printf("  %d: %6.1f", config, run_row(r, config, false));
    std::printf("\n");
  }
  BENCH_CUDA(cudaFree(query));
  BENCH_CUDA(cudaFree(out));
  kvc_cache_destroy(cache);
  if (json) std::fclose(json);
  return 0;
}
