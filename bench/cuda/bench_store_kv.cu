// store_kv on the Llama-3.1-8B shape (8 kv heads, head dim 128, bf16,
// 16-token blocks) against a plain device-to-device copy of the same bytes
// measured in the same run. Slots are those of a prefill: consecutive
// tokens in randomly placed blocks. Prints a table; with --json FILE also
// writes one JSON object per row for bench/torch_kernels.py.
#include <cstring>
#include <numeric>
#include <string>

#include "bench_common.cuh"

int main(int argc, char** argv) {
  const char* json_path = nullptr;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--json") == 0) json_path = argv[i + 1];
  FILE* json = json_path ? std::fopen(json_path, "w") : nullptr;

  cudaStream_t stream;
  BENCH_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const double ceiling = copy_bandwidth_gbs(stream, size_t(1) << 30);
  std::printf("device: %s; 1 GiB device-to-device copy: %.0f GB/s (read + write)\n", device_name(), ceiling);
  std::printf("%-6s %8s %10s %10s %10s %10s %10s %8s %s\n", "layout", "tokens", "store us",
              "graph us", "copy us", "store GB/s", "copy GB/s", "ratio", "target");

  const uint64_t max_tokens = 1u << 17;
  const uint32_t H = 8, D = 128, T = 16;
  for (kvc_layout_t layout : {KVC_LAYOUT_NHD, KVC_LAYOUT_HND}) {
    kvc_cache_t* cache = make_llama_cache(layout, max_tokens);
    kvc_pool_desc_t pool = KVC_POOL_DESC_INIT;
    BENCH_KVC(kvc_cache_describe_pool(cache, 0, &pool));
    fill_bf16(pool.base, pool.bytes / 2, 3);
    std::mt19937_64 rng(42);
    std::vector<int64_t> blocks(pool.num_blocks);
    std::iota(blocks.begin(), blocks.end(), 0);
    std::shuffle(blocks.begin(), blocks.end(), rng);

    for (uint32_t tokens : {256u, 1024u, 4096u, 16384u, 65536u}) {
      const size_t bytes = size_t(tokens) * H * D * 2;  // K (and V) each
      void *key, *value, *copy_dst, *dslots;
      BENCH_CUDA(cudaMalloc(&key, bytes));
      BENCH_CUDA(cudaMalloc(&value, bytes));
      BENCH_CUDA(cudaMalloc(&copy_dst, 2 * bytes));
      fill_bf16(key, bytes / 2, 11);
      fill_bf16(value, bytes / 2, 13);
      std::vector<int64_t> slots(tokens);
      for (uint32_t i = 0; i < tokens; ++i) slots[i] = blocks[i / T] * T + i % T;
      BENCH_CUDA(cudaMalloc(&dslots, tokens * sizeof(int64_t)));
      BENCH_CUDA(cudaMemcpy(dslots, slots.data(), tokens * sizeof(int64_t), cudaMemcpyHostToDevice));

      kvc_store_args_t a = KVC_STORE_ARGS_INIT;
      a.num_tokens = tokens;
      a.src_dtype = KVC_DTYPE_BF16;
      a.key = key;
      a.value = value;
      a.slot_mapping = static_cast<const int64_t*>(dslots);
      const int reps = tokens <= 4096 ? 200 : 20;
      const double store_us = time_us(stream, reps, 15, [&] { BENCH_KVC(kvc_store_kv(cache, &a, stream)); });
      // Small calls are bound by the host's launch rate when issued one by
      // one; 50 of them captured in a CUDA graph show the GPU time per call.
      double graph_us = 0;
      if (tokens <= 4096) {
        constexpr int kCalls = 50;
        cudaGraph_t graph;
        cudaGraphExec_t exec;
        BENCH_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
        for (int i = 0; i < kCalls; ++i) BENCH_KVC(kvc_store_kv(cache, &a, stream));
        BENCH_CUDA(cudaStreamEndCapture(stream, &graph));
        BENCH_CUDA(cudaGraphInstantiate(&exec, graph, 0));
        graph_us = time_us(stream, 4, 15, [&] { BENCH_CUDA(cudaGraphLaunch(exec, stream)); }) / kCalls;
        BENCH_CUDA(cudaGraphExecDestroy(exec));
        BENCH_CUDA(cudaGraphDestroy(graph));
      }
      // The same bytes as one contiguous copy: K and V read, both written.
      const double copy_us = time_us(stream, reps, 15, [&] {
        BENCH_CUDA(cudaMemcpyAsync(copy_dst, key, bytes, cudaMemcpyDeviceToDevice, stream));
        BENCH_CUDA(cudaMemcpyAsync(static_cast<char*>(copy_dst) + bytes, value, bytes,
                                   cudaMemcpyDeviceToDevice, stream));
      });
      kvc_status_t async = KVC_OK;
      BENCH_KVC(kvc_cache_get_async_error(cache, stream, &async));
      if (async != KVC_OK) {
        std::fprintf(stderr, "store reported: %s\n", kvc_last_error_message());
        return 1;
      }
      const double moved = 4.0 * double(bytes);  // K and V, read and written
      const double store_gbs = moved / store_us / 1e3, copy_gbs = moved / copy_us / 1e3;
      std::string target = "-";
      if (tokens >= 4096) target = store_gbs >= 0.85 * copy_gbs ? ">=85% of copy: met" : ">=85% of copy: MISSED";
      if (tokens == 256)
        target = std::string("<=4 us: ") + (store_us <= 4.0 ? "met" : "MISSED") + " per call, " +
                 (graph_us <= 4.0 ? "met" : "MISSED") + " in a graph";
      const char* lname = layout == KVC_LAYOUT_NHD ? "NHD" : "HND";
      std::printf("%-6s %8u %10.2f %10.2f %10.2f %10.0f %10.0f %7.0f%% %s\n", lname, tokens, store_us,
                  graph_us, copy_us, store_gbs, copy_gbs, 100.0 * store_gbs / copy_gbs, target.c_str());
      if (json)
        std::fprintf(json,
                     "{\"bench\":\"store\",\"layout\":\"%s\",\"tokens\":%u,\"store_us\":%.3f,"
                     "\"graph_us\":%.3f,\"copy_us\":%.3f,\"bytes\":%.0f,\"ceiling_gbs\":%.1f}\n",
                     lname, tokens, store_us, graph_us, copy_us, moved, ceiling);
      BENCH_CUDA(cudaFree(key));
      BENCH_CUDA(cudaFree(value));
      BENCH_CUDA(cudaFree(copy_dst));
      BENCH_CUDA(cudaFree(dslots));
    }
    kvc_cache_destroy(cache);
  }
  if (json) std::fclose(json);
  return 0;
}
