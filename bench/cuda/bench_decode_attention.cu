// Paged decode attention against its limits and, when built with FlashInfer
// (bench/flashinfer/README.md), against FlashInfer's two decode kernels in
// the same run, on the same pool, the same blocks in the same order.
//  - shapes: bf16 KV, query heads / kv heads 32/8, 64/8, 32/32, head dim
//    128, 16-token blocks in random places of the pool; batch 1, 8, 32, 64
//    (32/32: up to 32) x context 4K..32K; fp8-e4m3 KV at 32/8 (kvcache only);
//  - cold: a row rotates its calls over `sets` disjoint sets of blocks, at
//    least 256 MB of KV in all (five times the H100's 50 MB L2), so every
//    call reads KV that the last 256 MB of traffic pushed out of L2;
//    warm: every call reads the same set;
//  - GPU time: a CUDA graph of N calls, replayed (bench_common.cuh); per
//    host call: events around calls issued one at a time (cold sets);
//  - FlashInfer's output is compared with kvcache's (max |difference|);
//  - for the diagnosis, kvcache's own tensor-core kernel
//    (kvc_prefill_attention with one query per sequence) on the bf16 rows.
// Prints one line per row; --json FILE writes one JSON object per row for
// bench/kernel_report.py. --rows "Q/KV/BATCH/CTX[/fp8] ..." times those rows
// only, cold GPU time alone (no warm, host or prefill-kernel columns, no
// peers unless --peers is given: FlashInfer's cold time then too): the
// quick A/B of two builds. KVC_DECODE_SPLITS=N forces the
// number of splits (kvc::set_decode_split_override).
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>

#include "bench_common.cuh"
#include "cuda/cuda_kernels.h"
#include "cuda/decode_split.h"
#ifdef KVC_BENCH_FLASHINFER
#include "flashinfer/fi_peer.h"
#endif

namespace {

constexpr uint32_t kTokensPerBlock = 16, kHeadDim = 128;
constexpr double kColdBytes = 256e6;
constexpr int kSamples = 7;

struct Config {
  uint32_t q_heads;
  uint32_t kv_heads;
  kvc_dtype_t dtype;
  std::vector<uint32_t> batches;
};

double kv_bytes_of(const Config& c, uint32_t batch, uint32_t ctx) {
  const double elem = c.dtype == KVC_DTYPE_FP8_E4M3 ? 1 : 2;
  return double(batch) * ctx * c.kv_heads * kHeadDim * elem * 2;
}

uint32_t sets_of(double kv_bytes) { return uint32_t(std::max(1.0, std::ceil(kColdBytes / kv_bytes))); }

// Calls per graph: every set at least once, about 1 GB of KV in all.
int calls_of(uint32_t sets, double kv_bytes) {
  const int want = int(std::ceil(1e9 / kv_bytes));
  const int calls = std::max<int>(std::max<int>(int(sets), 3), std::min(want, 200));
  return (calls + int(sets) - 1) / int(sets) * int(sets);
}

float bf16_to_f32(unsigned short x) {
  uint32_t u = uint32_t(x) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

double max_abs_diff(const void* a, const void* b, size_t n) {
  std::vector<unsigned short> ha(n), hb(n);
  BENCH_CUDA(cudaMemcpy(ha.data(), a, n * 2, cudaMemcpyDeviceToHost));
  BENCH_CUDA(cudaMemcpy(hb.data(), b, n * 2, cudaMemcpyDeviceToHost));
  double m = 0;
  for (size_t i = 0; i < n; ++i) {
    const double d = std::fabs(double(bf16_to_f32(ha[i])) - double(bf16_to_f32(hb[i])));
    m = std::isnan(d) ? INFINITY : std::max(m, d);
  }
  return m;
}

// A message fit for a JSON string.
std::string json_safe(std::string s) {
  for (char& ch : s)
    if (ch == '"' || ch == '\\' || ch < 32) ch = '\'';
  return s.substr(0, 80);
}

const char* dtype_name(kvc_dtype_t d) { return d == KVC_DTYPE_FP8_E4M3 ? "fp8_e4m3" : "bf16"; }

}  // namespace

int main(int argc, char** argv) {
  const char* json_path = nullptr;
  bool quick = false;  // one context per batch: a smoke run
  // --profile Q/KV/BATCH/CTX[/fp8]: that row only (bf16 unless /fp8),
  // each kernel run twice untimed (for ncu: decode_kernel, BatchDecode...,
  // BatchPrefill..., prefill kernels).
  uint32_t only[4] = {0, 0, 0, 0};
  bool profile = false, profile_fp8 = false;
  // --peers with --rows: FlashInfer's two kernels too (cold time only).
  bool with_peers = false;
  // --rows: the listed rows, cold time only.
  std::vector<std::array<uint32_t, 5>> rows;  // q, kv, batch, ctx, fp8
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--json") == 0 && i + 1 < argc) json_path = argv[++i];
    if (std::strcmp(argv[i], "--quick") == 0) quick = true;
    if (std::strcmp(argv[i], "--peers") == 0) with_peers = true;
    if (std::strcmp(argv[i], "--profile") == 0 && i + 1 < argc)
    {
      profile = std::sscanf(argv[++i], "%u/%u/%u/%u", &only[0], &only[1], &only[2], &only[3]) == 4;
      profile_fp8 = std::strstr(argv[i], "fp8") != nullptr;
    }
    if (std::strcmp(argv[i], "--rows") == 0 && i + 1 < argc) {
      std::string list = argv[++i];
      for (char& ch : list)
        if (ch == ',') ch = ' ';
      size_t pos = 0;
      while (pos < list.size()) {
        const size_t end = std::min(list.find(' ', pos), list.size());
        const std::string item = list.substr(pos, end - pos);
        std::array<uint32_t, 5> r{};
        if (std::sscanf(item.c_str(), "%u/%u/%u/%u", &r[0], &r[1], &r[2], &r[3]) == 4) {
          r[4] = item.find("fp8") != std::string::npos;
          rows.push_back(r);
        }
        pos = end + 1;
      }
    }
  }
  const bool rows_only = !rows.empty();
  auto selected = [&](uint32_t hq, uint32_t hkv, kvc_dtype_t dt, uint32_t b, uint32_t ctx) {
    if (rows_only) {
      for (const auto& r : rows)
        if (hq == r[0] && hkv == r[1] && b == r[2] && ctx == r[3] &&
            (dt == KVC_DTYPE_FP8_E4M3) == (r[4] != 0))
          return true;
      return false;
    }
    const kvc_dtype_t want = profile_fp8 ? KVC_DTYPE_FP8_E4M3 : KVC_DTYPE_BF16;
    return !profile || (hq == only[0] && hkv == only[1] && dt == want && b == only[2] && ctx == only[3]);
  };
  FILE* json = json_path ? std::fopen(json_path, "w") : nullptr;
  // KVC_DECODE_PATH=1 (CUDA cores) or 2 (tensor cores): force one decode
  // kernel (kvc::set_decode_kernel_override), for the comparison of the two.
  if (const char* path = std::getenv("KVC_DECODE_PATH")) {
    kvc::set_decode_kernel_override(std::atoi(path));
    std::printf("decode kernel forced: KVC_DECODE_PATH=%s\n", path);
  }
  if (const char* splits = std::getenv("KVC_DECODE_SPLITS")) {
    kvc::set_decode_split_override(uint32_t(std::atoi(splits)));
    std::printf("decode splits forced: KVC_DECODE_SPLITS=%s\n", splits);
  }

  cudaStream_t stream;
  BENCH_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const double copy_gbs = profile ? 1 : copy_bandwidth_gbs(stream, size_t(1) << 30);
  const double read_gbs = profile ? 1 : read_bandwidth_gbs(stream, size_t(1) << 30);
  std::printf("device: %s; 1 GiB copy %.0f GB/s (read + write), 1 GiB read-only stream %.0f GB/s\n",
              device_name(), copy_gbs, read_gbs);
#ifdef KVC_BENCH_FLASHINFER
  const bool peers = true;
#else
  const bool peers = false;
  std::printf("FlashInfer peers: not built (bench/flashinfer/README.md)\n");
#endif
  std::printf("%-5s %-8s %5s %6s %4s %10s %10s %10s %10s %10s %10s %10s %9s %10s\n", "q/kv", "kv", "batch",
              "ctx", "sets", "cold us", "warm us", "host us", "fi_cc us", "fi_tc us", "fi_cc wm",
              "fi_tc wm", "max diff", "kvc tc us");

  const std::vector<uint32_t> contexts = quick && !rows_only ? std::vector<uint32_t>{8192}
                                                              : std::vector<uint32_t>{4096, 8192, 16384, 32768};
  const std::vector<Config> configs = {
      {32, 8, KVC_DTYPE_BF16, {1, 8, 32, 64}},
      {64, 8, KVC_DTYPE_BF16, {1, 8, 32, 64}},
      {32, 32, KVC_DTYPE_BF16, {1, 8, 32}},
      {32, 8, KVC_DTYPE_FP8_E4M3, {1, 8, 32, 64}},
  };

  const uint32_t max_batch = 64;
  void *query, *out, *peer_out;
  const size_t q_elems = size_t(max_batch) * 64 * kHeadDim;
  BENCH_CUDA(cudaMalloc(&query, q_elems * 2));
  BENCH_CUDA(cudaMalloc(&out, q_elems * 2));
  BENCH_CUDA(cudaMalloc(&peer_out, q_elems * 2));
  fill_bf16(query, q_elems, 9);

  for (const Config& c : configs) {
    // Pool: the largest row, or the cold sets of the smallest.
    uint64_t max_tokens = 0;
    for (uint32_t b : c.batches)
      for (uint32_t ctx : contexts)
        if (selected(c.q_heads, c.kv_heads, c.dtype, b, ctx))
          max_tokens = std::max<uint64_t>(max_tokens, uint64_t(sets_of(kv_bytes_of(c, b, ctx))) * b * ctx);
    if (max_tokens == 0) continue;
    kvc_cache_t* cache = make_cache(c.kv_heads, c.dtype, KVC_LAYOUT_NHD, max_tokens + 4096);
    kvc_pool_desc_t pool = KVC_POOL_DESC_INIT;
    BENCH_KVC(kvc_cache_describe_pool(cache, 0, &pool));
    if (c.dtype == KVC_DTYPE_FP8_E4M3)
      fill_fp8(pool.base, pool.bytes, 5);
    else
      fill_bf16(pool.base, pool.bytes / 2, 5);
    kvc_layer_view_t view = KVC_LAYER_VIEW_INIT;
    BENCH_KVC(kvc_cache_layer_view(cache, 0, &view));
    std::mt19937_64 rng(7);
    std::vector<int32_t> blocks(pool.num_blocks);
    std::iota(blocks.begin(), blocks.end(), 0);
    std::shuffle(blocks.begin(), blocks.end(), rng);

    for (uint32_t batch : c.batches) {
      for (uint32_t ctx : contexts) {
        if (!selected(c.q_heads, c.kv_heads, c.dtype, batch, ctx)) continue;
        const double kv_bytes = kv_bytes_of(c, batch, ctx);
        const uint32_t sets = sets_of(kv_bytes);
        const uint32_t pages = ctx / kTokensPerBlock;
        const size_t per_set = size_t(batch) * pages;
        // One device table per set: the padded kvcache table of stride
        // `pages` is also FlashInfer's CSR indices (every row is full).
        std::vector<int32_t*> tables(sets);
        for (uint32_t s = 0; s < sets; ++s) {
          BENCH_CUDA(cudaMalloc(&tables[s], per_set * 4));
          BENCH_CUDA(cudaMemcpy(tables[s], blocks.data() + s * per_set, per_set * 4,
                                cudaMemcpyHostToDevice));
        }
        std::vector<int32_t> lens(batch, int32_t(ctx)), indptr(batch + 1), last(batch, int32_t(kTokensPerBlock));
        for (uint32_t b = 0; b <= batch; ++b) indptr[b] = int32_t(b * pages);
        int32_t *dlens, *dindptr, *dlast;
        BENCH_CUDA(cudaMalloc(&dlens, batch * 4));
        BENCH_CUDA(cudaMalloc(&dindptr, (batch + 1) * 4));
        BENCH_CUDA(cudaMalloc(&dlast, batch * 4));
        BENCH_CUDA(cudaMemcpy(dlens, lens.data(), batch * 4, cudaMemcpyHostToDevice));
        BENCH_CUDA(cudaMemcpy(dindptr, indptr.data(), (batch + 1) * 4, cudaMemcpyHostToDevice));
        BENCH_CUDA(cudaMemcpy(dlast, last.data(), batch * 4, cudaMemcpyHostToDevice));

        kvc_decode_args_t a = KVC_DECODE_ARGS_INIT;
        a.batch = batch;
        a.q_heads = c.q_heads;
        a.q_dtype = KVC_DTYPE_BF16;
        a.query = query;
        a.out = out;
        a.seq_lens = dlens;
        a.block_table = tables[0];
        a.table_stride = pages;
        a.max_seq_len = ctx;
        uint64_t ws_bytes = 0;
        BENCH_KVC(kvc_decode_workspace_size(cache, &a, &ws_bytes));
        void* ws = nullptr;
        if (ws_bytes) BENCH_CUDA(cudaMalloc(&ws, ws_bytes));
        a.workspace = ws;
        a.workspace_bytes = ws_bytes;
        auto kvc_call = [&](uint32_t set) {
          a.block_table = tables[set];
          BENCH_KVC(kvc_decode_attention(cache, &a, stream));
          return true;
        };
        const int calls = profile ? 2 : calls_of(sets, kv_bytes);
        std::string method;  // how each GPU time was taken: G graph, E events
        auto gpu_or_profile = [&](int n, const std::function<bool(int)>& f) {
          if (!profile) return gpu_time_us(stream, n, kSamples, f);
          for (int i = 0; i < 2; ++i) f(i);
          BENCH_CUDA(cudaStreamSynchronize(stream));
          return -1.0;
        };
        const double cold = gpu_or_profile(calls, [&](int i) { return kvc_call(i % sets); });
        method += g_last_timing;
        const double warm = profile || rows_only ? -1 : gpu_time_us(stream, std::max(calls / int(sets), 3), kSamples,
                                                       [&](int) { return kvc_call(0); });
        // Per host call where launch cost can matter (small rows).
        double host = -1;
        if (kv_bytes <= 600e6 && !profile && !rows_only)
          host = host_call_us(stream, calls, kSamples, [&](int i) { kvc_call(i % sets); });
        kvc_status_t async = KVC_OK;
        BENCH_KVC(kvc_cache_get_async_error(cache, stream, &async));
        if (async != KVC_OK) {
          std::fprintf(stderr, "decode reported: %s\n", kvc_last_error_message());
          return 1;
        }
        // kvcache's output for set 0, the reference of the peers' check.
        kvc_call(0);
        BENCH_CUDA(cudaStreamSynchronize(stream));

        // kvcache's own tensor-core kernel, kvc_prefill_attention, with one
        // query per sequence (as FlashInfer's tensor-core decode runs its
        // prefill kernel): bf16 only.
        double tc_cold = -1, tc_warm = -1, tc_diff = -1;
        if (c.dtype == KVC_DTYPE_BF16 && !rows_only) {
          std::vector<int32_t> qo(batch + 1);
          for (uint32_t b = 0; b <= batch; ++b) qo[b] = int32_t(b);
          kvc_prefill_args_t pa = KVC_PREFILL_ARGS_INIT;
          pa.batch = batch;
          pa.total_q = batch;
          pa.q_heads = c.q_heads;
          pa.q_dtype = KVC_DTYPE_BF16;
          pa.query = query;
          pa.out = peer_out;
          pa.qo_indptr = qo.data();
          pa.kv_lens = lens.data();
          pa.block_table = tables[0];
          pa.table_stride = pages;
          pa.max_kv_len = ctx;
          uint64_t pws = 0;
          BENCH_KVC(kvc_prefill_workspace_size(cache, &pa, &pws));
          void* pw = nullptr;
          if (pws) BENCH_CUDA(cudaMalloc(&pw, pws));
          pa.workspace = pw;
          pa.workspace_bytes = pws;
          auto pf_call = [&](uint32_t set) {
            pa.block_table = tables[set];
            BENCH_KVC(kvc_prefill_attention(cache, &pa, stream));
            return true;
          };
          tc_cold = gpu_or_profile(calls, [&](int i) { return pf_call(i % sets); });
          method += g_last_timing;
          if (!profile)
            tc_warm = gpu_time_us(stream, std::max(calls / int(sets), 3), kSamples, [&](int) { return pf_call(0); });
          BENCH_CUDA(cudaMemset(peer_out, 0xFF, size_t(batch) * c.q_heads * kHeadDim * 2));
          pf_call(0);
          BENCH_CUDA(cudaStreamSynchronize(stream));
          tc_diff = max_abs_diff(out, peer_out, size_t(batch) * c.q_heads * kHeadDim);
          if (pw) BENCH_CUDA(cudaFree(pw));
        }

        double fi[2][3] = {{-1, -1, -1}, {-1, -1, -1}};  // [cc|tc][cold, warm, host]
        double fi_diff[2] = {-1, -1};
        std::string fi_note[2];
#ifdef KVC_BENCH_FLASHINFER
        if (c.dtype == KVC_DTYPE_BF16 && (!rows_only || with_peers)) {
          fi_peer::PagedKv kv{};
          kv.k_data = view.base;
          kv.v_data = static_cast<char*>(view.base) + view.kv_stride;
          kv.stride_page = int64_t(view.block_stride / view.elem_size);
          kv.stride_n = int64_t(view.token_stride / view.elem_size);
          kv.stride_h = int64_t(view.head_stride / view.elem_size);
          kv.kv_heads = c.kv_heads;
          kv.page_size = kTokensPerBlock;
          kv.head_dim = kHeadDim;
          kv.fp8_e4m3 = false;
          fi_peer::PageTable t{tables[0], dindptr, dlast, indptr.data(), batch};
          for (int k = 0; k < 2; ++k) {
            const auto kind = k == 0 ? fi_peer::DecodeKernel::kCudaCore : fi_peer::DecodeKernel::kTensorCore;
            fi_peer::Decode* d = fi_peer::decode_plan(kind, kv, c.q_heads, t, stream);
            if (d == nullptr) {
              fi_note[k] = fi_peer::last_error();
              std::fprintf(stderr, "flashinfer %s plan: %s\n", k ? "tc" : "cc", fi_note[k].c_str());
              continue;
            }
            auto fi_call = [&](uint32_t set) {
              t.indices = tables[set];
              if (fi_peer::decode_run(d, query, peer_out, t, stream)) return true;
              fi_note[k] = fi_peer::last_error();
              std::fprintf(stderr, "flashinfer %s run: %s\n", k ? "tc" : "cc", fi_note[k].c_str());
              return false;
            };
            fi[k][0] = gpu_or_profile(calls, [&](int i) { return fi_call(i % sets); });
            method += g_last_timing;
            if (!profile && !rows_only)
              fi[k][1] = gpu_time_us(stream, std::max(calls / int(sets), 3), kSamples,
                                     [&](int) { return fi_call(0); });
            if (kv_bytes <= 600e6 && fi[k][0] > 0 && !rows_only)
              fi[k][2] = host_call_us(stream, calls, kSamples, [&](int i) { fi_call(i % sets); });
            BENCH_CUDA(cudaMemset(peer_out, 0xFF, size_t(batch) * c.q_heads * kHeadDim * 2));
            if (fi_call(0)) {
              BENCH_CUDA(cudaStreamSynchronize(stream));
              fi_diff[k] = max_abs_diff(out, peer_out, size_t(batch) * c.q_heads * kHeadDim);
            }
            BENCH_CUDA(cudaStreamSynchronize(stream));
            fi_peer::decode_destroy(d);
          }
        }
#endif
        (void)peers;
        const double diff = std::max(fi_diff[0], fi_diff[1]);
        std::printf("%2u/%-2u %-8s %5u %6u %4u %10.1f %10.1f %10.1f %10.1f %10.1f %10.1f %10.1f %9.2g %10.1f\n",
                    c.q_heads, c.kv_heads, dtype_name(c.dtype), batch, ctx, sets, cold, warm, host,
                    fi[0][0], fi[1][0], fi[0][1], fi[1][1], diff, tc_cold);
        std::fflush(stdout);
        if (json)
          std::fprintf(json,
                       "{\"bench\":\"decode\",\"q_heads\":%u,\"kv_heads\":%u,\"dtype\":\"%s\","
                       "\"batch\":%u,\"context\":%u,\"kv_bytes\":%.0f,\"sets\":%u,\"calls\":%d,"
                       "\"cold_us\":%.3f,\"warm_us\":%.3f,\"host_us\":%.3f,"
                       "\"fi_cc_cold_us\":%.3f,\"fi_cc_warm_us\":%.3f,\"fi_cc_host_us\":%.3f,"
                       "\"fi_tc_cold_us\":%.3f,\"fi_tc_warm_us\":%.3f,\"fi_tc_host_us\":%.3f,"
                       "\"fi_cc_diff\":%.4g,\"fi_tc_diff\":%.4g,\"fi_cc_note\":\"%s\","
                       "\"fi_tc_note\":\"%s\",\"timing\":\"%s\",\"kvc_tc_cold_us\":%.3f,\"kvc_tc_warm_us\":%.3f,"
                       "\"kvc_tc_diff\":%.4g,\"copy_gbs\":%.1f,\"read_gbs\":%.1f}\n",
                       c.q_heads, c.kv_heads, dtype_name(c.dtype), batch, ctx, kv_bytes, sets, calls,
                       cold, warm, host, fi[0][0], fi[0][1], fi[0][2], fi[1][0], fi[1][1], fi[1][2],
                       fi_diff[0], fi_diff[1], json_safe(fi_note[0]).c_str(),
                       json_safe(fi_note[1]).c_str(), method.c_str(), tc_cold, tc_warm, tc_diff, copy_gbs, read_gbs);
        for (int32_t* p : tables) BENCH_CUDA(cudaFree(p));
        BENCH_CUDA(cudaFree(dlens));
        BENCH_CUDA(cudaFree(dindptr));
        BENCH_CUDA(cudaFree(dlast));
        if (ws) BENCH_CUDA(cudaFree(ws));
      }
    }
    kvc_cache_destroy(cache);
  }
  BENCH_CUDA(cudaFree(query));
  BENCH_CUDA(cudaFree(out));
  BENCH_CUDA(cudaFree(peer_out));
  if (json) std::fclose(json);
  return 0;
}
