// State snapshots (issue 21, state.h) on the GPU: the cost of a publish
// (kvc_sequence_publish_state: every state resource's slot of a sequence
// copied into a snapshot) and of a restore (kvc_sequence_add reusing a
// prefix: the snapshot copied into the new sequence's slots), against a
// device copy of the same bytes measured in the same run:
//  - one cudaMemcpyAsync of all the snapshot's bytes (the physical limit: one
//    contiguous device-to-device copy);
//  - one cudaMemcpyAsync per resource (the copies a caller would issue by
//    hand; what the library does today, one copy_2d per resource).
// Shape: Nemotron-H-8B as the simulator's preset has it (4 attention layers,
// 32/8 heads of 128, bf16; 24 Mamba-2 layers: SSM state 128 heads x 64 x
// d_state 128 and conv state (128 * 64 + 2 * 8 * 128) x 4, bf16): 48 state
// resources, 49.9 MiB a snapshot.
// Two kinds of time (bench_common.cuh): GPU time (N calls in a CUDA graph)
// and per host call (events around host-issued calls, with their launch and
// bookkeeping cost). The restore is timed per host call only (an add is not
// capturable: its bookkeeping decides what to copy). Target (issue 21):
// publish and restore >= 80% of the same-bytes copy.
#include <cstdio>
#include <vector>

#include "bench_common.cuh"

namespace {

constexpr uint32_t kT = 16, kMamba = 24, kHeads = 128, kHeadDim = 64, kDState = 128;
constexpr uint32_t kGroups = 8, kDConv = 4;
constexpr uint32_t kPrompt = 64;  // tokens: 4 blocks, the snapshot at 64

kvc_cache_t* hybrid_cache() {
  kvc_config_t* c = nullptr;
  BENCH_KVC(kvc_config_create(&c));
  BENCH_KVC(kvc_config_set_num_layers(c, 4));
  BENCH_KVC(kvc_config_set_kv_heads(c, 8));
  BENCH_KVC(kvc_config_set_head_dim(c, 128));
  BENCH_KVC(kvc_config_set_dtype(c, KVC_DTYPE_BF16));
  BENCH_KVC(kvc_config_set_tokens_per_block(c, kT));
  BENCH_KVC(kvc_config_set_device(c, KVC_DEVICE_CUDA, 0));
  BENCH_KVC(kvc_config_set_primary_bytes(c, uint64_t(4) << 30));
  for (uint32_t l = 0; l < kMamba; ++l) {
    uint32_t index = 0;
    BENCH_KVC(kvc_config_add_ssm_state(c, kHeads, kHeadDim, kDState, KVC_DTYPE_BF16, &index));
    BENCH_KVC(kvc_config_add_conv_state(c, kHeads * kHeadDim + 2 * kGroups * kDState, kDConv,
                                        KVC_DTYPE_BF16, &index));
  }
  BENCH_KVC(kvc_config_set_max_state_slots(c, 8));
  BENCH_KVC(kvc_config_set_max_state_snapshots(c, 4));
  kvc_cache_t* cache = nullptr;
  BENCH_KVC(kvc_cache_create(c, &cache));
  kvc_config_destroy(c);
  return cache;
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device: nothing measured\n");
    return 0;
  }
  kvc_cache_t* cache = hybrid_cache();
  cudaStream_t stream;
  BENCH_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  // Sequence 1 computes a 64-token prompt (its slots filled with random
  // bytes, standing in for the model's state), commits and publishes at 64.
  std::vector<int32_t> prompt(kPrompt);
  for (uint32_t i = 0; i < kPrompt; ++i) prompt[i] = int32_t(1000 + i);
  BENCH_KVC(kvc_sequence_add(cache, 1, prompt.data(), prompt.size(), nullptr, stream, nullptr));
  uint32_t resources = 0;
  kvc_cache_desc_t cd = KVC_CACHE_DESC_INIT;
  BENCH_KVC(kvc_cache_describe(cache, &cd));
  resources = cd.num_resources;
  std::vector<int32_t> slot(resources);
  const uint64_t id = 1;
  BENCH_KVC(kvc_batch_state_slots(cache, &id, 1, KVC_STATE_ALL, slot.data()));
  std::vector<uint64_t> bytes(resources);
  std::vector<void*> live(resources);
  uint64_t total = 0;
  for (uint32_t r = 0; r < resources; ++r) {
    kvc_resource_desc_t rd = KVC_RESOURCE_DESC_INIT;
    BENCH_KVC(kvc_cache_describe_resource(cache, r, &rd));
    bytes[r] = rd.slot_bytes;
    live[r] = static_cast<unsigned char*>(rd.base) + uint64_t(slot[r]) * rd.slot_stride;
    fill_random_bf16<<<256, 256, 0, stream>>>(static_cast<unsigned short*>(live[r]),
                                              rd.slot_bytes / 2, 77 + r);
    total += rd.slot_bytes;
  }
  BENCH_CUDA(cudaGetLastError());
  BENCH_KVC(kvc_sequence_commit(cache, 1, kPrompt));
  BENCH_KVC(kvc_sequence_publish_state(cache, 1, kPrompt, stream));
  BENCH_CUDA(cudaStreamSynchronize(stream));
  kvc_snapshot_stats_t ss = KVC_SNAPSHOT_STATS_INIT;
  BENCH_KVC(kvc_cache_get_snapshot_stats(cache, &ss));
  if (ss.bytes_per_snapshot != total) {
    std::fprintf(stderr, "snapshot bytes %llu != slot bytes %llu\n",
                 (unsigned long long)ss.bytes_per_snapshot, (unsigned long long)total);
    return 1;
  }

  // Peers: the same bytes between two device buffers.
  void *src = nullptr, *dst = nullptr;
  BENCH_CUDA(cudaMalloc(&src, total));
  BENCH_CUDA(cudaMalloc(&dst, total));
  BENCH_CUDA(cudaMemsetAsync(src, 1, total, stream));
  std::vector<uint64_t> offset(resources);
  for (uint32_t r = 1; r < resources; ++r) offset[r] = offset[r - 1] + bytes[r - 1];
  auto one_copy = [&](int) {
    return cudaMemcpyAsync(dst, src, total, cudaMemcpyDeviceToDevice, stream) == cudaSuccess;
  };
  auto per_resource = [&](int) {
    for (uint32_t r = 0; r < resources; ++r)
      if (cudaMemcpyAsync(static_cast<char*>(dst) + offset[r], static_cast<char*>(src) + offset[r],
                          bytes[r], cudaMemcpyDeviceToDevice, stream) != cudaSuccess)
        return false;
    return true;
  };
  // A publish at the same node again overwrites the snapshot (state.h): the
  // same copies each time.
  auto publish = [&](int) {
    return kvc_sequence_publish_state(cache, 1, kPrompt, stream) == KVC_OK;
  };
  // Restore: a new sequence with the prompt and one more token reuses the
  // 64 (an add leaves a prompt's last token to compute, so the prompt alone
  // would reuse less than the snapshot's position), the snapshot copied into
  // its slots on `stream`; removed again right away.
  std::vector<int32_t> longer = prompt;
  longer.push_back(7);
  uint64_t next = 100;
  auto restore = [&](int) {
    uint64_t cached = 0;
    const uint64_t s = next++;
    BENCH_KVC(kvc_sequence_add(cache, s, longer.data(), longer.size(), nullptr, stream, &cached));
    if (cached != kPrompt) {
      std::fprintf(stderr, "restore reused %llu tokens, not %u\n", (unsigned long long)cached, kPrompt);
      std::exit(1);
    }
    BENCH_KVC(kvc_sequence_remove(cache, s));
  };

  constexpr int kCalls = 20, kSamples = 15;
  const double copy_gpu = gpu_time_us(stream, kCalls, kSamples, one_copy);
  const double per_gpu = gpu_time_us(stream, kCalls, kSamples, per_resource);
  const double publish_gpu = gpu_time_us(stream, kCalls, kSamples, publish);
  const double copy_host = host_call_us(stream, kCalls, kSamples, [&](int i) { one_copy(i); });
  const double per_host = host_call_us(stream, kCalls, kSamples, [&](int i) { per_resource(i); });
  const double publish_host = host_call_us(stream, kCalls, kSamples, [&](int i) { publish(i); });
  const double restore_host = host_call_us(stream, kCalls, kSamples, restore);
  kvc_snapshot_stats_t after = KVC_SNAPSHOT_STATS_INIT;
  BENCH_KVC(kvc_cache_get_snapshot_stats(cache, &after));

  cudaDeviceProp prop{};
  BENCH_CUDA(cudaGetDeviceProperties(&prop, 0));
  const double mib = double(total) / (1 << 20);
  auto gbs = [&](double us) { return 2.0 * double(total) / (us * 1e3); };  // read + write
  std::printf("# State snapshot publish and restore (%s)\n\n", prop.name);
  std::printf("Nemotron-H-8B state: %u resources (24 SSM, 24 conv, bf16), %.1f MiB a snapshot; "
              "%llu restores counted by the cache.\n\n",
              resources, mib, (unsigned long long)(after.hits - ss.hits));
  std::printf("| operation | GPU time us | per host call us | GB/s (read + write, GPU time; host call) | vs one copy (GPU; host) | target |\n");
  std::printf("|---|---:|---:|---|---|---|\n");
  std::printf("| one cudaMemcpyAsync of the bytes | %.1f | %.1f | %.0f; %.0f | 1.00; 1.00 | - |\n",
              copy_gpu, copy_host, gbs(copy_gpu), gbs(copy_host));
  std::printf("| one cudaMemcpyAsync per resource (%u) | %.1f | %.1f | %.0f; %.0f | %.2f; %.2f | - |\n",
              resources, per_gpu, per_host, gbs(per_gpu), gbs(per_host), copy_gpu / per_gpu,
              copy_host / per_host);
  std::printf("| kvc_sequence_publish_state | %.1f | %.1f | %.0f; %.0f | %.2f; %.2f | >= 0.80: %s |\n",
              publish_gpu, publish_host, gbs(publish_gpu), gbs(publish_host), copy_gpu / publish_gpu,
              copy_host / publish_host, copy_host / publish_host >= 0.8 ? "met" : "**not met**");
  std::printf("| restore (kvc_sequence_add of 65 tokens reusing 64, then remove) | - | %.1f | -; %.0f | -; %.2f | >= 0.80: %s |\n",
              restore_host, gbs(restore_host), copy_host / restore_host,
              copy_host / restore_host >= 0.8 ? "met" : "**not met**");
  std::printf("\n(GPU time: %d calls in a CUDA graph (%c), median of %d replays; per host call: events "
              "around %d host-issued calls, median of %d.)\n",
              kCalls, g_last_timing, kSamples, kCalls, kSamples);
  cudaFree(src);
  cudaFree(dst);
  BENCH_CUDA(cudaStreamDestroy(stream));
  kvc_cache_destroy(cache);
  return 0;
}
