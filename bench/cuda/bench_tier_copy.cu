// Host-tier copy throughput: 1000 random blocks offloaded (device -> pinned
// host) and onboarded (back) through the path the cache uses
// (Device::copy_tier: one kernel launch of at most 16 thread blocks per
// batch), against, in the same run, one pinned cudaMemcpyAsync of the same
// total bytes (the limit), one cudaMemcpyAsync per block (the naive way) and
// cudaMemcpyBatchAsync (the driver's batched copy engine path, for
// reference). Prints a Markdown table; --json FILE also writes one JSON line
// per row.
//   bench_tier_copy [--json FILE] [--blocks N]
#include <cuda_runtime.h>

#include <algorithm>
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
  if (jf) std::fclose(jf);
  cudaStreamDestroy(stream);
  return 0;
}
