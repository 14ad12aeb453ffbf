// Standalone probe of the Hopper prefill kernels (prefill_wgmma_kernel.cuh
// and the TMA variants of prefill_tma_kernel.cuh) against the mma.sync
// kernel (prefill_kernel.cuh, the tested one): random bf16 Q/K/V, blocks of
// PROBE_TPB tokens (16 unless -DPROBE_TPB=...) in random places of a pool
// whose unused blocks hold NaN, head dim PROBE_D (128 unless -DPROBE_D=64),
// every kernel on the same parameters; prints the largest output and LSE
// differences and the time of each Hopper variant.
// Not part of the build (bench/CMakeLists.txt globs bench/cuda/*.cu only);
// from the repository root:
//   nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -I. \
//     bench/cuda/probes/wgmma_prefill_probe.cu cuda/prefill_plan.cpp -o probe
// then run ./probe on an H100 / H200 (./probe quick: correctness + one row).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "cuda/prefill_kernel.cuh"
#include "cuda/prefill_tma_kernel.cuh"
#include "cuda/prefill_tma_map.h"

using namespace kvc;

#define CK(x)                                                                      \
  do {                                                                             \
    cudaError_t e_ = (x);                                                          \
    if (e_ != cudaSuccess) {                                                       \
      printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); \
      exit(1);                                                                     \
    }                                                                              \
  } while (0)

static uint16_t f2bf(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return uint16_t((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
}
static float bf2f(uint16_t b) {
  uint32_t u = uint32_t(b) << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

struct Case {
  const char* name;
  std::vector<int> q_lens, kv_lens;
  int group;
  uint32_t window;
  float cap;
  bool csr;
  bool time;
};

struct Kern {
  void (*attend)(PrefillParams);
  size_t smem;
  int threads;
  int blocks_per_sm;
};

template <class F>
Kern make_kern(F f, size_t smem, int threads) {
  Kern k{f, smem, threads, 0};
  CK(cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&k.blocks_per_sm, f, threads, smem));
  return k;
}

#ifndef PROBE_D
#define PROBE_D 128
#endif
#ifndef PROBE_TPB
#define PROBE_TPB 16
#endif
constexpr int D = PROBE_D;
constexpr int H = 32;
constexpr int TPB = PROBE_TPB;

int main(int argc, char** argv) {
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const bool quick = argc > 1 && strcmp(argv[1], "quick") == 0;
  Kern ref_nc = make_kern(prefill_kernel<bf16_t, bf16_t, D, 4, 1, false, true>, Smem<bf16_t, bf16_t, D>::kBytes, 128);
  Kern ref_c = make_kern(prefill_kernel<bf16_t, bf16_t, D, 4, 1, true, true>, Smem<bf16_t, bf16_t, D>::kBytes, 128);
  Kern w2 = make_kern(prefill_wgmma_kernel<bf16_t, D, false, 2>, WgSmem<D, 2>::kBytes, kWgThreads);
  Kern w2c = make_kern(prefill_wgmma_kernel<bf16_t, D, true, 2>, WgSmem<D, 2>::kBytes, kWgThreads);
  Kern t4 = make_kern(prefill_tma_kernel<bf16_t, D, false, 4>, TmaSmem<D, 4>::kBytes, kTmaThreads);
  Kern t4c = make_kern(prefill_tma_kernel<bf16_t, D, true, 4>, TmaSmem<D, 4>::kBytes, kTmaThreads);
  Kern b2 = make_kern(prefill_tma_kernel<bf16_t, D, false, 2, false, 128>, TmaSmem<D, 2, 128>::kBytes, kTmaThreads);
  Kern b3 = make_kern(prefill_tma_kernel<bf16_t, D, false, 3, false, 128>, TmaSmem<D, 3, 128>::kBytes, kTmaThreads);
  Kern b3p = make_kern(prefill_tma_kernel<bf16_t, D, false, 3, true, 128>, TmaSmem<D, 3, 128>::kBytes, kTmaThreads);
  Kern b3pc = make_kern(prefill_tma_kernel<bf16_t, D, true, 3, true, 128>, TmaSmem<D, 3, 128>::kBytes, kTmaThreads);
  Kern p4 = make_kern(prefill_tma_kernel<bf16_t, D, false, 4, true>, TmaSmem<D, 4>::kBytes, kTmaThreads);
  Kern p4c = make_kern(prefill_tma_kernel<bf16_t, D, true, 4, true>, TmaSmem<D, 4>::kBytes, kTmaThreads);
  printf("sms %d; blocks/SM: ref %d, wgmma2 %d, tma4 %d, bn128 %d\n", sms, ref_nc.blocks_per_sm, w2.blocks_per_sm, t4.blocks_per_sm, b3.blocks_per_sm);
  KernelErrorRecord* err;
  CK(cudaMalloc(&err, sizeof(KernelErrorRecord)));
  CK(cudaMemset(err, 0, sizeof(KernelErrorRecord)));

  std::vector<Case> cases = {
      {"tiny", {1}, {1}, 4, 0, 0, false, false},
      {"ragged", {1, 7, 128, 1000}, {1, 20, 300, 1000}, 4, 0, 0, false, false},
      {"prefix", {7, 128, 100, 33}, {16, 129, 1029, 2048}, 4, 0, 0, true, false},
      {"g1", {200, 65}, {200, 700}, 1, 0, 0, false, false},
      {"g8", {300}, {1100}, 8, 0, 0, false, false},
      {"g2", {129, 1}, {513, 64}, 2, 0, 0, true, false},
      {"window", {1000, 300}, {1000, 2000}, 4, 100, 0, false, false},
      {"cap", {500, 77}, {900, 77}, 4, 0, 30.0f, false, false},
      {"capwin", {500}, {900}, 4, 257, 30.0f, true, false},
      {"nopfx 1x4K", {4096}, {4096}, 4, 0, 0, false, true},
      {"nopfx 4x4K", {4096, 4096, 4096, 4096}, {4096, 4096, 4096, 4096}, 4, 0, 0, false, true},
      {"nopfx 1x16K", {16384}, {16384}, 4, 0, 0, false, true},
      {"50% 4K/8K", {4096}, {8192}, 4, 0, 0, false, true},
      {"90% 832/8K", {832}, {8192}, 4, 0, 0, false, true},
      {"50% 8K/16K", {8192}, {16384}, 4, 0, 0, false, true},
      {"90% 1664/16K", {1664}, {16384}, 4, 0, 0, false, true},
      {"chunk 512/4K", {512}, {4096}, 4, 0, 0, false, true},
      {"chunk 512/32K", {512}, {32768}, 4, 0, 0, false, true},
  };
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  bool all_ok = true;
  for (const Case& c : cases) {
    if (quick && c.time && strcmp(c.name, "nopfx 1x4K") != 0) continue;
    const int B = int(c.q_lens.size());
    const int KVH = H / c.group;
    int total_q = 0, total_blocks = 0, max_blocks = 0, max_kv = 0;
    std::vector<int> qo(B + 1, 0);
    for (int b = 0; b < B; ++b) {
      qo[b + 1] = qo[b] + c.q_lens[b];
      const int nb = (c.kv_lens[b] + TPB - 1) / TPB;
      total_blocks += nb;
      max_blocks = std::max(max_blocks, nb);
      max_kv = std::max(max_kv, c.kv_lens[b]);
    }
    total_q = qo[B];
    const int pool_blocks = total_blocks + 37;
    const size_t block_elems = size_t(TPB) * KVH * D;
    const size_t kv_elems = size_t(pool_blocks) * block_elems;
    std::vector<int> perm(pool_blocks);
    for (int i = 0; i < pool_blocks; ++i) perm[i] = i;
    std::shuffle(perm.begin(), perm.end(), rng);
    std::vector<int32_t> table(size_t(B) * max_blocks, -1), csr_idx, indptr(B + 1, 0);
    std::vector<char> used(pool_blocks, 0);
    int next = 0;
    for (int b = 0; b < B; ++b) {
      const int nb = (c.kv_lens[b] + TPB - 1) / TPB;
      for (int i = 0; i < nb; ++i) {
        const int id = perm[next++];
        used[id] = 1;
        table[size_t(b) * max_blocks + i] = id;
        csr_idx.push_back(id);
      }
      indptr[b + 1] = int(csr_idx.size());
    }
    std::vector<uint16_t> hkv(2 * kv_elems), hq(size_t(total_q) * H * D);
    for (size_t i = 0; i < kv_elems; ++i) {
      const bool u = used[i / block_elems];
      hkv[i] = u ? f2bf(uni(rng)) : 0x7FC0;
      hkv[kv_elems + i] = u ? f2bf(uni(rng)) : 0x7FC0;
    }
    for (auto& x : hq) x = f2bf(uni(rng));
    uint16_t *dkv, *dq, *dout_ref, *dout_new;
    float *dlse_ref, *dlse_new, *ws;
    int32_t *dtable, *dindptr;
    CK(cudaMalloc(&dkv, hkv.size() * 2));
    CK(cudaMalloc(&dq, hq.size() * 2));
    CK(cudaMalloc(&dout_ref, hq.size() * 2));
    CK(cudaMalloc(&dout_new, hq.size() * 2));
    CK(cudaMalloc(&dlse_ref, size_t(total_q) * H * 4));
    CK(cudaMalloc(&dlse_new, size_t(total_q) * H * 4));
    const std::vector<int32_t>& tab = c.csr ? csr_idx : table;
    CK(cudaMalloc(&dtable, tab.size() * 4 + 4));
    CK(cudaMalloc(&dindptr, indptr.size() * 4));
    CK(cudaMemcpy(dkv, hkv.data(), hkv.size() * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dq, hq.data(), hq.size() * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dtable, tab.data(), tab.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dindptr, indptr.data(), indptr.size() * 4, cudaMemcpyHostToDevice));
    const uint64_t ws_bytes = std::max<uint64_t>(prefill_workspace_bound(total_q, H, D, max_kv, uint64_t(sms) * 2),
                                                  uint64_t(total_q) * H * 8 * (D + 2) * 4);
    CK(cudaMalloc(&ws, ws_bytes + 16));

    PrefillParams p{};
    p.query = dq;
    p.k_base = reinterpret_cast<const unsigned char*>(dkv);
    p.v_base = p.k_base + kv_elems * 2;
    p.block_stride = block_elems * 2;
    p.token_stride = size_t(KVH) * D * 2;
    p.head_stride = D * 2;
    p.table = dtable;
    p.indptr = c.csr ? dindptr : nullptr;
    p.table_stride = max_blocks;
    p.num_blocks = pool_blocks;
    p.block_shift = __builtin_ctz(TPB);
    p.q_heads = H;
    p.kv_heads = KVH;
    p.group = c.group;
    p.window = c.window;
    const float scale = 1.0f / sqrtf(float(D));
    if (c.cap > 0) {
      p.score_scale = scale / c.cap;
      p.cap_log2 = c.cap * kLog2e;
    } else {
      p.score_scale = scale * kLog2e;
    }
    p.v_scale = 1.0f;
    p.err = err;
    if (!prefill_tma_encode(p, D, KVH)) { printf("tensor map encode failed\n"); return 1; }
    uint32_t tiles = 0;
    uint64_t max_range = 0;
    const uint64_t tile_tokens = (BM + c.group - 1) / c.group;
    for (int b = 0; b < B; ++b) {
      PrefillSeq& s = p.seqs[p.num_seqs++];
      s.q_start = qo[b];
      s.q_len = c.q_lens[b];
      s.kv_len = c.kv_lens[b];
      s.tile_begin = int(tiles);
      s.index = b;
      tiles += uint32_t((uint64_t(s.q_len) * c.group + BM - 1) / BM);
      uint64_t range = s.kv_len;
      if (c.window) range = std::min<uint64_t>(range, c.window + tile_tokens + BN);
      max_range = std::max(max_range, range);
    }
    p.num_tiles = tiles;
    p.q_base = 0;
    double pairs = 0;
    for (int b = 0; b < B; ++b) {
      const int prefix = c.kv_lens[b] - c.q_lens[b];
      for (int i = 0; i < c.q_lens[b]; ++i) {
        const int pos = prefix + i;
        const int lo = c.window ? std::max(0, pos + 1 - int(c.window)) : 0;
        pairs += pos + 1 - lo;
      }
    }
    const double flops = 4.0 * D * H * pairs;

    auto launch = [&](const Kern& k, PrefillParams pp, uint16_t* out, float* lse, int force_splits) {
      const PrefillSplit sp = plan_prefill_split(uint64_t(tiles) * KVH, uint64_t(sms) * std::min(k.blocks_per_sm, 2), max_range);
      pp.num_splits = sp.num_splits;
      pp.split_tokens = sp.split_tokens;
      if (force_splits > 1) {
        pp.num_splits = force_splits;
        pp.split_tokens = uint32_t(((max_range + force_splits - 1) / force_splits + BN - 1) / BN * BN);
        pp.num_splits = uint32_t((max_range + BN + pp.split_tokens - 1) / pp.split_tokens);
      }
      pp.out = out;
      pp.lse = lse;
      pp.ws_o = ws;
      pp.ws_ml = reinterpret_cast<float2*>(ws + uint64_t(total_q) * H * pp.num_splits * D);
      k.attend<<<tiles * KVH * pp.num_splits, k.threads, k.smem>>>(pp);
      if (pp.num_splits > 1) prefill_merge_kernel<bf16_t, D><<<dim3(total_q, H), D>>>(pp);
      return pp.num_splits;
    };
    const Kern& ref = c.cap > 0 ? ref_c : ref_nc;
    std::vector<std::pair<const char*, const Kern*>> news = {{"wgmma2", c.cap > 0 ? &w2c : &w2},
                                                              {"tma4", c.cap > 0 ? &t4c : &t4}};
    news.push_back({"pp4", c.cap > 0 ? &p4c : &p4});
    news.push_back({"bn128s3pp", c.cap > 0 ? &b3pc : &b3p});
    if (c.cap == 0) news.push_back({"bn128s3", &b3});
    if (c.cap == 0) news.push_back({"bn128s2", &b2});
    launch(ref, p, dout_ref, dlse_ref, 0);
    CK(cudaDeviceSynchronize());
    std::vector<uint16_t> o_ref(hq.size()), o_new(hq.size());
    std::vector<float> l_ref(size_t(total_q) * H), l_new(l_ref.size());
    CK(cudaMemcpy(o_ref.data(), dout_ref, o_ref.size() * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(l_ref.data(), dlse_ref, l_ref.size() * 4, cudaMemcpyDeviceToHost));
    printf("%-14s", c.name);
    for (auto& nk : news) {
      for (int fs : {0, 3}) {
        if (c.time && fs) continue;
        CK(cudaMemset(dout_new, 0xFF, o_new.size() * 2));
        const int ns = launch(*nk.second, p, dout_new, dlse_new, fs);
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(o_new.data(), dout_new, o_new.size() * 2, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(l_new.data(), dlse_new, l_new.size() * 4, cudaMemcpyDeviceToHost));
        double maxd = 0, maxl = 0;
        for (size_t i = 0; i < o_ref.size(); ++i) {
          const double d = fabs(double(bf2f(o_ref[i])) - bf2f(o_new[i]));
          if (!(d <= maxd)) maxd = std::isnan(d) ? 1e9 : d;
        }
        for (size_t i = 0; i < l_ref.size(); ++i) {
          const double d = fabs(double(l_ref[i]) - l_new[i]);
          if (!(d <= maxl)) maxl = std::isnan(d) ? 1e9 : d;
        }
        const bool ok = maxd < 0.02 && maxl < 1e-3;
        all_ok &= ok;
        printf("  %s s%d dO %.4f dLSE %.5f %s", nk.first, ns, maxd, maxl, ok ? "ok" : "FAIL");
      }
    }
    printf("\n");
    if (c.time) {
      auto time_k = [&](const Kern& k, uint16_t* out, float* lse) {
        cudaEvent_t a, b;
        cudaEventCreate(&a);
        cudaEventCreate(&b);
        std::vector<float> ts;
        for (int it = 0; it < 7; ++it) {
          cudaEventRecord(a);
          for (int r = 0; r < 5; ++r) launch(k, p, out, lse, 0);
          cudaEventRecord(b);
          cudaEventSynchronize(b);
          float ms;
          cudaEventElapsedTime(&ms, a, b);
          ts.push_back(ms * 1000.0f / 5);
        }
        std::sort(ts.begin(), ts.end());
        return double(ts[3]);
      };
      printf("    time:");
      for (auto& nk : news) {
        const double tn = time_k(*nk.second, dout_new, dlse_new);
        printf(" | %s %.1f us %.0f TF", nk.first, tn, flops / tn * 1e-6);
      }
      printf("\n");
    }
    CK(cudaGetLastError());
    cudaFree(dkv); cudaFree(dq); cudaFree(dout_ref); cudaFree(dout_new); cudaFree(dlse_ref);
    cudaFree(dlse_new); cudaFree(ws); cudaFree(dtable); cudaFree(dindptr);
  }
  KernelErrorRecord herr;
  CK(cudaMemcpy(&herr, err, sizeof(herr), cudaMemcpyDeviceToHost));
  printf("kernel error code %d; %s\n", herr.code, all_ok ? "ALL OK" : "SOME FAILED");
  return all_ok ? 0 : 1;
}
