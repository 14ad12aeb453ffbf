// kvc_cache_resize on the GPU (issue 23), against peers measured in the
// same run:
//  1. Resize cost, Llama-3.1-8B's shape (32 layers, 8 kv heads, head dim
//     128, bf16, 16-token blocks: 2 MiB a block set): grow by 10 GiB (2 ->
//     12 GiB) and shrink by 10 GiB (12 -> 2 GiB) in place, against the
//     naive way (cudaMalloc of the new pool, a device copy of the old
//     pool's bytes that remain, cudaFree of the old one, synchronized).
//  2. Steady-state kernels on a pool in reserved, VMM-mapped memory (what
//     every growable pool is) against the same kernels on a cudaMalloc'd
//     pool of the same size: store_kv (a 2048-token prefill into random
//     blocks) and decode attention (batch 32, 2048 tokens each, random
//     blocks), 4 GiB pools, GPU time of 50 calls in a CUDA graph, samples
//     of the two alternating; the ratio VMM / cudaMalloc per pair.
// Prints medians and the spread (min-max) of 9 (resize) and 21 (kernel)
// samples.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "backend/device.h"
#include "bench_common.cuh"
#include "paired_samples.cuh"

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

struct Stat {
  std::vector<double> v;
  double med() const { return median_of(v); }
  double lo() const { return *std::min_element(v.begin(), v.end()); }
  double hi() const { return *std::max_element(v.begin(), v.end()); }
};

void resize_cost() {
  constexpr uint64_t kGiB = uint64_t(1) << 30;
  kvc_config_t* c = nullptr;
  BENCH_KVC(kvc_config_create(&c));
  BENCH_KVC(kvc_config_set_num_layers(c, 32));
  BENCH_KVC(kvc_config_set_kv_heads(c, 8));
  BENCH_KVC(kvc_config_set_head_dim(c, 128));
  BENCH_KVC(kvc_config_set_dtype(c, KVC_DTYPE_BF16));
  BENCH_KVC(kvc_config_set_tokens_per_block(c, 16));
  BENCH_KVC(kvc_config_set_device(c, KVC_DEVICE_CUDA, 0));
  BENCH_KVC(kvc_config_set_primary_bytes(c, 2 * kGiB));
  BENCH_KVC(kvc_config_set_max_primary_bytes(c, 12 * kGiB));
  kvc_cache_t* cache = nullptr;
  BENCH_KVC(kvc_cache_create(c, &cache));
  kvc_config_destroy(c);
  Stat grow, shrink, naive_grow, naive_shrink;
  for (int s = 0; s < 9; ++s) {
    BENCH_CUDA(cudaDeviceSynchronize());
    auto t = Clock::now();
    BENCH_KVC(kvc_cache_resize(cache, 12 * kGiB));
    BENCH_CUDA(cudaDeviceSynchronize());
    grow.v.push_back(ms_since(t));
    t = Clock::now();
    BENCH_KVC(kvc_cache_resize(cache, 2 * kGiB));
    BENCH_CUDA(cudaDeviceSynchronize());
    shrink.v.push_back(ms_since(t));

    void* old_pool = nullptr;
    BENCH_CUDA(cudaMalloc(&old_pool, 2 * kGiB));
    BENCH_CUDA(cudaDeviceSynchronize());
    t = Clock::now();
    void* big = nullptr;
    BENCH_CUDA(cudaMalloc(&big, 12 * kGiB));
    BENCH_CUDA(cudaMemcpy(big, old_pool, 2 * kGiB, cudaMemcpyDeviceToDevice));
    BENCH_CUDA(cudaFree(old_pool));
    BENCH_CUDA(cudaDeviceSynchronize());
    naive_grow.v.push_back(ms_since(t));
    t = Clock::now();
    void* small = nullptr;
    BENCH_CUDA(cudaMalloc(&small, 2 * kGiB));
    BENCH_CUDA(cudaMemcpy(small, big, 2 * kGiB, cudaMemcpyDeviceToDevice));
    BENCH_CUDA(cudaFree(big));
    BENCH_CUDA(cudaDeviceSynchronize());
    naive_shrink.v.push_back(ms_since(t));
    BENCH_CUDA(cudaFree(small));
  }
  kvc_cache_destroy(cache);
  std::printf("## Resize cost, Llama-3.1-8B shape, 2 MiB block sets, %s\n\n", device_name());
  std::printf("| operation | in place ms (median, min-max) | naive ms (median, min-max) | naive / in place |\n");
  std::printf("|---|---|---|---|\n");
  std::printf("| grow 2 -> 12 GiB | %.2f (%.2f-%.2f) | %.2f (%.2f-%.2f) | %.1fx |\n", grow.med(),
              grow.lo(), grow.hi(), naive_grow.med(), naive_grow.lo(), naive_grow.hi(),
              naive_grow.med() / grow.med());
  std::printf("| shrink 12 -> 2 GiB | %.2f (%.2f-%.2f) | %.2f (%.2f-%.2f) | %.1fx |\n\n",
              shrink.med(), shrink.lo(), shrink.hi(), naive_shrink.med(), naive_shrink.lo(),
              naive_shrink.hi(), naive_shrink.med() / shrink.med());
}

void kernels_on_vmm() {
  std::unique_ptr<kvc::Device> dev = kvc::create_device(KVC_DEVICE_CUDA, 0);
  if (dev->reserve_granularity() == 0) {
    std::printf("(no virtual memory API on this device: kernel comparison skipped)\n");
    return;
  }
  // The layer view of a one-layer Llama cache, its base replaced.
  kvc_cache_t* shape = make_llama_cache(KVC_LAYOUT_NHD, 16);
  kvc_layer_view_t v = KVC_LAYER_VIEW_INIT;
  BENCH_KVC(kvc_cache_layer_view(shape, 0, &v));
  kvc_cache_destroy(shape);
  const uint64_t blocks = 65536, bytes = blocks * v.block_stride;  // 4 GiB
  const uint64_t g = dev->reserve_granularity();
  void* vmm = dev->reserve((bytes + g - 1) / g * g, (bytes + g - 1) / g * g);
  void* plain = dev->allocate(bytes);
  kvc::LayerSlabs kv;
  kv.num_blocks = blocks;
  kv.block_stride = v.block_stride;
  kv.kv_stride = v.kv_stride;
  kv.token_stride = v.token_stride;
  kv.head_stride = v.head_stride;
  kv.tokens_per_block = v.tokens_per_block;
  kv.kv_heads = v.kv_heads;
  kv.head_dim = v.head_dim;
  kv.kv_factor = v.kv_factor;
  kv.dtype = v.dtype;
  kv.layout = v.layout;
  fill_bf16(vmm, bytes / 2, 3);
  fill_bf16(plain, bytes / 2, 3);

  std::mt19937_64 rng(11);
  // store_kv: 2048 tokens, consecutive in 128 random blocks.
  const uint32_t tokens = 2048;
  std::vector<int64_t> slots(tokens);
  for (uint32_t b = 0; b < tokens / 16; ++b) {
    const int64_t blk = int64_t(rng() % blocks);
    for (uint32_t t = 0; t < 16; ++t) slots[b * 16 + t] = blk * 16 + t;
  }
  void *d_k = nullptr, *d_v = nullptr, *d_slots = nullptr;
  const uint64_t src = uint64_t(tokens) * 8 * 128 * 2;
  BENCH_CUDA(cudaMalloc(&d_k, src));
  BENCH_CUDA(cudaMalloc(&d_v, src));
  BENCH_CUDA(cudaMalloc(&d_slots, tokens * 8));
  fill_bf16(d_k, src / 2, 5);
  fill_bf16(d_v, src / 2, 6);
  BENCH_CUDA(cudaMemcpy(d_slots, slots.data(), tokens * 8, cudaMemcpyHostToDevice));
  kvc::StoreKvWork st;
  st.kv = kv;
  st.num_tokens = tokens;
  st.src_dtype = KVC_DTYPE_BF16;
  st.key = d_k;
  st.value = d_v;
  st.slot_mapping = static_cast<const int64_t*>(d_slots);
  st.set_contiguous_source();

  // decode: batch 32 of 2048 tokens, 128 random blocks each.
  const uint32_t batch = 32, len = 2048, per = len / 16, q_heads = 32;
  std::vector<int32_t> table(batch * per), lens(batch, int32_t(len));
  for (auto& b : table) b = int32_t(rng() % blocks);
  void *d_table = nullptr, *d_lens = nullptr, *d_q = nullptr, *d_out = nullptr, *d_ws = nullptr;
  BENCH_CUDA(cudaMalloc(&d_table, table.size() * 4));
  BENCH_CUDA(cudaMalloc(&d_lens, batch * 4));
  BENCH_CUDA(cudaMalloc(&d_q, batch * q_heads * 128 * 2));
  BENCH_CUDA(cudaMalloc(&d_out, batch * q_heads * 128 * 2));
  fill_bf16(d_q, batch * q_heads * 128, 9);
  BENCH_CUDA(cudaMemcpy(d_table, table.data(), table.size() * 4, cudaMemcpyHostToDevice));
  BENCH_CUDA(cudaMemcpy(d_lens, lens.data(), batch * 4, cudaMemcpyHostToDevice));
  kvc::DecodeWork dw;
  dw.kv = kv;
  dw.batch = batch;
  dw.q_heads = q_heads;
  dw.q_dtype = KVC_DTYPE_BF16;
  dw.query = d_q;
  dw.out = d_out;
  dw.seq_lens = static_cast<const int32_t*>(d_lens);
  dw.block_table = static_cast<const int32_t*>(d_table);
  dw.table_stride = per;
  dw.max_seq_len = len;
  dw.softmax_scale = 1.0f / std::sqrt(128.0f);
  dw.workspace_bytes = dev->decode_workspace_bytes(dw);
  BENCH_CUDA(cudaMalloc(&d_ws, dw.workspace_bytes + 1));
  dw.workspace = d_ws;

  cudaStream_t stream = nullptr;
  BENCH_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  constexpr uint32_t kCalls = 50;
  auto graph_of = [&](void* base, bool store) {
    st.kv.base = base;
    dw.kv.base = base;
    return capture_calls(stream, kCalls, [&] {
      if (store) dev->store_kv(st, stream);
      else dev->decode_attention(dw, stream);
      return true;
    });
  };
  std::printf("## Kernels on a VMM-mapped pool against a cudaMalloc'd pool, 4 GiB, %s\n\n",
              device_name());
  std::printf("| kernel | cudaMalloc us | VMM us | VMM / cudaMalloc (median, min-max of 21 pairs) |\n");
  std::printf("|---|---|---|---|\n");
  for (bool store : {true, false}) {
    cudaGraphExec_t a = graph_of(plain, store), b = graph_of(vmm, store);
    if (a == nullptr || b == nullptr) {
      std::printf("| %s | capture failed | | |\n", store ? "store_kv" : "decode");
      continue;
    }
    graph_sample(stream, kCalls, a);  // warm-up
    graph_sample(stream, kCalls, b);
    Stat ta, tb, r;
    for (int s = 0; s < 21; ++s) {
      const bool first_a = s % 2 == 0;
      const double x = first_a ? graph_sample(stream, kCalls, a) : 0;
      const double y = graph_sample(stream, kCalls, b);
      const double x2 = first_a ? x : graph_sample(stream, kCalls, a);
      ta.v.push_back(x2);
      tb.v.push_back(y);
      r.v.push_back(y / x2);
    }
    std::printf("| %s | %.1f | %.1f | %.3f (%.3f-%.3f) |\n", store ? "store_kv (2048 tokens)"
                                                             : "decode (batch 32 x 2048)",
                ta.med(), tb.med(), r.med(), r.lo(), r.hi());
    cudaGraphExecDestroy(a);
    cudaGraphExecDestroy(b);
  }
  std::printf("\n");
  BENCH_CUDA(cudaStreamSynchronize(stream));
  for (void* p : {d_k, d_v, d_slots, d_table, d_lens, d_q, d_out, d_ws}) cudaFree(p);
  cudaStreamDestroy(stream);
  dev->deallocate(plain);
  dev->unreserve(vmm, (bytes + g - 1) / g * g, (bytes + g - 1) / g * g);
}

}  // namespace

int main() {
  resize_cost();
  kernels_on_vmm();
  return 0;
}
