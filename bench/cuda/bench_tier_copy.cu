// Host-tier copy throughput: 1000 random blocks offloaded (device -> pinned
// host) and onboarded (back) through the path the cache uses
// (Device::copy_tier: one kernel launch of at most 16 thread blocks per
// batch), against, in the same run, one pinned cudaMemcpyAsync of the same
// total bytes (the limit), one cudaMemcpyAsync per block (the naive way) and
// cudaMemcpyBatchAsync (the driver's batched copy engine path, for
// reference). Then the C API path (api_rows below): an eviction that
// offloads and a hit that onboards, kvc_sequence_add() timed from the call
// to its stream's completion, beside copy_tier and one pinned copy of the
// same blocks. Prints Markdown tables; --json FILE also writes one JSON line
// per row.
//   bench_tier_copy [--json FILE] [--blocks N]
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/device.h"
#include "bench_common.cuh"
#include "cuda/cuda_kernels.h"

namespace {

struct Row {
  uint64_t block_bytes;
  const char* dir;
  double pinned, naive, batch, kvc;  // GB/s
};

double gbs(uint64_t bytes, double us) { return double(bytes) / us / 1e3; }

double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

kvc_cache_stats_t stats_of(kvc_cache_t* cache) {
  kvc_cache_stats_t st = KVC_CACHE_STATS_INIT;
  BENCH_KVC(kvc_cache_get_stats(cache, &st));
  return st;
}

// The C API's host tier on a Llama-3.1-8B cache (32 layers, 8 kv heads, dim
// 128, bf16, 16-token blocks): a primary pool of `positions` + 1 block
// positions and a host tier of twice that. Each round, with fresh prompts
// A and B as long as the pool: A is added, committed and removed (cached);
// B's add evicts A's blocks, which are offloaded; B is dropped uncommitted;
// A's add finds its blocks in the host tier and onboards them. Each add is timed from the call to its stream's completion (wall)
// and by events around it on the stream (GPU time of the copies it
// enqueued); the bytes are the cache's own counters.
void api_rows(kvc::Device& dev, cudaStream_t stream, FILE* jf) {
  const uint32_t kLayers = 32, kTokens = 16, kPositions = 256, kRounds = 5;
  kvc_config_t* c = nullptr;
  BENCH_KVC(kvc_config_create(&c));
  BENCH_KVC(kvc_config_set_num_layers(c, kLayers));
  BENCH_KVC(kvc_config_set_kv_heads(c, 8));
  BENCH_KVC(kvc_config_set_head_dim(c, 128));
  BENCH_KVC(kvc_config_set_dtype(c, KVC_DTYPE_BF16));
  BENCH_KVC(kvc_config_set_tokens_per_block(c, kTokens));
  // One position more than the prompts: an add that onboards takes a fresh
  // block for each host-tier node (the partly matched last block too) and
  // one for the tokens it computes.
  BENCH_KVC(kvc_config_set_max_tokens(c, uint64_t(kPositions + 1) * kTokens));
  BENCH_KVC(kvc_config_set_device(c, KVC_DEVICE_CUDA, 0));
  const uint64_t position_bytes = uint64_t(kLayers) * 2 * kTokens * 8 * 128 * 2;
  BENCH_KVC(kvc_config_set_host_cache_bytes(c, 2 * (kPositions + 1) * position_bytes));
  kvc_cache_t* cache = nullptr;
  BENCH_KVC(kvc_cache_create(c, &cache));
  kvc_config_destroy(c);
  kvc_pool_desc_t pool = KVC_POOL_DESC_INIT;
  BENCH_KVC(kvc_cache_describe_pool(cache, 0, &pool));
  fill_bf16(pool.base, pool.bytes / 2, 21);

  const size_t n = size_t(kPositions) * kTokens;
  std::vector<int32_t> prompt_a(n), prompt_b(n);
  BENCH_CUDA(cudaStreamSynchronize(stream));

  cudaEvent_t e0, e1;
  BENCH_CUDA(cudaEventCreate(&e0));
  BENCH_CUDA(cudaEventCreate(&e1));
  // One add, timed: wall (call to stream completion) and GPU (events).
  auto timed_add = [&](uint64_t id, const std::vector<int32_t>& p, double* wall, double* gpu) {
    BENCH_CUDA(cudaStreamSynchronize(stream));
    const double t0 = now_us();
    BENCH_CUDA(cudaEventRecord(e0, stream));
    BENCH_KVC(kvc_sequence_add(cache, id, p.data(), p.size(), nullptr, stream, nullptr));
    BENCH_CUDA(cudaEventRecord(e1, stream));
    BENCH_CUDA(cudaStreamSynchronize(stream));
    *wall = now_us() - t0;
    float ms = 0;
    BENCH_CUDA(cudaEventElapsedTime(&ms, e0, e1));
    *gpu = 1000.0 * ms;
  };
  std::vector<double> off_wall, off_gpu, on_wall, on_gpu;
  uint64_t off_bytes = 0, on_bytes = 0, off_blocks = 0, on_blocks = 0;
  // Fresh prompts every round, so every timed add copies every block
  // (the host tier may still hold an earlier round's blocks).
  for (uint32_t r = 0; r < kRounds; ++r) {
    std::iota(prompt_a.begin(), prompt_a.end(), int32_t(1000000 + 2 * r * n));
    std::iota(prompt_b.begin(), prompt_b.end(), int32_t(1000000 + (2 * r + 1) * n));
    const uint64_t a_id = 1 + 2 * r, b_id = 2 + 2 * r;
    BENCH_KVC(kvc_sequence_add(cache, a_id, prompt_a.data(), n, nullptr, stream, nullptr));
    BENCH_KVC(kvc_sequence_commit(cache, a_id, n));
    BENCH_KVC(kvc_sequence_remove(cache, a_id));  // A cached in the primary pool
    kvc_cache_stats_t s0 = stats_of(cache);
    double w, g;
    timed_add(b_id, prompt_b, &w, &g);  // B evicts A: offloads
    kvc_cache_stats_t s1 = stats_of(cache);
    off_wall.push_back(w);
    off_gpu.push_back(g);
    off_bytes = s1.offloaded_bytes - s0.offloaded_bytes;
    off_blocks = s1.offloaded_blocks - s0.offloaded_blocks;
    BENCH_KVC(kvc_sequence_remove(cache, b_id));  // uncommitted: freed
    timed_add(a_id, prompt_a, &w, &g);  // A hits the host tier: onboards
    kvc_cache_stats_t s2 = stats_of(cache);
    on_wall.push_back(w);
    on_gpu.push_back(g);
    on_bytes = s2.onboarded_bytes - s1.onboarded_bytes;
    on_blocks = s2.onboarded_blocks - s1.onboarded_blocks;
    BENCH_KVC(kvc_sequence_commit(cache, a_id, n));
    BENCH_KVC(kvc_sequence_remove(cache, a_id));
  }
  kvc_status_t async = KVC_OK;
  BENCH_KVC(kvc_cache_get_async_error(cache, stream, &async));
  if (async != KVC_OK) std::fprintf(stderr, "tier rounds reported: %s\n", kvc_last_error_message());
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };

  // The same number of pool blocks through copy_tier and one pinned copy.
  const uint64_t bb = pool.block_bytes;
  const size_t moved_blocks = size_t(std::max(off_bytes, on_bytes) / bb);
  void* hpool = dev.allocate_host(bb * moved_blocks);
  std::vector<kvc::TierCopy> copies(moved_blocks);
  for (size_t i = 0; i < moved_blocks; ++i) copies[i] = kvc::TierCopy{uint32_t(i), uint32_t(i)};
  double raw[2], pinned[2];
  for (int d = 0; d < 2; ++d) {
    const bool off = d == 0;
    const auto dir = off ? kvc::TierDirection::kOffload : kvc::TierDirection::kOnboard;
    raw[d] = time_us(stream, 3, 7, [&] {
      dev.copy_tier(dir, pool.base, hpool, bb, copies.data(), moved_blocks, stream);
    });
    pinned[d] = time_us(stream, 3, 7, [&] {
      BENCH_CUDA(cudaMemcpyAsync(off ? hpool : pool.base, off ? pool.base : hpool, bb * moved_blocks,
                                 off ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice, stream));
    });
  }
  dev.deallocate_host(hpool);

  std::printf("\n## Host tier through the C API: %u-layer Llama-3.1-8B cache, %u positions of %llu KiB\n\n",
              kLayers, kPositions, (unsigned long long)(position_bytes >> 10));
  std::printf("kvc_sequence_add() that evicts (offloads) or hits the host tier (onboards): wall = call "
              "to its stream's completion, GPU = events around the call on its stream (the copies it "
              "enqueued); median of %u rounds. Beside it, the same number of %llu KiB pool blocks "
              "through Device::copy_tier and one pinned cudaMemcpyAsync (events, GPU time).\n\n",
              kRounds, (unsigned long long)(bb >> 10));
  std::printf("| path | blocks | MiB | add wall us | add GPU us | GB/s (wall) | copy_tier us | pinned 1 copy us | wall %% of pinned |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (int d = 0; d < 2; ++d) {
    const bool off = d == 0;
    const double wall = median(off ? off_wall : on_wall), gpu = median(off ? off_gpu : on_gpu);
    const uint64_t bytes = off ? off_bytes : on_bytes;
    const uint64_t blocks = off ? off_blocks : on_blocks;
    std::printf("| %s | %llu | %.0f | %.0f | %.0f | %.1f | %.0f | %.0f | %.0f%% |\n",
                off ? "evict -> offload (GPU -> host)" : "hit -> onboard (host -> GPU)",
                (unsigned long long)blocks, double(bytes) / (1 << 20), wall, gpu, gbs(bytes, wall), raw[d],
                pinned[d], 100.0 * pinned[d] / wall);
    if (jf)
      std::fprintf(jf,
                   "{\"bench\": \"tier_api\", \"direction\": \"%s\", \"blocks\": %llu, \"bytes\": %llu, "
                   "\"add_wall_us\": %.1f, \"add_gpu_us\": %.1f, \"copy_tier_us\": %.1f, "
                   "\"pinned_us\": %.1f}\n",
                   off ? "offload" : "onboard", (unsigned long long)blocks, (unsigned long long)bytes, wall,
                   gpu, raw[d], pinned[d]);
  }
  BENCH_CUDA(cudaEventDestroy(e0));
  BENCH_CUDA(cudaEventDestroy(e1));
  kvc_cache_destroy(cache);
}

}  // namespace

int main(int argc, char** argv) {
  const char* json = nullptr;
  size_t count = 1000;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--json") == 0 && i + 1 < argc) json = argv[++i];
    else if (std::strcmp(argv[i], "--blocks") == 0 && i + 1 < argc) count = std::stoul(argv[++i]);
  }
  const size_t pool_blocks = 2 * count;
  std::unique_ptr<kvc::Device> dev = kvc::create_device(KVC_DEVICE_CUDA, 0);
  cudaStream_t stream;
  BENCH_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::mt19937 rng(20261122);
  std::vector<Row> rows;

  for (uint64_t bb : {16ull << 10, 32ull << 10, 256ull << 10, 1ull << 20}) {
    void* dpool = dev->allocate(bb * pool_blocks);
    void* hpool = dev->allocate_host(bb * pool_blocks);
    fill_bf16(dpool, bb * pool_blocks / 2, bb);
    std::memset(hpool, 0x3C, bb * pool_blocks);
    // 1000 random distinct blocks on each side.
    std::vector<uint32_t> a(pool_blocks), b(pool_blocks);
    std::iota(a.begin(), a.end(), 0u);
    std::iota(b.begin(), b.end(), 0u);
    std::shuffle(a.begin(), a.end(), rng);
    std::shuffle(b.begin(), b.end(), rng);
    std::vector<kvc::TierCopy> copies(count);
    for (size_t i = 0; i < count; ++i) copies[i] = kvc::TierCopy{a[i], b[i]};
    const uint64_t total = bb * count;
    const int reps = total >= (256ull << 20) ? 2 : 5;

    for (int d = 0; d < 2; ++d) {
      const bool off = d == 0;
      auto* dbase = static_cast<unsigned char*>(dpool);
      auto* hbase = static_cast<unsigned char*>(hpool);
      Row r{bb, off ? "offload (GPU -> host)" : "onboard (host -> GPU)", 0, 0, 0, 0};
      const cudaMemcpyKind kind = off ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice;
      r.pinned = gbs(total, time_us(stream, reps, 7, [&] {
                       BENCH_CUDA(cudaMemcpyAsync(off ? (void*)hbase : (void*)dbase,
                                                  off ? (void*)dbase : (void*)hbase, total, kind,
                                                  stream));
                     }));
      std::vector<void*> dsts(count);
      std::vector<const void*> srcs(count);
      std::vector<size_t> sizes(count, bb);
      for (size_t i = 0; i < count; ++i) {
        unsigned char* dp = dbase + uint64_t(copies[i].device_block) * bb;
        unsigned char* hp = hbase + uint64_t(copies[i].host_block) * bb;
        dsts[i] = off ? (void*)hp : (void*)dp;
        srcs[i] = off ? (const void*)dp : (const void*)hp;
      }
      r.naive = gbs(total, time_us(stream, reps, 7, [&] {
                      for (size_t i = 0; i < count; ++i)
                        BENCH_CUDA(cudaMemcpyAsync(dsts[i], srcs[i], bb, kind, stream));
                    }));
      cudaMemcpyAttributes attr{};
      attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
      attr.flags = cudaMemcpyFlagPreferOverlapWithCompute;
      size_t attr_idx = 0;
      r.batch = gbs(total, time_us(stream, reps, 7, [&] {
                      BENCH_CUDA(cudaMemcpyBatchAsync(dsts.data(), srcs.data(), sizes.data(), count,
                                                      &attr, &attr_idx, 1, stream));
                    }));
      const kvc::TierDirection dir = off ? kvc::TierDirection::kOffload : kvc::TierDirection::kOnboard;
      r.kvc = gbs(total, time_us(stream, reps, 7, [&] {
                    dev->copy_tier(dir, dpool, hpool, bb, copies.data(), count, stream);
                  }));
      rows.push_back(r);
    }
    // Bit for bit: the last onboard wrote host blocks b[i] into device blocks a[i].
    std::vector<unsigned char> back(bb);
    for (size_t i = 0; i < count; i += count / 7) {
      BENCH_CUDA(cudaMemcpy(back.data(), static_cast<unsigned char*>(dpool) + uint64_t(a[i]) * bb, bb,
                            cudaMemcpyDeviceToHost));
      if (std::memcmp(back.data(), static_cast<unsigned char*>(hpool) + uint64_t(b[i]) * bb, bb) != 0) {
        std::fprintf(stderr, "onboarded block %zu differs from its host block\n", i);
        return 1;
      }
    }
    dev->deallocate(dpool);
    dev->deallocate_host(hpool);
  }

  std::printf("## Host-tier copies on %s: %zu random blocks per batch\n\n", device_name(), count);
  std::printf("GB/s (1e9 bytes/s) of block bytes moved; %% = share of the pinned single-copy "
              "bandwidth measured in the same run. kvcache = Device::copy_tier (one kernel, "
              "%u thread blocks at most, through the host pool's mapped device address).\n\n",
              kvc::kMaxTierThreadBlocks);
  std::printf("| block | direction | pinned 1 copy | per-block memcpy | cudaMemcpyBatchAsync | kvcache | kvcache %% of pinned |\n");
  std::printf("|---:|---|---:|---:|---:|---:|---:|\n");
  FILE* jf = json ? std::fopen(json, "w") : nullptr;
  for (const Row& r : rows) {
    std::printf("| %llu KiB | %s | %.1f | %.1f (%.0f%%) | %.1f (%.0f%%) | %.1f | **%.1f%%** |\n",
                (unsigned long long)(r.block_bytes >> 10), r.dir, r.pinned, r.naive,
                100 * r.naive / r.pinned, r.batch, 100 * r.batch / r.pinned, r.kvc,
                100 * r.kvc / r.pinned);
    if (jf)
      std::fprintf(jf,
                   "{\"block_bytes\": %llu, \"direction\": \"%s\", \"pinned_gbs\": %.3f, "
                   "\"naive_gbs\": %.3f, \"batch_gbs\": %.3f, \"kvcache_gbs\": %.3f}\n",
                   (unsigned long long)r.block_bytes, r.dir, r.pinned, r.naive, r.batch, r.kvc);
  }
  api_rows(*dev, stream, jf);
  if (jf) std::fclose(jf);
  cudaStreamDestroy(stream);
  return 0;
}
