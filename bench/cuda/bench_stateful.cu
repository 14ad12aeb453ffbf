// The stateful mode (issue 18) on one GPU, each figure against a peer run
// in the same process:
//  1. append of one token per row, 32 layers of 8 kv heads x 128, bf16,
//     B = 1/8, at 1K/4K/16K context: kvc_stateful_append (in place; growth
//     copies amortized, as they come) against re-concatenating past + new
//     into a fresh buffer (the unfused Concat the seed describes);
//  2. a beam search step, B = 4/8 beams, 2K-16K context, 32 layers: reorder
//     + decode through the beam table against gather-then-decode (the K/V
//     gathered by beam_idx into a second cache, then decoded); the token
//     append of the step is done, untimed, in both. Random beam_idx (at most
//     half the beams survive a step, so beams come to share their history),
//     and a rotation (every beam keeps a history of its own: nothing to
//     share), with the share of K/V the table step has to read;
//  3. the indirect decode alone against the paged decode kernel on the same
//     bytes (16-token blocks in random places): each point over several
//     rounds on fresh caches of alternating indirect/paged samples, timed
//     as GPU time (graph replay) and per host call; medians and spread;
//  4. memory over a 4K-token generation (B = 1, 32 layers), staggered
//     against uniform growth: the cache's peak live bytes and the device
//     memory in use at its peak (cudaMemGetInfo after every append), each
//     over the final size; then the same growths replayed through a
//     stream-ordered pool (the allocator before growth_memory.h) to show
//     what the pool holds beside the live bytes.
// Prints a markdown table per part.
#include <chrono>
#include <cstring>
#include <numeric>
#include <string>

#include "bench_common.cuh"
#include "paired_samples.cuh"
#include "cuda/cuda_kernels.h"
#include "cuda/decode_split.h"

namespace {

constexpr uint32_t kLayers = 32, kHkv = 8, kHq = 32, kD = 128;

kvc_stateful_t* make_stateful(uint32_t batch, uint32_t layers, kvc_growth_policy_t policy,
                              uint32_t initial, kvc_layout_t layout = KVC_LAYOUT_HND) {
  kvc_config_t* c = nullptr;
  BENCH_KVC(kvc_config_create(&c));
  BENCH_KVC(kvc_config_set_num_layers(c, layers));
  BENCH_KVC(kvc_config_set_kv_heads(c, kHkv));
  BENCH_KVC(kvc_config_set_head_dim(c, kD));
  BENCH_KVC(kvc_config_set_dtype(c, KVC_DTYPE_BF16));
  BENCH_KVC(kvc_config_set_device(c, KVC_DEVICE_CUDA, 0));
  kvc_stateful_options_t o = KVC_STATEFUL_OPTIONS_INIT;
  o.batch = batch;
  o.growth_policy = policy;
  o.initial_length = initial;
  o.layout = layout;
  kvc_stateful_t* s = nullptr;
  BENCH_KVC(kvc_stateful_create(c, &o, &s));
  kvc_config_destroy(c);
  return s;
}

// Appends n positions of `src` (random bf16, B x H x n x D) to every layer.
void append_all(kvc_stateful_t* s, uint32_t layers, uint32_t n, const void* src,
                cudaStream_t stream) {
  for (uint32_t l = 0; l < layers; ++l) {
    kvc_stateful_append_args_t a = KVC_STATEFUL_APPEND_ARGS_INIT;
    a.layer = l;
    a.num_tokens = n;
    a.src_dtype = KVC_DTYPE_BF16;
    a.key = src;
    a.value = src;
    BENCH_KVC(kvc_stateful_append(s, &a, stream));
  }
}

kvc_stateful_view_t view_of(kvc_stateful_t* s, uint32_t layer) {
  kvc_stateful_view_t v;
  kvc_stateful_view_init(&v);
  BENCH_KVC(kvc_stateful_layer_view(s, layer, &v));
  return v;
}

void* dmalloc(size_t n) {
  void* p = nullptr;
  BENCH_CUDA(cudaMalloc(&p, n));
  return p;
}

// 1. Append against re-concatenation.
void bench_append(cudaStream_t stream) {
  std::printf("\n### 1. Append one token per row, 32 layers (8 kv heads x 128, bf16)\n\n");
  std::printf("| B | context | append us/step | re-concat us/step | speedup |\n|---|---|---|---|---|\n");
  for (uint32_t B : {1u, 8u}) {
    void* src = dmalloc(size_t(B) * kHkv * 16384 * kD * 2);
    fill_bf16(src, size_t(B) * kHkv * 16384 * kD, 3);
    for (uint32_t ctx : {1024u, 4096u, 16384u}) {
      kvc_stateful_t* s = make_stateful(B, kLayers, KVC_GROWTH_STAGGERED, 0);
      append_all(s, kLayers, ctx, src, stream);
      // In place: 128 steps, so each layer meets its growth about once.
      const double append = time_us(stream, 32, 4, [&] { append_all(s, kLayers, 1, src, stream); });
      // Re-concatenation: per layer, past (ctx positions of K and V) and the
      // new token copied into a fresh buffer of ctx + 1 positions.
      const size_t row = size_t(ctx) * kD * 2, row1 = row + kD * 2;
      void* fresh = dmalloc(2 * size_t(B) * kHkv * row1);
      const kvc_stateful_view_t v0 = view_of(s, 0);
      const double concat = time_us(stream, 4, 5, [&] {
        for (uint32_t l = 0; l < kLayers; ++l) {
          const kvc_stateful_view_t& v = v0;  // the same bytes for every layer
          BENCH_CUDA(cudaMemcpy2DAsync(fresh, row1, v.key, v.head_stride, row,
                                       2 * size_t(B) * kHkv, cudaMemcpyDeviceToDevice, stream));
          BENCH_CUDA(cudaMemcpy2DAsync(static_cast<char*>(fresh) + row, row1, src, kD * 2,
                                       kD * 2, 2 * size_t(B) * kHkv, cudaMemcpyDeviceToDevice,
                                       stream));
        }
      });
      std::printf("| %u | %u | %.1f | %.1f | %.1fx |\n", B, ctx, append, concat, concat / append);
      BENCH_CUDA(cudaFree(fresh));
      kvc_stateful_destroy(s);
    }
    BENCH_CUDA(cudaFree(src));
  }
}

// The baseline's gather: row b of dst gets row idx[b] of src, [0, len).
struct GatherRows {
  const uint4* src;
  uint4* dst;
  uint64_t row_stride16, head_stride16;  // in 16-byte units
  uint32_t heads, chunks;                // chunks of one head's [0, len) run
  int32_t idx[8];
};

__global__ void gather_rows_kernel(const __grid_constant__ GatherRows p) {
  const uint32_t b = blockIdx.z, kv = blockIdx.y / p.heads, h = blockIdx.y % p.heads;
  const uint64_t kvs = p.row_stride16 * gridDim.z;
  const uint4* s = p.src + kv * kvs + uint64_t(p.idx[b]) * p.row_stride16 + h * p.head_stride16;
  uint4* d = p.dst + kv * kvs + uint64_t(b) * p.row_stride16 + h * p.head_stride16;
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < p.chunks; i += gridDim.x * blockDim.x)
    d[i] = s[i];
}

struct Decoder {
  void* query;
  void* out;
  void* ws = nullptr;
  uint64_t ws_bytes = 0;
  void run(kvc_stateful_t* s, uint32_t layer, cudaStream_t stream) {
    kvc_stateful_decode_args_t a = KVC_STATEFUL_DECODE_ARGS_INIT;
    a.layer = layer;
    a.q_heads = kHq;
    a.q_dtype = KVC_DTYPE_BF16;
    a.query = query;
    a.out = out;
    a.max_seq_len = 16384 + 4096;
    uint64_t need = 0;
    BENCH_KVC(kvc_stateful_decode_workspace_size(s, &a, &need));
    if (need > ws_bytes) {  // sized for the largest batch seen
      if (ws != nullptr) BENCH_CUDA(cudaFree(ws));
      ws = dmalloc(need);
      ws_bytes = need;
    }
    a.workspace = ws;
    a.workspace_bytes = ws_bytes;
    BENCH_KVC(kvc_stateful_decode(s, &a, stream));
  }
  // The same call with the workspace as it is (no allocation: may be
  // captured in a graph); false on failure.
  bool try_run(kvc_stateful_t* s, uint32_t layer, cudaStream_t stream) {
    kvc_stateful_decode_args_t a = KVC_STATEFUL_DECODE_ARGS_INIT;
    a.layer = layer;
    a.q_heads = kHq;
    a.q_dtype = KVC_DTYPE_BF16;
    a.query = query;
    a.out = out;
    a.workspace = ws;
    a.workspace_bytes = ws_bytes;
    return kvc_stateful_decode(s, &a, stream) == KVC_OK;
  }
};

float elapsed_us(cudaEvent_t a, cudaEvent_t b) {
  float ms = 0;
  BENCH_CUDA(cudaEventElapsedTime(&ms, a, b));
  return 1000.0f * ms;
}

// Share of the K/V rows the step reads through the table: distinct
// (source row, position) pairs over all rows' positions (1: nothing shared).
double distinct_share(kvc_stateful_t* s, uint32_t B) {
  const kvc_stateful_view_t v = view_of(s, 0);
  if (v.beam_table == nullptr) return 1.0;
  std::vector<int32_t> table(size_t(B) * v.beam_table_stride), lens(B);
  BENCH_CUDA(cudaMemcpy(table.data(), v.beam_table, table.size() * 4, cudaMemcpyDeviceToHost));
  BENCH_CUDA(cudaMemcpy(lens.data(), v.lengths, B * 4, cudaMemcpyDeviceToHost));
  uint64_t all = 0, distinct = 0;
  const int32_t longest = *std::max_element(lens.begin(), lens.end());
  for (int32_t t = 0; t < longest; ++t) {
    uint64_t seen = 0;
    for (uint32_t b = 0; b < B; ++b)
      if (t < lens[b]) {
        ++all;
        seen |= 1ull << table[size_t(b) * v.beam_table_stride + t];
      }
    distinct += uint64_t(__builtin_popcountll(seen));
  }
  return double(distinct) / double(all);
}

// 2. Beam step: reorder + decode against gather + decode.
void bench_beam(cudaStream_t stream, Decoder& dec) {
  std::printf("\n### 2. Beam search step, 32 layers (32 q heads, 8 kv heads x 128, bf16)\n\n");
  std::printf("| beams | context | table: reorder + decode us | K/V read | gather + decode us |"
              " speedup | gather + concat + decode us | speedup |"
              " rotation: table us | K/V read | speedup |\n"
              "|---|---|---|---|---|---|---|---|---|---|---|\n");
  cudaEvent_t e0, e1;
  BENCH_CUDA(cudaEventCreate(&e0));
  BENCH_CUDA(cudaEventCreate(&e1));
  std::mt19937 rng(11);
  constexpr uint32_t steps = 12;
  // Reorder + 32 decodes through the table, timed; then the step's token.
  auto table_step = [&](kvc_stateful_t* t, const std::vector<int32_t>& idx, const void* src) {
    BENCH_CUDA(cudaEventRecord(e0, stream));
    BENCH_KVC(kvc_stateful_reorder(t, idx.data(), uint32_t(idx.size()), stream));
    for (uint32_t l = 0; l < kLayers; ++l) dec.run(t, l, stream);
    BENCH_CUDA(cudaEventRecord(e1, stream));
    BENCH_CUDA(cudaEventSynchronize(e1));
    const double us = elapsed_us(e0, e1);
    append_all(t, kLayers, 1, src, stream);
    return us;
  };
  for (uint32_t B : {4u, 8u}) {
    void* src = dmalloc(size_t(B) * kHkv * 16384 * kD * 2);
    fill_bf16(src, size_t(B) * kHkv * 16384 * kD, 5);
    for (uint32_t ctx : {2048u, 4096u, 8192u, 16384u}) {
      kvc_stateful_t* t = make_stateful(B, kLayers, KVC_GROWTH_STAGGERED, ctx + steps);
      kvc_stateful_t* a = make_stateful(B, kLayers, KVC_GROWTH_STAGGERED, ctx + steps);
      kvc_stateful_t* b = make_stateful(B, kLayers, KVC_GROWTH_STAGGERED, ctx + steps);
      for (kvc_stateful_t* s : {t, a, b}) append_all(s, kLayers, ctx, src, stream);
      double table_us = 0, gather_us = 0, concat_us = 0;
      // The seed's unfused graph also re-concatenates past + new after the
      // gather: timed apart, per layer, into one scratch buffer.
      const size_t crow = size_t(ctx + steps) * kD * 2;
      void* scratch = dmalloc(2 * size_t(B) * kHkv * crow);
      std::vector<int32_t> idx(B);
      for (uint32_t step = 0; step < steps; ++step) {
        const uint32_t survivors = 1 + rng() % (B / 2);
        for (uint32_t i = 0; i < B; ++i) idx[i] = int32_t(rng() % survivors);
        // Through the table.
        const double us = table_step(t, idx, src);
        if (step > 1) table_us += us;
        // Gather a -> b by beam_idx, then decode b.
        BENCH_CUDA(cudaEventRecord(e0, stream));
        const uint32_t len = ctx + step;
        for (uint32_t l = 0; l < kLayers; ++l) {
          const kvc_stateful_view_t va = view_of(a, l), vb = view_of(b, l);
          GatherRows g{};
          g.src = static_cast<const uint4*>(va.key);
          g.dst = static_cast<uint4*>(vb.key);
          g.row_stride16 = va.row_stride / 16;
          g.head_stride16 = va.head_stride / 16;
          g.heads = kHkv;
          g.chunks = uint32_t(uint64_t(len) * kD * 2 / 16);
          for (uint32_t i = 0; i < B; ++i) g.idx[i] = idx[i];
          gather_rows_kernel<<<dim3(8, 2 * kHkv, B), 256, 0, stream>>>(g);
          BENCH_CUDA(cudaGetLastError());
          dec.run(b, l, stream);
        }
        BENCH_CUDA(cudaEventRecord(e1, stream));
        BENCH_CUDA(cudaEventSynchronize(e1));
        if (step > 1) gather_us += elapsed_us(e0, e1);
        BENCH_CUDA(cudaEventRecord(e0, stream));
        for (uint32_t l = 0; l < kLayers; ++l) {
          const kvc_stateful_view_t vb = view_of(b, l);
          BENCH_CUDA(cudaMemcpy2DAsync(scratch, crow, vb.key, vb.head_stride,
                                       size_t(len) * kD * 2, 2 * size_t(B) * kHkv,
                                       cudaMemcpyDeviceToDevice, stream));
          BENCH_CUDA(cudaMemcpy2DAsync(static_cast<char*>(scratch) + size_t(len) * kD * 2, crow,
                                       src, kD * 2, kD * 2, 2 * size_t(B) * kHkv,
                                       cudaMemcpyDeviceToDevice, stream));
        }
        BENCH_CUDA(cudaEventRecord(e1, stream));
        BENCH_CUDA(cudaEventSynchronize(e1));
        if (step > 1) concat_us += elapsed_us(e0, e1);
        append_all(a, kLayers, 1, src, stream);
        append_all(b, kLayers, 1, src, stream);
        std::swap(a, b);
      }
      const double share = distinct_share(t, B);
      table_us /= steps - 2;
      gather_us /= steps - 2;
      concat_us /= steps - 2;
      BENCH_CUDA(cudaFree(scratch));
      for (kvc_stateful_t* s : {t, a, b}) kvc_stateful_destroy(s);
      // A rotation every step: no two beams share a position's K/V, so the
      // table step reads every row's history (the gather's cost is the same).
      kvc_stateful_t* u = make_stateful(B, kLayers, KVC_GROWTH_STAGGERED, ctx + steps);
      append_all(u, kLayers, ctx, src, stream);
      double rot_us = 0;
      for (uint32_t step = 0; step < steps; ++step) {
        for (uint32_t i = 0; i < B; ++i) idx[i] = int32_t((i + 1) % B);
        const double us = table_step(u, idx, src);
        if (step > 1) rot_us += us;
      }
      rot_us /= steps - 2;
      const double rot_share = distinct_share(u, B);
      kvc_stateful_destroy(u);
      std::printf("| %u | %u | %.0f | %.2f | %.0f | %.2fx | %.0f | %.2fx | %.0f | %.2f | %.2fx |\n",
                  B, ctx, table_us, share, gather_us, gather_us / table_us, gather_us + concat_us,
                  (gather_us + concat_us) / table_us, rot_us, rot_share, gather_us / rot_us);
    }
    BENCH_CUDA(cudaFree(src));
  }
}

// 3. Indirect decode against the paged decode kernel, same bytes.
//
// Each point is measured in `trials` rounds, each on freshly allocated
// caches (both sides), each round `pairs` alternating pairs of samples:
// indirect then paged, paged then indirect, ... One sample is `calls`
// back-to-back calls, per call, timed two ways: GPU time (the calls
// captured in a CUDA graph, the graph replayed: no host launch cost) and
// per host call (the calls issued one at a time from the host, events
// around them; also how long the host took to issue them). A point's ratio
// is the median of its pairs' ratios; min-max over all pairs and each
// round's median show the spread, so that no single noisy sample (or one
// unlucky allocation) decides a point.
struct DecodeOptions {
  uint32_t trials = 3, pairs = 7, calls = 10;
  uint32_t only_batch = 0, only_ctx = 0;  // 0: every point
  int only_layout = -1;                   // -1: both layouts
  uint32_t splits = 0;                    // indirect side only; 0: the planner
  uint32_t pad = 0;                       // extra tokens of stateful capacity
};

void bench_decode(cudaStream_t stream, Decoder& dec, const DecodeOptions& opt) {
  std::printf("\n### 3. Decode attention alone, one layer: indirect (beam table) vs paged\n\n");
  std::printf("Per point: %u rounds on fresh caches x %u alternating pairs of samples of %u calls;"
              " ratio = median of the pairs' paged / indirect%s%s\n",
              opt.trials, opt.pairs, opt.calls, opt.splits != 0 ? "; indirect splits forced" : "",
              opt.pad != 0 ? "; stateful capacity padded" : "");
  struct Row {
    uint32_t B, ctx;
    kvc_layout_t layout;
    Series gpu, host;
    bool graphs;
  };
  std::vector<Row> rows;
  for (uint32_t B : {4u, 8u})
   for (uint32_t ctx : {4096u, 16384u})
    for (kvc_layout_t layout : {KVC_LAYOUT_HND, KVC_LAYOUT_NHD}) {
      if ((opt.only_batch != 0 && B != opt.only_batch) || (opt.only_ctx != 0 && ctx != opt.only_ctx) ||
          (opt.only_layout >= 0 && int(layout) != opt.only_layout))
        continue;
      Row row{B, ctx, layout, {}, {}, true};
      for (uint32_t trial = 0; trial < opt.trials; ++trial) {
        // The stateful side, with a beam table (two reorders mix the rows).
        kvc_stateful_t* s = make_stateful(B, 1, KVC_GROWTH_STAGGERED, ctx + opt.pad, layout);
        void* src = dmalloc(size_t(B) * kHkv * ctx * kD * 2);
        fill_bf16(src, size_t(B) * kHkv * ctx * kD, 7 + trial);
        append_all(s, 1, ctx / 2, src, stream);
        std::vector<int32_t> idx(B);
        for (uint32_t i = 0; i < B; ++i) idx[i] = int32_t((i + 1) % B);
        BENCH_KVC(kvc_stateful_reorder(s, idx.data(), B, stream));
        append_all(s, 1, ctx - ctx / 2, src, stream);
        BENCH_KVC(kvc_stateful_reorder(s, idx.data(), B, stream));
        dec.run(s, 0, stream);  // sizes the workspace outside the capture
        auto indirect = [&]() -> bool {
          if (opt.splits != 0) kvc::set_decode_split_override(opt.splits);
          const bool ok = dec.try_run(s, 0, stream);
          if (opt.splits != 0) kvc::set_decode_split_override(0);
          return ok;
        };
        // The paged side: the same tokens in 16-token blocks in random places.
        kvc_cache_t* c = make_llama_cache(KVC_LAYOUT_HND, uint64_t(B) * ctx + 64);
        kvc_pool_desc_t pool = KVC_POOL_DESC_INIT;
        BENCH_KVC(kvc_cache_describe_pool(c, 0, &pool));
        fill_bf16(pool.base, pool.bytes / 2, 9 + trial);
        std::vector<int32_t> blocks(pool.num_blocks);
        std::iota(blocks.begin(), blocks.end(), 0);
        std::shuffle(blocks.begin(), blocks.end(), std::mt19937_64(3 + trial));
        const uint32_t stride = ctx / 16;
        std::vector<int32_t> table(blocks.begin(), blocks.begin() + size_t(B) * stride);
        std::vector<int32_t> lens(B, int32_t(ctx));
        void* dtable = dmalloc(table.size() * 4);
        void* dlens = dmalloc(lens.size() * 4);
        BENCH_CUDA(cudaMemcpy(dtable, table.data(), table.size() * 4, cudaMemcpyHostToDevice));
        BENCH_CUDA(cudaMemcpy(dlens, lens.data(), lens.size() * 4, cudaMemcpyHostToDevice));
        kvc_decode_args_t a = KVC_DECODE_ARGS_INIT;
        a.batch = B;
        a.q_heads = kHq;
        a.q_dtype = KVC_DTYPE_BF16;
        a.query = dec.query;
        a.out = dec.out;
        a.seq_lens = static_cast<const int32_t*>(dlens);
        a.block_table = static_cast<const int32_t*>(dtable);
        a.table_stride = stride;
        a.max_seq_len = ctx;
        uint64_t ws = 0;
        BENCH_KVC(kvc_decode_workspace_size(c, &a, &ws));
        void* dws = dmalloc(ws + 1);
        a.workspace = dws;
        a.workspace_bytes = ws;
        auto paged = [&]() -> bool { return kvc_decode_attention(c, &a, stream) == KVC_OK; };
        auto must = [](bool ok) {
          if (!ok) {
            std::fprintf(stderr, "bench_stateful: decode failed: %s\n", kvc_last_error_message());
            std::exit(1);
          }
        };
        for (int i = 0; i < 3; ++i) {
          must(indirect());
          must(paged());
        }
        cudaGraphExec_t gi = capture_calls(stream, opt.calls, indirect);
        cudaGraphExec_t gp = capture_calls(stream, opt.calls, paged);
        row.graphs = row.graphs && gi != nullptr && gp != nullptr;
        if (gi != nullptr && gp != nullptr) {  // warm both graphs
          BENCH_CUDA(cudaGraphLaunch(gi, stream));
          BENCH_CUDA(cudaGraphLaunch(gp, stream));
        }
        BENCH_CUDA(cudaStreamSynchronize(stream));
        for (uint32_t r = 0; r < opt.pairs; ++r) {
          const bool indirect_first = r % 2 == 0;
          Sample i, p;
          if (row.graphs) {
            for (int k = 0; k < 2; ++k) {
              if ((k == 0) == indirect_first) i.us = graph_sample(stream, opt.calls, gi);
              else p.us = graph_sample(stream, opt.calls, gp);
            }
            row.gpu.add(i, p);
          }
          for (int k = 0; k < 2; ++k) {
            if ((k == 0) == indirect_first) i = host_sample(stream, opt.calls, [&] { must(indirect()); });
            else p = host_sample(stream, opt.calls, [&] { must(paged()); });
          }
          row.host.add(i, p);
        }
        if (row.graphs) row.gpu.end_round();
        row.host.end_round();
        for (cudaGraphExec_t g : {gi, gp})
          if (g != nullptr) BENCH_CUDA(cudaGraphExecDestroy(g));
        for (void* ptr : {src, dtable, dlens, dws}) BENCH_CUDA(cudaFree(ptr));
        kvc_cache_destroy(c);
        kvc_stateful_destroy(s);
      }
      rows.push_back(std::move(row));
    }
  const char* head = " | paged / indirect | min-max of pairs | medians of rounds |";
  std::printf("\nGPU time (calls captured in a CUDA graph, replayed):\n\n"
              "| B | context | stateful layout | indirect us | paged (HND) us%s\n"
              "|---|---|---|---|---|---|---|---|\n", head);
  for (const Row& r : rows)
    std::printf("| %u | %u | %s | %s |\n", r.B, r.ctx, r.layout == KVC_LAYOUT_HND ? "HND" : "NHD",
                r.graphs ? r.gpu.cells().c_str() : "capture refused | | | |");
  std::printf("\nPer host call (issued one at a time; host issue cost per call beside):\n\n"
              "| B | context | stateful layout | indirect us | paged (HND) us%s"
              " issue us: indirect | paged |\n"
              "|---|---|---|---|---|---|---|---|---|---|\n", head);
  for (const Row& r : rows)
    std::printf("| %u | %u | %s | %s | %.1f | %.1f |\n", r.B, r.ctx,
                r.layout == KVC_LAYOUT_HND ? "HND" : "NHD", r.host.cells().c_str(),
                median_of(r.host.issue_indirect), median_of(r.host.issue_paged));
  size_t gpu_met = 0, host_met = 0, gpu_rows = 0;
  for (const Row& r : rows) {
    if (r.graphs) {
      ++gpu_rows;
      gpu_met += median_of(r.gpu.ratio) >= 0.9 ? 1 : 0;
    }
    host_met += median_of(r.host.ratio) >= 0.9 ? 1 : 0;
  }
  std::printf("\nTarget paged / indirect >= 0.9x (median of pairs): GPU time %zu of %zu points,"
              " per host call %zu of %zu points\n",
              gpu_met, gpu_rows, host_met, rows.size());
}

// 4. Memory over a 4K-token generation.
struct GrowthEvent {
  uint32_t step;  // 0: the prompt
  uint32_t layer;
  uint64_t bytes;
};

size_t free_now() {
  size_t f = 0, t = 0;
  BENCH_CUDA(cudaMemGetInfo(&f, &t));
  return f;
}

// The growths of one generation replayed through a stream-ordered pool,
// trimmed before each allocation and the stream synchronized every step
// (what CudaDevice::allocate_on did before growth_memory.h): the device
// memory and the pool's reserved memory at their peaks, each over the
// final live bytes.
void replay_pool(const std::vector<GrowthEvent>& events, cudaStream_t stream, double* device,
                 double* reserved) {
  cudaMemPool_t pool;
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = 0;
  BENCH_CUDA(cudaMemPoolCreate(&pool, &props));
  std::vector<void*> buf(kLayers, nullptr);
  std::vector<uint64_t> size(kLayers, 0);
  BENCH_CUDA(cudaDeviceSynchronize());
  const size_t free0 = free_now();
  size_t low = free0;
  uint64_t high = 0;
  uint32_t step = 0;
  for (const GrowthEvent& e : events) {
    if (e.step != step) {
      BENCH_CUDA(cudaStreamSynchronize(stream));
      step = e.step;
    }
    BENCH_CUDA(cudaMemPoolTrimTo(pool, 0));
    void* p = nullptr;
    BENCH_CUDA(cudaMallocFromPoolAsync(&p, e.bytes, pool, stream));
    if (buf[e.layer] != nullptr) {
      BENCH_CUDA(cudaMemcpyAsync(p, buf[e.layer], size[e.layer], cudaMemcpyDeviceToDevice, stream));
      BENCH_CUDA(cudaFreeAsync(buf[e.layer], stream));
    }
    buf[e.layer] = p;
    size[e.layer] = e.bytes;
    low = std::min(low, free_now());
    uint64_t r = 0;
    BENCH_CUDA(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &r));
    high = std::max(high, r);
  }
  BENCH_CUDA(cudaStreamSynchronize(stream));
  uint64_t live = 0;
  for (uint64_t b : size) live += b;
  *device = double(free0 - low) / double(live);
  *reserved = double(high) / double(live);
  for (void* p : buf) BENCH_CUDA(cudaFreeAsync(p, stream));
  BENCH_CUDA(cudaStreamSynchronize(stream));
  BENCH_CUDA(cudaMemPoolDestroy(pool));
}

void bench_memory(cudaStream_t stream) {
  std::printf("\n### 4. Memory over a 4K-token generation (B = 1, 32 layers, 128-token prompt, "
              "growth step 128)\n\n");
  std::printf("| policy | final bytes | peak live / final | device memory peak / final |"
              " device memory at the end / final | growths | most growths in one step |"
              " pool replay: device peak / final | pool reserved peak / final |\n"
              "|---|---|---|---|---|---|---|---|---|\n");
  void* src = dmalloc(size_t(kHkv) * 128 * kD * 2);
  fill_bf16(src, size_t(kHkv) * 128 * kD, 13);
  {
    // Warm-up: the library's kernels load (and take device memory) at their
    // first use, which the first policy's figures would otherwise count.
    kvc_stateful_t* w = make_stateful(1, kLayers, KVC_GROWTH_STAGGERED, 0);
    for (int i = 0; i < 3; ++i) append_all(w, kLayers, 128, src, stream);
    BENCH_CUDA(cudaStreamSynchronize(stream));
    kvc_stateful_destroy(w);
  }
  for (kvc_growth_policy_t policy : {KVC_GROWTH_STAGGERED, KVC_GROWTH_UNIFORM}) {
    BENCH_CUDA(cudaDeviceSynchronize());
    const size_t free0 = free_now();
    size_t low = free0;
    kvc_stateful_t* s = make_stateful(1, kLayers, policy, 0);
    append_all(s, kLayers, 128, src, stream);
    std::vector<GrowthEvent> events;
    std::vector<uint64_t> bytes(kLayers, 0);
    auto note_growths = [&](uint32_t step) {
      for (uint32_t l = 0; l < kLayers; ++l) {
        kvc_stateful_layer_stats_t ls;
        kvc_stateful_layer_stats_init(&ls);
        BENCH_KVC(kvc_stateful_get_layer_stats(s, l, &ls));
        if (ls.bytes != bytes[l]) events.push_back(GrowthEvent{step, l, ls.bytes});
        bytes[l] = ls.bytes;
      }
    };
    note_growths(0);
    uint64_t before = 0, most = 0;
    for (uint32_t t = 0; t < 4096; ++t) {
      // Device memory in use is sampled after every layer's append.
      for (uint32_t l = 0; l < kLayers; ++l) {
        kvc_stateful_append_args_t a = KVC_STATEFUL_APPEND_ARGS_INIT;
        a.layer = l;
        a.num_tokens = 1;
        a.src_dtype = KVC_DTYPE_BF16;
        a.key = src;
        a.value = src;
        BENCH_KVC(kvc_stateful_append(s, &a, stream));
        low = std::min(low, free_now());
      }
      BENCH_CUDA(cudaStreamSynchronize(stream));  // a decode loop samples each step
      note_growths(t + 1);
      kvc_stateful_stats_t st;
      kvc_stateful_stats_init(&st);
      BENCH_KVC(kvc_stateful_get_stats(s, &st));
      most = std::max<uint64_t>(most, st.reallocations - before);
      before = st.reallocations;
    }
    const size_t free_end = free_now();
    kvc_stateful_stats_t st;
    kvc_stateful_stats_init(&st);
    BENCH_KVC(kvc_stateful_get_stats(s, &st));
    kvc_stateful_destroy(s);
    double pool_device = 0, pool_reserved = 0;
    replay_pool(events, stream, &pool_device, &pool_reserved);
    const double fin = double(st.bytes_allocated);
    std::printf("| %s | %llu | %.3f | %.3f | %.3f | %llu | %llu | %.3f | %.3f |\n",
                policy == KVC_GROWTH_STAGGERED ? "staggered" : "uniform",
                (unsigned long long)st.bytes_allocated, double(st.peak_bytes) / fin,
                double(free0 - low) / fin, double(free0 - free_end) / fin,
                (unsigned long long)st.reallocations, (unsigned long long)most, pool_device,
                pool_reserved);
  }
  BENCH_CUDA(cudaFree(src));
}

}  // namespace

int main(int argc, char** argv) {
  // usage: bench_stateful [all|memory|beam|decode|append] [KEY=VALUE ...]
  //   wave=PERCENT   stateful decode planned for PERCENT of the resident blocks
  //   part 3 (decode): trials=N pairs=N calls=N B=N ctx=N layout=hnd|nhd
  //   splits=N (the indirect side's chunks forced) pad=N (stateful capacity + N tokens)
  std::string only = argc > 1 ? argv[1] : "all";
  DecodeOptions dopt;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    const std::string key = arg.substr(0, eq), val = eq == std::string::npos ? "" : arg.substr(eq + 1);
    const uint32_t n = uint32_t(std::atoi(val.c_str()));
    if (key == "wave") {
      kvc::set_stateful_decode_wave_percent(n);
      std::printf("stateful decode planned for %u%% of the resident blocks\n", n);
    } else if (key == "trials" && n > 0) {
      dopt.trials = n;
    } else if (key == "pairs" && n > 0) {
      dopt.pairs = n;
    } else if (key == "calls" && n > 0) {
      dopt.calls = n;
    } else if (key == "B") {
      dopt.only_batch = n;
    } else if (key == "ctx") {
      dopt.only_ctx = n;
    } else if (key == "layout" && (val == "hnd" || val == "nhd")) {
      dopt.only_layout = val == "hnd" ? int(KVC_LAYOUT_HND) : int(KVC_LAYOUT_NHD);
    } else if (key == "splits") {
      dopt.splits = n;
    } else if (key == "pad") {
      dopt.pad = n;
    } else {
      std::fprintf(stderr, "bench_stateful: unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  cudaStream_t stream;
  BENCH_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::printf("device: %s; 1 GiB device-to-device copy: %.0f GB/s (read + write)\n", device_name(),
              copy_bandwidth_gbs(stream, size_t(1) << 30));
  Decoder dec;
  dec.query = dmalloc(size_t(8) * kHq * kD * 2);
  dec.out = dmalloc(size_t(8) * kHq * kD * 2);
  fill_bf16(dec.query, size_t(8) * kHq * kD, 17);
  // The parts with targets first; when each starts goes to stderr.
  const auto t0 = std::chrono::steady_clock::now();
  auto started = [&](const char* part) {
    std::fflush(stdout);
    std::fprintf(stderr, "[%.1f s] %s\n",
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), part);
  };
  if (only == "all" || only == "memory") started("memory"), bench_memory(stream);
  if (only == "all" || only == "beam") started("beam"), bench_beam(stream, dec);
  if (only == "all" || only == "decode") started("decode"), bench_decode(stream, dec, dopt);
  if (only == "all" || only == "append") started("append"), bench_append(stream);
  started("end");
  return 0;
}
