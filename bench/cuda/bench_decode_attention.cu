// Paged decode attention, Llama-3.1-8B shape (32 query heads, 8 kv heads,
// head dim 128, bf16, 16-token blocks in random places), batch 1..64 and
// context 4K..32K. Reports time per call and KV bytes read per second
// against a device-to-device copy measured in the same run (bytes read +
// written). With --json FILE writes one JSON object per row for
// bench/torch_kernels.py, which times PyTorch's SDPA on the same shapes.
#include <cstring>
#include <numeric>
#include <string>

#include "bench_common.cuh"
#include "cuda/decode_split.h"

int main(int argc, char** argv) {
  const char* json_path = nullptr;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--json") == 0) json_path = argv[i + 1];
  FILE* json = json_path ? std::fopen(json_path, "w") : nullptr;

  cudaStream_t stream;
  BENCH_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const double ceiling = copy_bandwidth_gbs(stream, size_t(1) << 30);
  std::printf("device: %s; 1 GiB device-to-device copy: %.0f GB/s (read + write)\n", device_name(), ceiling);
  std::printf("%-6s %6s %7s %10s %10s %8s %7s\n", "layout", "batch", "context", "us", "KV GB/s",
              "vs copy", "ws MB");

  const uint32_t Hq = 32, Hkv = 8, D = 128, T = 16;
  const uint32_t batches[] = {1, 8, 16, 32, 64};
  const uint32_t contexts[] = {4096, 8192, 16384, 32768};
  const uint64_t max_tokens = uint64_t(64) * 32768 + 4096;
  for (kvc_layout_t layout : {KVC_LAYOUT_NHD, KVC_LAYOUT_HND}) {
    kvc_cache_t* cache = make_llama_cache(layout, max_tokens);
    kvc_pool_desc_t pool = KVC_POOL_DESC_INIT;
    BENCH_KVC(kvc_cache_describe_pool(cache, 0, &pool));
    fill_bf16(pool.base, pool.bytes / 2, 5);
    std::mt19937_64 rng(7);
    std::vector<int32_t> blocks(pool.num_blocks);
    std::iota(blocks.begin(), blocks.end(), 0);
    std::shuffle(blocks.begin(), blocks.end(), rng);

    void *query, *out;
    BENCH_CUDA(cudaMalloc(&query, size_t(64) * Hq * D * 2));
    BENCH_CUDA(cudaMalloc(&out, size_t(64) * Hq * D * 2));
    fill_bf16(query, size_t(64) * Hq * D, 9);
    for (uint32_t batch : batches) {
      for (uint32_t ctx : contexts) {
        const uint32_t stride = ctx / T;
        std::vector<int32_t> table(size_t(batch) * stride), lens(batch, int32_t(ctx));
        std::copy(blocks.begin(), blocks.begin() + table.size(), table.begin());
        void *dtable, *dlens, *ws = nullptr;
        BENCH_CUDA(cudaMalloc(&dtable, table.size() * 4));
        BENCH_CUDA(cudaMalloc(&dlens, lens.size() * 4));
        BENCH_CUDA(cudaMemcpy(dtable, table.data(), table.size() * 4, cudaMemcpyHostToDevice));
        BENCH_CUDA(cudaMemcpy(dlens, lens.data(), lens.size() * 4, cudaMemcpyHostToDevice));
        kvc_decode_args_t a = KVC_DECODE_ARGS_INIT;
        a.batch = batch;
        a.q_heads = Hq;
        a.q_dtype = KVC_DTYPE_BF16;
        a.query = query;
        a.out = out;
        a.seq_lens = static_cast<const int32_t*>(dlens);
        a.block_table = static_cast<const int32_t*>(dtable);
        a.table_stride = stride;
        a.max_seq_len = ctx;
        uint64_t ws_bytes = 0;
        BENCH_KVC(kvc_decode_workspace_size(cache, &a, &ws_bytes));
        if (ws_bytes) BENCH_CUDA(cudaMalloc(&ws, ws_bytes));
        a.workspace = ws;
        a.workspace_bytes = ws_bytes;
        const double kv_bytes = double(batch) * ctx * Hkv * D * 2 * 2;
        const int reps = std::max(3, int(2e8 / kv_bytes * 10));
        const double us = time_us(stream, std::min(reps, 100), 9,
                                  [&] { BENCH_KVC(kvc_decode_attention(cache, &a, stream)); });
        kvc_status_t async = KVC_OK;
        BENCH_KVC(kvc_cache_get_async_error(cache, stream, &async));
        if (async != KVC_OK) {
          std::fprintf(stderr, "decode reported: %s\n", kvc_last_error_message());
          return 1;
        }
        const double gbs = kv_bytes / us / 1e3;
        const char* lname = layout == KVC_LAYOUT_NHD ? "NHD" : "HND";
        std::printf("%-6s %6u %7u %10.1f %10.0f %7.0f%% %7.1f\n", lname, batch, ctx, us, gbs,
                    100.0 * gbs / ceiling, double(ws_bytes) / 1e6);
        if (json)
          std::fprintf(json,
                       "{\"bench\":\"decode\",\"layout\":\"%s\",\"batch\":%u,\"context\":%u,"
                       "\"us\":%.3f,\"kv_bytes\":%.0f,\"ceiling_gbs\":%.1f}\n",
                       lname, batch, ctx, us, kv_bytes, ceiling);
        BENCH_CUDA(cudaFree(dtable));
        BENCH_CUDA(cudaFree(dlens));
        if (ws) BENCH_CUDA(cudaFree(ws));
      }
    }
    if (layout == KVC_LAYOUT_NHD) {
      // How the split count moves batch-1 long-context time (the planner's
      // choice is the row above with the same shape).
      std::printf("split sweep, NHD batch 1:\n%8s %8s %10s\n", "context", "splits", "us");
      for (uint32_t ctx : {8192u, 32768u}) {
        std::vector<int32_t> table(ctx / T), lens(1, int32_t(ctx));
        std::copy(blocks.begin(), blocks.begin() + table.size(), table.begin());
        void *dtable, *dlens, *ws = nullptr;
        BENCH_CUDA(cudaMalloc(&dtable, table.size() * 4));
        BENCH_CUDA(cudaMalloc(&dlens, 4));
        BENCH_CUDA(cudaMemcpy(dtable, table.data(), table.size() * 4, cudaMemcpyHostToDevice));
        BENCH_CUDA(cudaMemcpy(dlens, lens.data(), 4, cudaMemcpyHostToDevice));
        kvc_decode_args_t a = KVC_DECODE_ARGS_INIT;
        a.batch = 1;
        a.q_heads = Hq;
        a.q_dtype = KVC_DTYPE_BF16;
        a.query = query;
        a.out = out;
        a.seq_lens = static_cast<const int32_t*>(dlens);
        a.block_table = static_cast<const int32_t*>(dtable);
        a.table_stride = ctx / T;
        a.max_seq_len = ctx;
        uint64_t ws_bytes = 0;
        BENCH_KVC(kvc_decode_workspace_size(cache, &a, &ws_bytes));
        BENCH_CUDA(cudaMalloc(&ws, ws_bytes));
        a.workspace = ws;
        a.workspace_bytes = ws_bytes;
        for (uint32_t splits : {8u, 16u, 24u, 32u, 48u, 64u, 96u, 128u}) {
          kvc::set_decode_split_override(splits);
          const double us = time_us(stream, 50, 9, [&] { BENCH_KVC(kvc_decode_attention(cache, &a, stream)); });
          std::printf("%8u %8u %10.1f\n", ctx, splits, us);
        }
        kvc::set_decode_split_override(0);
        BENCH_CUDA(cudaFree(dtable));
        BENCH_CUDA(cudaFree(dlens));
        BENCH_CUDA(cudaFree(ws));
      }
    }
    BENCH_CUDA(cudaFree(query));
    BENCH_CUDA(cudaFree(out));
    kvc_cache_destroy(cache);
  }
  if (json) std::fclose(json);
  return 0;
}
