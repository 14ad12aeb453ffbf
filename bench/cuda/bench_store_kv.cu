// store_kv on the Llama-3.1-8B shape (8 kv heads, head dim 128, bf16,
// 16-token blocks) against, in the same run:
//  - the same bytes copied: two cudaMemcpyAsync (K, V) and one vectorized
//    copy kernel (both sources to one buffer), the faster being the limit;
//  - a fused reshape-and-cache kernel written here from vLLM's published
//    algorithm (reshape_and_cache_flash in vLLM's csrc/cache_kernels.cu:
//    one thread block per token, min(heads * head_dim, 512) threads copying
//    K then V in 16-byte vectors; per-head warps for HND). Not vLLM's
//    source: a re-implementation of its algorithm, bf16 only.
// Each is timed as GPU time, cold (calls in a CUDA graph rotating over
// disjoint sets of sources, slots and destinations, >= 256 MB in all, 5x
// the L2) and warm (50 calls on one set), and per host call (events around
// calls issued one at a time, rotating). Slots are those of a prefill:
// consecutive tokens in randomly placed blocks. --json FILE writes one JSON
// object per row for bench/kernel_report.py (which adds torch index_copy_).
// --tokens "256,4096" and --layout NHD|HND keep those rows only (a quick A/B
// of two builds); KVC_STORE_ITEMS=N and KVC_STORE_THREADS=N force the store
// kernel's items per thread and threads per block
// (kvc::set_store_kv_items_override, set_store_kv_threads_override).
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>

#include "bench_common.cuh"

// cuda/cuda_kernels.h's benchmark hook, declared weak so that this file
// also builds against a library without it (the A/B of an older build).
namespace kvc {
[[gnu::weak]] void set_store_kv_items_override(int items);
[[gnu::weak]] void set_store_kv_threads_override(int threads);
}

namespace {

constexpr int kGraphCalls = 50;
constexpr int kSamples = 9;
constexpr double kColdBytes = 256e6;

// vLLM's reshape_and_cache_flash algorithm (see the file comment).
// Strides in elements: block, token (page), head.
__global__ void fused_reshape_and_cache(const uint4* __restrict__ key, const uint4* __restrict__ value,
                                        unsigned short* __restrict__ key_cache,
                                        unsigned short* __restrict__ value_cache,
                                        const int64_t* __restrict__ slot_mapping, int64_t block_stride,
                                        int64_t page_stride, int64_t head_stride, int num_heads,
                                        int head_size, int block_size) {
  const int64_t token = blockIdx.x;
  const int64_t slot = slot_mapping[token];
  if (slot < 0) return;  // padding
  const int64_t block = slot / block_size;
  const int64_t offset = slot % block_size;
  constexpr int kVec = 8;  // bf16 elements per 16 bytes
  const int n_vec = num_heads * head_size / kVec;
  const uint4* k_src = key + token * n_vec;
  const uint4* v_src = value + token * n_vec;
  unsigned short* k_dst = key_cache + block * block_stride + offset * page_stride;
  unsigned short* v_dst = value_cache + block * block_stride + offset * page_stride;
  if (head_stride == head_size) {  // NHD: the token's heads are contiguous
    for (int i = threadIdx.x; i < n_vec; i += blockDim.x) {
      reinterpret_cast<uint4*>(k_dst)[i] = k_src[i];
      reinterpret_cast<uint4*>(v_dst)[i] = v_src[i];
    }
  } else {  // HND: one warp per head
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    const int head_vec = head_size / kVec;
    for (int h = warp; h < num_heads; h += warps) {
      uint4* kd = reinterpret_cast<uint4*>(k_dst + h * head_stride);
      uint4* vd = reinterpret_cast<uint4*>(v_dst + h * head_stride);
      for (int i = lane; i < head_vec; i += 32) {
        kd[i] = k_src[h * head_vec + i];
        vd[i] = v_src[h * head_vec + i];
      }
    }
  }
}

// The same bytes as one contiguous copy: K and V to one destination.
__global__ void copy_kv_kernel(const uint4* __restrict__ k, const uint4* __restrict__ v,
                               uint4* __restrict__ dst, size_t n_each) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < 2 * n_each;
       i += size_t(gridDim.x) * blockDim.x)
    dst[i] = i < n_each ? k[i] : v[i - n_each];
}

}  // namespace

int main(int argc, char** argv) {
  const char* json_path = nullptr;
  std::vector<uint32_t> token_rows = {256u, 1024u, 4096u, 16384u, 65536u};
  std::string only_layout;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--json") == 0) json_path = argv[i + 1];
    if (std::strcmp(argv[i], "--layout") == 0) only_layout = argv[i + 1];
    if (std::strcmp(argv[i], "--tokens") == 0) {
      token_rows.clear();
      for (const char* c = argv[i + 1]; *c != 0;) {
        char* end = nullptr;
        const unsigned long v = std::strtoul(c, &end, 10);
        if (end == c) break;
        if (v > 0 && v <= 65536) token_rows.push_back(uint32_t(v));
        c = *end == ',' ? end + 1 : end;
      }
    }
  }
  if (const char* items = std::getenv("KVC_STORE_ITEMS"); items != nullptr && kvc::set_store_kv_items_override) {
    kvc::set_store_kv_items_override(std::atoi(items));
    std::printf("store items per thread forced: KVC_STORE_ITEMS=%s\n", items);
  }
  if (const char* threads = std::getenv("KVC_STORE_THREADS"); threads != nullptr && kvc::set_store_kv_threads_override) {
    kvc::set_store_kv_threads_override(std::atoi(threads));
    std::printf("store threads per block forced: KVC_STORE_THREADS=%s\n", threads);
  }
  FILE* json = json_path ? std::fopen(json_path, "w") : nullptr;

  cudaStream_t stream;
  BENCH_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const double ceiling = copy_bandwidth_gbs(stream, size_t(1) << 30);
  int sms = 0;
  BENCH_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  std::printf("device: %s; 1 GiB device-to-device copy: %.0f GB/s (read + write)\n", device_name(), ceiling);
  std::printf("cold / warm: GPU us per call, calls in a CUDA graph rotating over `sets` (>= 256 MB) or "
              "on one set; host: one call at a time from the host (rotating)\n");
  std::printf("%-4s %6s %4s | %-26s | %-26s | %-26s | %-26s\n", "lay", "tokens", "sets",
              "store cold/warm/host", "2 memcpy cold/warm/host", "copy kernel cold/warm/host",
              "fused peer cold/warm/host");

  const uint64_t max_tokens = 1u << 17;
  const uint32_t H = 8, D = 128, T = 16;
  for (kvc_layout_t layout : {KVC_LAYOUT_NHD, KVC_LAYOUT_HND}) {
    if (!only_layout.empty() && only_layout != (layout == KVC_LAYOUT_NHD ? "NHD" : "HND")) continue;
    kvc_cache_t* cache = make_llama_cache(layout, max_tokens);
    kvc_pool_desc_t pool = KVC_POOL_DESC_INIT;
    BENCH_KVC(kvc_cache_describe_pool(cache, 0, &pool));
    fill_bf16(pool.base, pool.bytes / 2, 3);
    kvc_layer_view_t view = KVC_LAYER_VIEW_INIT;
    BENCH_KVC(kvc_cache_layer_view(cache, 0, &view));
    std::mt19937_64 rng(42);
    std::vector<int64_t> blocks(pool.num_blocks);
    std::iota(blocks.begin(), blocks.end(), 0);
    std::shuffle(blocks.begin(), blocks.end(), rng);

    for (uint32_t tokens : token_rows) {
      const size_t bytes = size_t(tokens) * H * D * 2;  // K (and V) each
      // Cold: calls rotate over `sets` disjoint sets of sources, slots and
      // copy destinations, >= 256 MB touched in all (5x the L2); warm: set 0.
      const uint32_t sets = uint32_t(std::max<double>(1, std::ceil(kColdBytes / (4.0 * bytes))));
      const int calls = int((std::max<uint32_t>(kGraphCalls, sets) + sets - 1) / sets * sets);
      char *key, *value, *copy_dst;
      int64_t* dslots;
      BENCH_CUDA(cudaMalloc(&key, sets * bytes));
      BENCH_CUDA(cudaMalloc(&value, sets * bytes));
      BENCH_CUDA(cudaMalloc(&copy_dst, sets * 2 * bytes));
      fill_bf16(key, sets * bytes / 2, 11);
      fill_bf16(value, sets * bytes / 2, 13);
      std::vector<int64_t> slots(size_t(sets) * tokens);
      for (size_t i = 0; i < slots.size(); ++i) slots[i] = blocks[i / T] * T + int64_t(i % T);
      BENCH_CUDA(cudaMalloc(&dslots, slots.size() * sizeof(int64_t)));
      BENCH_CUDA(cudaMemcpy(dslots, slots.data(), slots.size() * sizeof(int64_t), cudaMemcpyHostToDevice));

      kvc_store_args_t a = KVC_STORE_ARGS_INIT;
      a.num_tokens = tokens;
      a.src_dtype = KVC_DTYPE_BF16;
      auto store = [&](uint32_t set) {
        a.key = key + set * bytes;
        a.value = value + set * bytes;
        a.slot_mapping = dslots + size_t(set) * tokens;
        BENCH_KVC(kvc_store_kv(cache, &a, stream));
      };
      auto memcpy2 = [&](uint32_t set) {
        char* dst = copy_dst + set * 2 * bytes;
        BENCH_CUDA(cudaMemcpyAsync(dst, key + set * bytes, bytes, cudaMemcpyDeviceToDevice, stream));
        BENCH_CUDA(cudaMemcpyAsync(dst + bytes, value + set * bytes, bytes, cudaMemcpyDeviceToDevice, stream));
      };
      const size_t n_vec = bytes / 16;
      const int copy_blocks = int(std::min<size_t>((2 * n_vec + 511) / 512, size_t(sms) * 8));
      auto copy_kernel = [&](uint32_t set) {
        copy_kv_kernel<<<copy_blocks, 512, 0, stream>>>(reinterpret_cast<const uint4*>(key + set * bytes),
                                                        reinterpret_cast<const uint4*>(value + set * bytes),
                                                        reinterpret_cast<uint4*>(copy_dst + set * 2 * bytes), n_vec);
      };
      const int64_t es = 2;
      const int64_t block_stride = int64_t(view.block_stride) / es, page_stride = int64_t(view.token_stride) / es,
                    head_stride = int64_t(view.head_stride) / es;
      unsigned short* k_cache = static_cast<unsigned short*>(view.base);
      unsigned short* v_cache = reinterpret_cast<unsigned short*>(static_cast<char*>(view.base) + view.kv_stride);
      auto fused = [&](uint32_t set) {
        fused_reshape_and_cache<<<tokens, std::min<uint32_t>(H * D, 512), 0, stream>>>(
            reinterpret_cast<const uint4*>(key + set * bytes), reinterpret_cast<const uint4*>(value + set * bytes),
            k_cache, v_cache, dslots + size_t(set) * tokens, block_stride, page_stride, head_stride, int(H), int(D),
            int(T));
      };
      const int host_calls = std::max<int>(calls, tokens <= 4096 ? 200 : 20);
      struct Times { double cold, warm, host; };
      auto measure = [&](auto&& f) {
        Times t;
        t.cold = gpu_time_us(stream, calls, kSamples, [&](int i) {
          f(uint32_t(i) % sets);
          return true;
        });
        t.warm = gpu_time_us(stream, kGraphCalls, kSamples, [&](int) {
          f(0);
          return true;
        });
        t.host = host_call_us(stream, host_calls, kSamples, [&](int i) { f(uint32_t(i) % sets); });
        BENCH_CUDA(cudaGetLastError());
        return t;
      };
      const Times st = measure(store), mc = measure(memcpy2), ck = measure(copy_kernel);
      // The fused peer last: the rows it leaves in the pool are checked
      // against the source (it writes the cells kvcache's store writes).
      const Times fu = measure(fused);
      kvc_status_t async = KVC_OK;
      BENCH_KVC(kvc_cache_get_async_error(cache, stream, &async));
      if (async != KVC_OK) {
        std::fprintf(stderr, "store reported: %s\n", kvc_last_error_message());
        return 1;
      }
      // Set 0's first and last tokens' K and V rows, every head (the last
      // call of the host timing wrote set (host_calls - 1) % sets, so store
      // set 0 with the peer once more).
      fused(0);
      BENCH_CUDA(cudaStreamSynchronize(stream));
      bool same = true;
      for (uint32_t t : {0u, tokens - 1}) {
        const uint64_t slot = uint64_t(slots[t]);
        for (uint32_t kv = 0; kv < 2; ++kv)
          for (uint32_t h = 0; h < H; ++h) {
            const char* cell = static_cast<const char*>(view.base) + (slot / T) * view.block_stride +
                               kv * view.kv_stride + (slot % T) * view.token_stride + h * view.head_stride;
            std::vector<char> peer_row(D * 2), src_row(D * 2);
            BENCH_CUDA(cudaMemcpy(peer_row.data(), cell, D * 2, cudaMemcpyDeviceToHost));
            BENCH_CUDA(cudaMemcpy(src_row.data(), (kv ? value : key) + (size_t(t) * H + h) * D * 2, D * 2,
                                  cudaMemcpyDeviceToHost));
            same = same && std::memcmp(peer_row.data(), src_row.data(), D * 2) == 0;
          }
      }
      const double moved = 4.0 * double(bytes);  // K and V, read and written
      const char* lname = layout == KVC_LAYOUT_NHD ? "NHD" : "HND";
      std::printf("%-4s %6u %4u | %8.2f %8.2f %8.2f | %8.2f %8.2f %8.2f | %8.2f %8.2f %8.2f | %8.2f %8.2f %8.2f %s\n",
                  lname, tokens, sets, st.cold, st.warm, st.host, mc.cold, mc.warm, mc.host, ck.cold, ck.warm,
                  ck.host, fu.cold, fu.warm, fu.host, same ? "" : "PEER WROTE OTHER BYTES");
      std::fflush(stdout);
      if (json)
        std::fprintf(json,
                     "{\"bench\":\"store\",\"layout\":\"%s\",\"tokens\":%u,\"sets\":%u,\"bytes\":%.0f,"
                     "\"store_gpu_us\":%.3f,\"store_warm_us\":%.3f,\"store_host_us\":%.3f,"
                     "\"memcpy_gpu_us\":%.3f,\"memcpy_warm_us\":%.3f,\"memcpy_host_us\":%.3f,"
                     "\"copy_kernel_gpu_us\":%.3f,\"copy_kernel_warm_us\":%.3f,\"copy_kernel_host_us\":%.3f,"
                     "\"fused_gpu_us\":%.3f,\"fused_warm_us\":%.3f,\"fused_host_us\":%.3f,"
                     "\"fused_same_bytes\":%s,\"ceiling_gbs\":%.1f,\"timing\":\"%c\"}\n",
                     lname, tokens, sets, moved, st.cold, st.warm, st.host, mc.cold, mc.warm, mc.host, ck.cold,
                     ck.warm, ck.host, fu.cold, fu.warm, fu.host, same ? "true" : "false", ceiling, g_last_timing);
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
