// State snapshots (issue 21, state.h) on the GPU: the cost of a publish
// (kvc_sequence_publish_state: every state resource's slot of a sequence
// copied into a snapshot), of a restore (kvc_sequence_add reusing a prefix:
// the snapshot copied into the new sequence's slots) and of a fork
// (kvc_sequence_fork: the parent's slots copied into the child's), against
// a device copy of the same bytes measured in the same run:
//  - one cudaMemcpyAsync of all the snapshot's bytes (the physical limit: one
//    contiguous device-to-device copy);
//  - one cudaMemcpyAsync per resource (the copies a caller would issue by
//    hand; what the library did before Device::copy_ranges).
// The library copies every resource's range in one Device::copy_ranges (one
// kernel launch, cuda/copy_ranges.cu).
// Shape: Nemotron-H-8B as the simulator's preset has it (4 attention layers,
// 32/8 heads of 128, bf16; 24 Mamba-2 layers: SSM state 128 heads x 64 x
// d_state 128 and conv state (128 * 64 + 2 * 8 * 128) x 4, bf16): 48 state
// resources, 49.9 MiB a snapshot.
// Two kinds of time (bench_common.cuh): GPU time (N calls in a CUDA graph)
// and per host call (events around N host-issued calls, with their launch
// and bookkeeping cost; the host's own time to issue a call is shown
// apart). Samples of an operation alternate with samples of the one copy
// (paired_samples.cuh), so a slow stretch of the machine lands on both; a
// ratio is copy time / operation time per pair (1.00: as fast as the
// copy), shown as the median of the pairs with their min-max. The restore
// and the fork are timed per host call only (an add decides what to copy
// in its bookkeeping; a fork copies on the legacy default stream, so its
// peer copy runs there too). Target (issue 21): publish and restore >= 0.80
// of the same-bytes copy.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/device.h"
#include "paired_samples.cuh"

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

  // The bookkeeping alone: an add of a prompt that reuses nothing (its
  // first token differs), then its remove; no copy.
  std::vector<int32_t> fresh = longer;
  fresh[0] = -5;
  auto bookkeeping = [&](int) {
    uint64_t cached = 0;
    const uint64_t s = next++;
    BENCH_KVC(kvc_sequence_add(cache, s, fresh.data(), fresh.size(), nullptr, stream, &cached));
    if (cached != 0) std::exit(1);
    BENCH_KVC(kvc_sequence_remove(cache, s));
  };
  // Fork: sequence 1's slots into a new child on the legacy default stream
  // (kvc_sequence_fork takes no stream), then the child removed.
  auto fork_child = [&](int) {
    const uint64_t s = next++;
    BENCH_KVC(kvc_sequence_fork(cache, 1, s));
    BENCH_KVC(kvc_sequence_remove(cache, s));
  };
  cudaStream_t legacy = cudaStreamLegacy;
  auto one_copy_legacy = [&](int) {
    BENCH_CUDA(cudaMemcpyAsync(dst, src, total, cudaMemcpyDeviceToDevice, legacy));
  };

  // The kernel alone: the library's Device (a second one on GPU 0) copying
  // the 48 ranges between the peer buffers, no cache bookkeeping.
  std::unique_ptr<kvc::Device> device = kvc::create_device(KVC_DEVICE_CUDA, 0);
  std::vector<kvc::CopyRange> ranges(resources);
  for (uint32_t r = 0; r < resources; ++r)
    ranges[r] = {static_cast<char*>(dst) + offset[r], static_cast<char*>(src) + offset[r], bytes[r]};
  auto copy_ranges = [&](int) {
    device->copy_ranges(ranges.data(), ranges.size(), stream);
    return true;
  };

  constexpr uint32_t kCalls = 20, kSamples = 31;
  struct Row {
    std::string name, timing;
    std::vector<double> us, issue, ratio;
    bool target = false;
  };
  std::vector<Row> rows;
  // GPU time: graphs of kCalls calls, replays of the copy's and the
  // operation's graphs alternating.
  auto capture = [&](const std::function<bool(int)>& call) {
    for (int i = 0; i < 3; ++i)
      if (!call(i)) std::exit(1);
    int i = 0;
    cudaGraphExec_t g = capture_calls(stream, kCalls, [&] { return call(i++); });
    if (g == nullptr) {
      std::fprintf(stderr, "capture failed\n");
      std::exit(1);
    }
    return g;
  };
  cudaGraphExec_t copy_graph = capture(one_copy);
  auto gpu_row = [&](const char* name, const std::function<bool(int)>& call, bool target) {
    cudaGraphExec_t g = capture(call);
    graph_sample(stream, kCalls, g);
    graph_sample(stream, kCalls, copy_graph);
    Row r{name, "GPU time", {}, {}, {}, target};
    for (uint32_t k = 0; k < kSamples; ++k) {
      const double c = graph_sample(stream, kCalls, copy_graph);
      const double o = graph_sample(stream, kCalls, g);
      r.us.push_back(o);
      r.ratio.push_back(c / o);
    }
    BENCH_CUDA(cudaGraphExecDestroy(g));
    rows.push_back(r);
  };
  // Per host call: kCalls calls issued back to back, events around them;
  // the copy's samples (on the same stream) alternating.
  auto host_row = [&](const char* name, cudaStream_t on, const std::function<void(int)>& call,
                      const std::function<void(int)>& peer, bool target) {
    int i = 0, j = 0;
    for (int w = 0; w < 3; ++w) {
      call(i++);
      peer(j++);
    }
    BENCH_CUDA(cudaStreamSynchronize(on));
    Row r{name, "per host call", {}, {}, {}, target};
    for (uint32_t k = 0; k < kSamples; ++k) {
      const Sample c = host_sample(on, kCalls, [&] { peer(j++); });
      const Sample o = host_sample(on, kCalls, [&] { call(i++); });
      r.us.push_back(o.us);
      r.issue.push_back(o.issue_us);
      r.ratio.push_back(c.us / o.us);
    }
    rows.push_back(r);
  };
  const auto copy_host = [&](int i) { one_copy(i); };
  gpu_row("one cudaMemcpyAsync of the bytes", one_copy, false);
  gpu_row("one cudaMemcpyAsync per resource (48)", per_resource, false);
  gpu_row("Device::copy_ranges of the 48 ranges (the kernel alone)", copy_ranges, false);
  gpu_row("kvc_sequence_publish_state", publish, true);
  host_row("one cudaMemcpyAsync of the bytes", stream, copy_host, copy_host, false);
  host_row("one cudaMemcpyAsync per resource (48)", stream, [&](int i) { per_resource(i); },
           copy_host, false);
  host_row("Device::copy_ranges of the 48 ranges (the kernel alone)", stream,
           [&](int i) { copy_ranges(i); }, copy_host, false);
  host_row("kvc_sequence_publish_state", stream, [&](int i) { publish(i); }, copy_host, true);
  host_row("restore (kvc_sequence_add of 65 tokens reusing 64, then remove)", stream, restore,
           copy_host, true);
  host_row("add of 65 tokens reusing nothing, then remove (bookkeeping, no copy)", stream,
           bookkeeping, copy_host, false);
  host_row("fork (kvc_sequence_fork, then remove the child; legacy stream, peer copy there too)",
           legacy, fork_child, one_copy_legacy, false);
  kvc_snapshot_stats_t after = KVC_SNAPSHOT_STATS_INIT;
  BENCH_KVC(kvc_cache_get_snapshot_stats(cache, &after));

  cudaDeviceProp prop{};
  BENCH_CUDA(cudaGetDeviceProperties(&prop, 0));
  const double mib = double(total) / (1 << 20);
  std::printf("# State snapshot publish, restore and fork (%s)\n\n", prop.name);
  std::printf("Nemotron-H-8B state: %u resources (24 SSM, 24 conv, bf16), %.1f MiB a snapshot; "
              "%llu restores counted by the cache. Each copy of the library is one "
              "Device::copy_ranges (one kernel launch).\n\n",
              resources, mib, (unsigned long long)(after.hits - ss.hits));
  std::printf("| operation | timing | us per call: median (min-max) | GB/s (read + write, median) | "
              "host issue us (median) | vs one copy: median (min-max) | target >= 0.80 |\n");
  std::printf("|---|---|---|---:|---:|---|---|\n");
  for (const Row& r : rows) {
    const double m = median_of(r.us);
    const double q = median_of(r.ratio);
    char issue[32] = "-";
    if (!r.issue.empty()) std::snprintf(issue, sizeof issue, "%.1f", median_of(r.issue));
    std::printf("| %s | %s | %.1f (%.1f-%.1f) | %.0f | %s | %.2f (%.2f-%.2f) | %s |\n",
                r.name.c_str(), r.timing.c_str(), m, *std::min_element(r.us.begin(), r.us.end()),
                *std::max_element(r.us.begin(), r.us.end()), 2.0 * double(total) / (m * 1e3),
                issue, q, *std::min_element(r.ratio.begin(), r.ratio.end()),
                *std::max_element(r.ratio.begin(), r.ratio.end()),
                !r.target ? "-" : q >= 0.8 ? "met" : "**not met**");
  }
  std::printf("\n(%u pairs of samples per row, each sample %u calls: GPU time = one replay of a "
              "graph of %u calls; per host call = events around %u host-issued calls. Host issue "
              "= the host's time to issue one call, from steady_clock around the same %u calls.)\n",
              kSamples, kCalls, kCalls, kCalls, kCalls);
  BENCH_CUDA(cudaGraphExecDestroy(copy_graph));
  cudaFree(src);
  cudaFree(dst);
  BENCH_CUDA(cudaStreamDestroy(stream));
  kvc_cache_destroy(cache);
  return 0;
}
