// The stateful mode on CUDA against the CPU backend: two stateful caches of
// one geometry (CPU and cuda:0) driven by the same calls and inputs. Append
// across growth boundaries, trim, reorder and compaction must leave the
// same bytes (K/V read through the beam table, the table, the lengths)
// bit for bit; the indirect decode must match the CPU's (which equals
// gather-then-decode bit for bit, tests/cpp) within the decode tests'
// ||gpu - cpu|| / ||cpu|| < 1e-2, never NaN; decode after compaction must
// equal decode through the table bit for bit; exports must be equal bytes.
// Skips with the reason when no CUDA device is usable.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/numeric.h"
#include "kvcache/kvcache.h"

namespace {

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call
#define KVC_OK_(call) ASSERT_EQ((call), KVC_OK) << #call << ": " << kvc_last_error_message()

size_t esize(kvc_dtype_t d) { return d == KVC_DTYPE_F32 ? 4 : d == KVC_DTYPE_FP8_E4M3 ? 1 : 2; }

struct Dev {
  void* p = nullptr;
  explicit Dev(size_t n) { cudaMalloc(&p, n == 0 ? 1 : n); }
  Dev(const std::vector<unsigned char>& h) : Dev(h.size()) {
    cudaMemcpy(p, h.data(), h.size(), cudaMemcpyHostToDevice);
  }
  ~Dev() { cudaFree(p); }
};

struct Geometry {
  kvc_dtype_t dtype = KVC_DTYPE_BF16;
  kvc_layout_t layout = KVC_LAYOUT_HND;
  uint32_t layers = 2, kv_heads = 2, head_dim = 128, kv_factor = 2, batch = 4, step = 16;
};

kvc_stateful_t* make(const Geometry& g, kvc_device_kind_t kind) {
  kvc_config_t* c = nullptr;
  kvc_config_create(&c);
  kvc_config_set_num_layers(c, g.layers);
  kvc_config_set_kv_heads(c, g.kv_heads);
  kvc_config_set_head_dim(c, g.head_dim);
  kvc_config_set_dtype(c, g.dtype);
  kvc_config_set_kv_factor(c, g.kv_factor);
  kvc_config_set_device(c, kind, 0);
  kvc_stateful_options_t o = KVC_STATEFUL_OPTIONS_INIT;
  o.batch = g.batch;
  o.layout = g.layout;
  o.growth_step = g.step;
  kvc_stateful_t* s = nullptr;
  const kvc_status_t st = kvc_stateful_create(c, &o, &s);
  kvc_config_destroy(c);
  EXPECT_EQ(st, KVC_OK) << kvc_last_error_message();
  return s;
}

class StatefulGpu : public ::testing::Test {
 public:
  void SetUp() override {
    if ((kvc_features() & KVC_FEATURE_CUDA_DEVICE) == 0)
      GTEST_SKIP() << "no usable CUDA device (kvc_features() = " << kvc_features() << ")";
    CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  }
  void TearDown() override {
    kvc_stateful_destroy(cpu);
    kvc_stateful_destroy(gpu);
    if (stream != nullptr) cudaStreamDestroy(stream);
  }

  void open(const Geometry& geo) {
    g = geo;
    cpu = make(g, KVC_DEVICE_CPU);
    gpu = make(g, KVC_DEVICE_CUDA);
    ASSERT_NE(cpu, nullptr);
    ASSERT_NE(gpu, nullptr);
  }

  std::vector<unsigned char> random(kvc_dtype_t d, size_t n, float range) {
    std::uniform_real_distribution<float> u(-range, range);
    std::vector<unsigned char> out(n * esize(d));
    for (size_t i = 0; i < n; ++i) kvc::store_f32(out.data(), d, i, u(rng));
    return out;
  }

  // The same append on both caches; the GPU reads device copies.
  void append(uint32_t layer, uint32_t n, kvc_dtype_t src, const std::vector<uint32_t>* rows) {
    const size_t elems = size_t(g.batch) * g.kv_heads * n * g.head_dim;
    const auto k = random(src, elems, 2.0f), v = random(src, elems, 2.0f);
    Dev dk(k), dv(v);
    kvc_stateful_append_args_t a = KVC_STATEFUL_APPEND_ARGS_INIT;
    a.layer = layer;
    a.num_tokens = n;
    a.src_dtype = src;
    a.row_tokens = rows != nullptr ? rows->data() : nullptr;
    a.k_scale = 0.5f;
    a.v_scale = 0.25f;
    a.key = k.data();
    a.value = g.kv_factor == 2 ? v.data() : nullptr;
    KVC_OK_(kvc_stateful_append(cpu, &a, nullptr));
    a.key = dk.p;
    a.value = g.kv_factor == 2 ? dv.p : nullptr;
    KVC_OK_(kvc_stateful_append(gpu, &a, stream));
    CUDA_OK(cudaStreamSynchronize(stream));  // the inputs are freed next
  }

  // Every row's K/V (through the table), the lengths and the table rows.
  void expect_equal(const std::string& what) {
    CUDA_OK(cudaStreamSynchronize(stream));
    for (uint32_t l = 0; l < g.layers; ++l) {
      kvc_stateful_view_t vc, vg;
      kvc_stateful_view_init(&vc);
      kvc_stateful_view_init(&vg);
      KVC_OK_(kvc_stateful_layer_view(cpu, l, &vc));
      KVC_OK_(kvc_stateful_layer_view(gpu, l, &vg));
      ASSERT_EQ(vc.capacity, vg.capacity) << what;
      ASSERT_EQ(vc.beam_table == nullptr, vg.beam_table == nullptr) << what;
      std::vector<int32_t> lens(g.batch);
      CUDA_OK(cudaMemcpy(lens.data(), vg.lengths, 4 * g.batch, cudaMemcpyDeviceToHost));
      std::vector<unsigned char> buf(vg.row_stride * g.batch * g.kv_factor);
      std::vector<int32_t> table(vg.beam_table ? size_t(g.batch) * vg.beam_table_stride : 0);
      if (vg.capacity > 0)
        CUDA_OK(cudaMemcpy(buf.data(), vg.key, buf.size(), cudaMemcpyDeviceToHost));
      if (!table.empty())
        CUDA_OK(cudaMemcpy(table.data(), vg.beam_table, 4 * table.size(), cudaMemcpyDeviceToHost));
      const uint64_t row = uint64_t(g.head_dim) * esize(g.dtype);
      for (uint32_t r = 0; r < g.batch; ++r) {
        ASSERT_EQ(lens[r], vc.lengths[r]) << what << " layer " << l << " row " << r;
        for (int32_t t = 0; t < lens[r]; ++t) {
          const int32_t sc = vc.beam_table ? vc.beam_table[r * vc.beam_table_stride + t] : int32_t(r);
          const int32_t sg = vg.beam_table ? table[r * vg.beam_table_stride + t] : int32_t(r);
          ASSERT_EQ(sc, sg) << what << " table row " << r << " position " << t;
          for (uint32_t k = 0; k < g.kv_factor; ++k)
            for (uint32_t h = 0; h < g.kv_heads; ++h) {
              const uint64_t off = sc * vc.row_stride + h * vc.head_stride + t * vc.token_stride;
              const auto* c = static_cast<const unsigned char*>(k == 0 ? vc.key : vc.value) + off;
              const unsigned char* d = buf.data() + k * vg.row_stride * g.batch + off;
              ASSERT_EQ(std::memcmp(c, d, row), 0)
                  << what << ": layer " << l << " row " << r << " kv " << k << " head " << h
                  << " position " << t;
            }
        }
      }
    }
  }

  // Decode of one layer on both; returns the GPU output as f32 after
  // checking it against the CPU's.
  std::vector<float> decode(uint32_t layer, uint32_t q_heads, kvc_dtype_t q_dtype) {
    const size_t n = size_t(g.batch) * q_heads * g.head_dim;
    const auto q = random(q_dtype, n, 1.0f);
    std::vector<unsigned char> ref(q.size()), got(q.size());
    Dev dq(q), dout(q.size());
    kvc_stateful_decode_args_t a = KVC_STATEFUL_DECODE_ARGS_INIT;
    a.layer = layer;
    a.q_heads = q_heads;
    a.q_dtype = q_dtype;
    a.k_scale = 0.5f;
    a.v_scale = 0.25f;
    a.query = q.data();
    a.out = ref.data();
    EXPECT_EQ(kvc_stateful_decode(cpu, &a, nullptr), KVC_OK) << kvc_last_error_message();
    a.query = dq.p;
    a.out = dout.p;
    uint64_t ws = 0;
    EXPECT_EQ(kvc_stateful_decode_workspace_size(gpu, &a, &ws), KVC_OK) << kvc_last_error_message();
    Dev dws(ws);
    a.workspace = dws.p;
    a.workspace_bytes = ws;
    cudaMemsetAsync(dout.p, 0xFF, q.size(), stream);  // NaN: every element must be written
    EXPECT_EQ(kvc_stateful_decode(gpu, &a, stream), KVC_OK) << kvc_last_error_message();
    kvc_status_t async = -1;
    EXPECT_EQ(kvc_stateful_get_async_error(gpu, stream, &async), KVC_OK);
    EXPECT_EQ(async, KVC_OK) << kvc_last_error_message();
    cudaMemcpy(got.data(), dout.p, got.size(), cudaMemcpyDeviceToHost);
    std::vector<float> out(n);
    double num = 0, den = 0;
    bool nan = false;
    for (size_t i = 0; i < n; ++i) {
      out[i] = kvc::load_f32(got.data(), q_dtype, i);
      const float w = kvc::load_f32(ref.data(), q_dtype, i);
      nan = nan || !std::isfinite(out[i]);
      num += double(out[i] - w) * (out[i] - w);
      den += double(w) * w;
    }
    EXPECT_FALSE(nan) << "an output element is NaN or was not written";
    EXPECT_LT(std::sqrt(num / std::max(den, 1e-30)), 1e-2) << "relative error, layer " << layer;
    return out;
  }

  Geometry g;
  kvc_stateful_t* cpu = nullptr;
  kvc_stateful_t* gpu = nullptr;
  cudaStream_t stream = nullptr;
  std::mt19937_64 rng{12345};
};

TEST_F(StatefulGpu, AppendAcrossGrowthTrimAndExportMatchTheCpu) {
  struct Case {
    kvc_dtype_t dtype, src;
    kvc_layout_t layout;
    uint32_t kv_factor;
  };
  for (const Case c : {Case{KVC_DTYPE_BF16, KVC_DTYPE_BF16, KVC_LAYOUT_HND, 2},
                       Case{KVC_DTYPE_F16, KVC_DTYPE_F16, KVC_LAYOUT_NHD, 1},
                       Case{KVC_DTYPE_FP8_E4M3, KVC_DTYPE_BF16, KVC_LAYOUT_HND, 2},
                       Case{KVC_DTYPE_FP8_E4M3, KVC_DTYPE_F32, KVC_LAYOUT_NHD, 2}}) {
    SCOPED_TRACE(std::to_string(c.dtype) + "/" + std::to_string(c.src) + " layout " +
                 std::to_string(c.layout) + " kvf " + std::to_string(c.kv_factor));
    kvc_stateful_destroy(cpu);
    kvc_stateful_destroy(gpu);
    Geometry geo;
    geo.dtype = c.dtype;
    geo.layout = c.layout;
    geo.kv_factor = c.kv_factor;
    geo.head_dim = 64;
    geo.batch = 3;
    geo.step = 8;
    open(geo);
    if (HasFatalFailure()) return;
    std::vector<uint32_t> rows(g.batch);
    for (int s = 0; s < 12; ++s) {
      // One step: every layer gets the same counts (trim and export need
      // the layers level), rows differ.
      const uint32_t n = 1 + uint32_t(rng() % 6);
      for (uint32_t& r : rows) r = uint32_t(rng() % (n + 1));
      for (uint32_t l = 0; l < g.layers; ++l) {
        append(l, n, c.src, s % 2 == 0 ? nullptr : &rows);
        if (HasFatalFailure()) return;
      }
    }
    expect_equal("after appends");
    KVC_OK_(kvc_stateful_trim(cpu, 1, 2, nullptr));
    KVC_OK_(kvc_stateful_trim(gpu, 1, 2, stream));
    for (uint32_t l = 0; l < g.layers; ++l) append(l, 3, c.src, nullptr);
    expect_equal("after trim and append");
    uint64_t size = 0;
    ASSERT_EQ(kvc_stateful_export_row(cpu, 1, nullptr, 0, &size, nullptr), KVC_ERR_BUFFER_TOO_SMALL);
    std::vector<unsigned char> a(size), b(size);
    KVC_OK_(kvc_stateful_export_row(cpu, 1, a.data(), size, &size, nullptr));
    KVC_OK_(kvc_stateful_export_row(gpu, 1, b.data(), size, &size, stream));
    ASSERT_EQ(a, b) << "exported states differ";
    KVC_OK_(kvc_stateful_import_row(cpu, 0, a.data(), size, nullptr));
    KVC_OK_(kvc_stateful_import_row(gpu, 0, b.data(), size, stream));
    expect_equal("after import");
  }
}

struct BeamCase {
  uint32_t width, head_dim, kv_heads, q_heads;
  kvc_dtype_t dtype, q_dtype;
  kvc_layout_t layout;
};

class StatefulGpuBeams : public StatefulGpu, public ::testing::WithParamInterface<BeamCase> {};

TEST_P(StatefulGpuBeams, IndirectDecodeMatchesTheCpuOver200Steps) {
  const BeamCase c = GetParam();
  Geometry geo;
  geo.dtype = c.dtype;
  geo.layout = c.layout;
  geo.head_dim = c.head_dim;
  geo.kv_heads = c.kv_heads;
  geo.batch = c.width;
  geo.step = 32;
  open(geo);
  if (HasFatalFailure()) return;
  const kvc_dtype_t src = c.dtype == KVC_DTYPE_FP8_E4M3 ? KVC_DTYPE_BF16 : c.dtype;
  for (uint32_t l = 0; l < g.layers; ++l) append(l, 9, src, nullptr);  // the prompt
  std::vector<int32_t> idx(g.batch);
  std::vector<float> last;
  for (int s = 0; s < 200; ++s) {
    const uint32_t survivors = 1 + uint32_t(rng() % g.batch);
    for (uint32_t b = 0; b < g.batch; ++b) idx[b] = s % 13 == 0 ? int32_t(b) : int32_t(rng() % survivors);
    KVC_OK_(kvc_stateful_reorder(cpu, idx.data(), g.batch, nullptr));
    KVC_OK_(kvc_stateful_reorder(gpu, idx.data(), g.batch, stream));
    for (uint32_t l = 0; l < g.layers; ++l) append(l, 1, src, nullptr);
    if (HasFatalFailure()) return;
    last = decode(uint32_t(s) % g.layers, c.q_heads, c.q_dtype);
    if (s % 50 == 49) expect_equal("step " + std::to_string(s));
    if (HasFatalFailure()) return;
  }
  // Compaction: the same bytes, no table, and the decode unchanged bit for bit.
  const size_t n = size_t(g.batch) * c.q_heads * g.head_dim;
  const auto q = random(c.q_dtype, n, 1.0f);
  Dev dq(q), dout(q.size());
  auto run = [&] {
    kvc_stateful_decode_args_t a = KVC_STATEFUL_DECODE_ARGS_INIT;
    a.layer = 0;
    a.q_heads = c.q_heads;
    a.q_dtype = c.q_dtype;
    a.k_scale = 0.5f;
    a.v_scale = 0.25f;
    a.query = dq.p;
    a.out = dout.p;
    uint64_t ws = 0;
    EXPECT_EQ(kvc_stateful_decode_workspace_size(gpu, &a, &ws), KVC_OK);
    Dev dws(ws);
    a.workspace = dws.p;
    a.workspace_bytes = ws;
    EXPECT_EQ(kvc_stateful_decode(gpu, &a, stream), KVC_OK) << kvc_last_error_message();
    std::vector<unsigned char> out(q.size());
    cudaStreamSynchronize(stream);
    cudaMemcpy(out.data(), dout.p, out.size(), cudaMemcpyDeviceToHost);
    return out;
  };
  const auto through_table = run();
  KVC_OK_(kvc_stateful_compact(cpu, nullptr));
  KVC_OK_(kvc_stateful_compact(gpu, stream));
  expect_equal("after compaction");
  EXPECT_EQ(run(), through_table) << "decode after compaction differs from decode through the table";
  // Both backends did the same work by the books.
  kvc_stateful_stats_t sc, sg;
  kvc_stateful_stats_init(&sc);
  kvc_stateful_stats_init(&sg);
  KVC_OK_(kvc_stateful_get_stats(cpu, &sc));
  KVC_OK_(kvc_stateful_get_stats(gpu, &sg));
  EXPECT_EQ(sc.reorders, sg.reorders);
  EXPECT_EQ(sc.table_entries_copied, sg.table_entries_copied);
  EXPECT_EQ(sc.reallocations, sg.reallocations);
  EXPECT_EQ(sc.peak_bytes, sg.peak_bytes);
  (void)last;
}

// Long rows of different lengths whose table rows agree over parts of
// their history: the CUDA decode serves rows that read the same K/V over a
// chunk from one thread block (batches up to 16 rows; 20 rows read alone),
// and each row must still match the CPU, and equal bit for bit its decode
// after compaction. GQA groups of 4, 3 and 32 (two blocks per row). With
// 8 kv heads the launches without sharing take more blocks than an H100
// has SMs (the two-blocks-per-SM kernel), those with sharing fewer (the
// deep-pipeline one): the compaction check compares the two.
TEST_F(StatefulGpu, SharedHistoryAcrossChunksMatchesTheCpu) {
  struct Case {
    uint32_t batch, kv_heads, q_heads, head_dim;
    kvc_dtype_t dtype, q_dtype;
    kvc_layout_t layout;
  };
  for (const Case c : {Case{4, 2, 8, 128, KVC_DTYPE_BF16, KVC_DTYPE_BF16, KVC_LAYOUT_HND},
                       Case{5, 8, 24, 128, KVC_DTYPE_FP8_E4M3, KVC_DTYPE_BF16, KVC_LAYOUT_HND},
                       Case{6, 1, 32, 64, KVC_DTYPE_F16, KVC_DTYPE_F16, KVC_LAYOUT_NHD},
                       Case{20, 8, 32, 64, KVC_DTYPE_BF16, KVC_DTYPE_BF16, KVC_LAYOUT_HND}}) {
    SCOPED_TRACE("batch " + std::to_string(c.batch) + ", " + std::to_string(c.q_heads) + "/" +
                 std::to_string(c.kv_heads) + " heads of " + std::to_string(c.head_dim));
    kvc_stateful_destroy(cpu);
    kvc_stateful_destroy(gpu);
    Geometry geo;
    geo.dtype = c.dtype;
    geo.layout = c.layout;
    geo.head_dim = c.head_dim;
    geo.kv_heads = c.kv_heads;
    geo.batch = c.batch;
    geo.step = 128;
    open(geo);
    if (HasFatalFailure()) return;
    const kvc_dtype_t src = c.dtype == KVC_DTYPE_FP8_E4M3 ? KVC_DTYPE_BF16 : c.dtype;
    std::vector<uint32_t> rows(g.batch);
    std::vector<int32_t> idx(g.batch);
    auto reorder = [&](auto pick) {
      for (uint32_t b = 0; b < g.batch; ++b) idx[b] = int32_t(pick(b));
      KVC_OK_(kvc_stateful_reorder(cpu, idx.data(), g.batch, nullptr));
      KVC_OK_(kvc_stateful_reorder(gpu, idx.data(), g.batch, stream));
    };
    // A prompt of a different length per row, then reorders around a long
    // append: rows of two lengths whose histories agree over some chunks,
    // part of a chunk or none. (No append after the second reorder: a row
    // would write positions that a longer row reads.)
    for (uint32_t b = 0; b < g.batch; ++b) rows[b] = 600 - 37 * (b % 7);
    for (uint32_t l = 0; l < g.layers; ++l) append(l, 600, src, &rows);
    if (HasFatalFailure()) return;
    reorder([&](uint32_t b) { return b % 2; });
    for (uint32_t l = 0; l < g.layers; ++l) append(l, 700, src, nullptr);
    if (HasFatalFailure()) return;
    reorder([&](uint32_t b) { return b / 2; });
    for (uint32_t l = 0; l < g.layers; ++l) decode(l, c.q_heads, c.q_dtype);
    if (HasFatalFailure()) return;
    reorder([&](uint32_t b) { return (b + 1) % 3 == 0 ? b - 1 : b; });
    for (uint32_t l = 0; l < g.layers; ++l) decode(l, c.q_heads, c.q_dtype);
    if (HasFatalFailure()) return;
    expect_equal("after the reorders");
    // Through the table and after compaction: the same bits.
    const size_t n = size_t(g.batch) * c.q_heads * g.head_dim;
    const auto q = random(c.q_dtype, n, 1.0f);
    Dev dq(q), dout(q.size());
    auto run = [&] {
      kvc_stateful_decode_args_t a = KVC_STATEFUL_DECODE_ARGS_INIT;
      a.layer = 1;
      a.q_heads = c.q_heads;
      a.q_dtype = c.q_dtype;
      a.k_scale = 0.5f;
      a.v_scale = 0.25f;
      a.query = dq.p;
      a.out = dout.p;
      uint64_t ws = 0;
      EXPECT_EQ(kvc_stateful_decode_workspace_size(gpu, &a, &ws), KVC_OK);
      Dev dws(ws);
      a.workspace = dws.p;
      a.workspace_bytes = ws;
      EXPECT_EQ(kvc_stateful_decode(gpu, &a, stream), KVC_OK) << kvc_last_error_message();
      std::vector<unsigned char> out(q.size());
      cudaStreamSynchronize(stream);
      cudaMemcpy(out.data(), dout.p, out.size(), cudaMemcpyDeviceToHost);
      return out;
    };
    const auto through_table = run();
    KVC_OK_(kvc_stateful_compact(cpu, nullptr));
    KVC_OK_(kvc_stateful_compact(gpu, stream));
    EXPECT_EQ(run(), through_table) << "decode after compaction differs from decode through the table";
    for (uint32_t l = 0; l < g.layers; ++l) decode(l, c.q_heads, c.q_dtype);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, StatefulGpuBeams,
    ::testing::Values(
        BeamCase{4, 128, 2, 8, KVC_DTYPE_BF16, KVC_DTYPE_BF16, KVC_LAYOUT_HND},   // GQA
        BeamCase{8, 64, 1, 4, KVC_DTYPE_F16, KVC_DTYPE_F16, KVC_LAYOUT_NHD},      // MQA
        BeamCase{4, 256, 2, 4, KVC_DTYPE_FP8_E4M3, KVC_DTYPE_BF16, KVC_LAYOUT_HND},
        BeamCase{8, 128, 4, 4, KVC_DTYPE_BF16, KVC_DTYPE_BF16, KVC_LAYOUT_NHD}));

}  // namespace
