// CUDA paged prefill attention against the CPU reference kernel: the same
// cache shape on both backends, the same pool bytes (random K/V in every
// token the sequences hold, poison elsewhere, so a wrong block or token
// read shows as NaN), outputs poisoned with NaN before the call so every
// element is checked written. Output within ||gpu - cpu|| / ||cpu|| < 1e-2
// (P is rounded to 16 bits for the second product), log-sum-exp within
// 1e-2. Errors found on the device come back through
// kvc_cache_get_async_error(). Skips with the reason when no CUDA device is
// usable.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <string>

#include "../cpp/prefill_case.h"
#include "cuda/prefill_plan.h"

namespace {

using prefill_case::Inputs;
using prefill_case::Spec;

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call

struct Buf {
  void* ptr = nullptr;
  size_t bytes = 0;
  explicit Buf(size_t n) : bytes(n) {
    if (n != 0 && cudaMalloc(&ptr, n) != cudaSuccess) ptr = nullptr;
  }
  Buf(const void* host, size_t n) : Buf(n) {
    if (ptr != nullptr) cudaMemcpy(ptr, host, n, cudaMemcpyHostToDevice);
  }
  ~Buf() { cudaFree(ptr); }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
  template <class T>
  T* as() const { return static_cast<T*>(ptr); }
};

class PrefillGpu : public ::testing::Test {
 public:
  void SetUp() override {
    if ((kvc_features() & KVC_FEATURE_CUDA_DEVICE) == 0)
      GTEST_SKIP() << "no usable CUDA device (kvc_features() = " << kvc_features() << ")";
  }

  void expect_no_async_error(kvc_cache_t* cache, cudaStream_t stream) {
    kvc_status_t async = -1;
    ASSERT_EQ(kvc_cache_get_async_error(cache, stream, &async), KVC_OK) << kvc_last_error_message();
    EXPECT_EQ(async, KVC_OK) << kvc_last_error_message();
  }

  // Runs `s` on both backends with both table formats and compares.
  void run(const Spec& s) {
    SCOPED_TRACE(s.str());
    kvc_cache_t* cpu = prefill_case::make_cache(s, KVC_DEVICE_CPU);
    kvc_cache_t* gpu = prefill_case::make_cache(s, KVC_DEVICE_CUDA);
    ASSERT_NE(cpu, nullptr) << kvc_last_error_message();
    ASSERT_NE(gpu, nullptr) << kvc_last_error_message();
    kvc_layer_view_t view = KVC_LAYER_VIEW_INIT, gview = KVC_LAYER_VIEW_INIT;
    kvc_pool_desc_t pool = KVC_POOL_DESC_INIT, gpool = KVC_POOL_DESC_INIT;
    ASSERT_EQ(kvc_cache_layer_view(cpu, s.layer, &view), KVC_OK);
    ASSERT_EQ(kvc_cache_layer_view(gpu, s.layer, &gview), KVC_OK);
    ASSERT_EQ(kvc_cache_describe_pool(cpu, view.pool, &pool), KVC_OK);
    ASSERT_EQ(kvc_cache_describe_pool(gpu, gview.pool, &gpool), KVC_OK);
    ASSERT_EQ(pool.bytes, gpool.bytes);
    const Inputs in = prefill_case::make_inputs(s, view, pool.bytes, pool.base, rng);
    std::memcpy(pool.base, in.pool.data(), in.pool.size());
    CUDA_OK(cudaMemcpy(gpool.base, in.pool.data(), in.pool.size(), cudaMemcpyHostToDevice));
    cudaStream_t stream = nullptr;
    CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

    Buf dq(in.query.data(), in.query.size()), dout(in.query.size());
    const size_t lse_n = size_t(in.total_q) * s.q_heads;
    Buf dlse(std::max<size_t>(lse_n, 1) * 4);
    Buf dpadded(in.padded.data(), in.padded.size() * 4);
    Buf dindices(in.csr_indices.data(), in.csr_indices.size() * 4);
    Buf dindptr(in.csr_indptr.data(), in.csr_indptr.size() * 4);
    // The reference does not depend on the table format: computed once.
    std::vector<unsigned char> ref(in.query.size(), 0xFF);
    std::vector<float> ref_lse(lse_n, NAN);
    {
      kvc_prefill_args_t a = prefill_case::make_args(s, in, false);
      a.out = ref.data();
      a.lse = ref_lse.data();
      ASSERT_EQ(kvc_prefill_attention(cpu, &a, nullptr), KVC_OK) << kvc_last_error_message();
    }
    for (bool csr : {false, true}) {
      SCOPED_TRACE(csr ? "CSR table" : "padded table");
      kvc_prefill_args_t a = prefill_case::make_args(s, in, csr);
      a.query = dq.ptr;
      a.out = dout.ptr;
      a.lse = dlse.as<float>();
      a.block_table = csr ? dindices.as<int32_t>() : dpadded.as<int32_t>();
      a.indptr = csr ? dindptr.as<int32_t>() : nullptr;
      uint64_t ws_bytes = 0;
      ASSERT_EQ(kvc_prefill_workspace_size(gpu, &a, &ws_bytes), KVC_OK) << kvc_last_error_message();
      Buf ws(ws_bytes);
      CUDA_OK(cudaMemset(ws.ptr, 0xFF, ws_bytes));  // stale partials must not leak in
      a.workspace = ws.ptr;
      a.workspace_bytes = ws_bytes;
      CUDA_OK(cudaMemsetAsync(dout.ptr, 0xFF, dout.bytes, stream));
      CUDA_OK(cudaMemsetAsync(dlse.ptr, 0xFF, dlse.bytes, stream));
      ASSERT_EQ(kvc_prefill_attention(gpu, &a, stream), KVC_OK) << kvc_last_error_message();
      expect_no_async_error(gpu, stream);
      std::vector<unsigned char> got(in.query.size());
      std::vector<float> got_lse(lse_n);
      CUDA_OK(cudaMemcpy(got.data(), dout.ptr, got.size(), cudaMemcpyDeviceToHost));
      CUDA_OK(cudaMemcpy(got_lse.data(), dlse.ptr, lse_n * 4, cudaMemcpyDeviceToHost));
      bool nan = false;
      const double err = prefill_case::rel_error(prefill_case::to_double(got, s.q_dtype),
                                                 prefill_case::to_double(ref, s.q_dtype), &nan);
      EXPECT_FALSE(nan) << "an output element is NaN or was not written";
      EXPECT_LT(err, 1e-2) << "relative error (workspace " << ws_bytes << " bytes)";
      int bad = 0;
      for (size_t i = 0; i < lse_n && bad < 5; ++i) {
        const float tol = 1e-2f + 1e-3f * std::fabs(ref_lse[i]);
        if (!(std::fabs(got_lse[i] - ref_lse[i]) <= tol)) {
          ADD_FAILURE() << "lse[" << i << "] gpu " << got_lse[i] << " cpu " << ref_lse[i];
          ++bad;
        }
      }
    }
    cudaStreamDestroy(stream);
    kvc_cache_destroy(cpu);
    kvc_cache_destroy(gpu);
  }

  std::mt19937_64 rng{std::random_device{}()};
};

std::vector<std::pair<uint32_t, uint32_t>> ragged(uint32_t T) {
  // Decode rows, a 7-token chunk after a prefix, a prompt of 128, an empty
  // sequence, a 130-token chunk after a block-aligned prefix, kv_len one
  // past a block.
  return {{1, 17}, {7, 7 + 3 * T}, {128, 128}, {0, 5}, {130, 130 + 8 * T}, {5, T + 5}, {1, 1}};
}

TEST_F(PrefillGpu, EveryDtypeHeadDimLayout) {
  const std::pair<kvc_dtype_t, kvc_dtype_t> types[] = {{KVC_DTYPE_F16, KVC_DTYPE_F16},
                                                       {KVC_DTYPE_BF16, KVC_DTYPE_BF16},
                                                       {KVC_DTYPE_FP8_E4M3, KVC_DTYPE_F16},
                                                       {KVC_DTYPE_FP8_E4M3, KVC_DTYPE_BF16}};
  for (const auto& [kv, q] : types)
    for (kvc_layout_t l : {KVC_LAYOUT_NHD, KVC_LAYOUT_HND})
      for (uint32_t dim : {64u, 128u, 256u}) {
        Spec s;
        s.dtype = kv;
        s.q_dtype = q;
        s.layout = l;
        s.head_dim = dim;
        s.kv_heads = 2;
        s.q_heads = 8;
        s.layer = 1;
        if (kv == KVC_DTYPE_FP8_E4M3) {
          s.k_scale = 0.75f;
          s.v_scale = 1.25f;
        }
        s.seqs = ragged(16);
        run(s);
      }
}

TEST_F(PrefillGpu, GroupSizesBlockSizesAndKvFactor1) {
  for (uint32_t group : {1u, 2u, 3u, 5u, 8u})
    for (uint32_t T : {2u, 16u, 64u, 128u}) {
      Spec s;
      s.kv_heads = 2;
      s.q_heads = 2 * group;
      s.head_dim = 128;
      s.tokens_per_block = T;
      s.seqs = ragged(T);
      run(s);
    }
  Spec mqa;
  mqa.kv_heads = 1;
  mqa.q_heads = 16;
  mqa.head_dim = 128;
  mqa.seqs = {{300, 300}, {1, 64}, {40, 100}};
  run(mqa);
  Spec k_is_v;
  k_is_v.kv_factor = 1;
  k_is_v.seqs = {{100, 117}, {17, 17}};
  run(k_is_v);
}

TEST_F(PrefillGpu, WindowsAndSoftCap) {
  for (float cap : {0.0f, 5.0f})
    for (uint32_t dim : {64u, 128u, 256u}) {
      Spec s;
      s.head_dim = dim;
      s.soft_cap = cap;
      s.windows = {0, 64};  // layer 1 keeps the last 64 tokens
      s.layer = 1;
      s.seqs = {{1, 63}, {64, 64}, {65, 65}, {100, 500}, {200, 1000}, {7, 70}};
      run(s);
      s.window = 17;  // per call, not a multiple of the block size
      s.layout = KVC_LAYOUT_HND;
      run(s);
    }
}

TEST_F(PrefillGpu, LongPromptsAndPrefixes) {
  Spec s;
  s.layers = 1;
  s.kv_heads = 2;
  s.q_heads = 8;
  s.head_dim = 128;
  s.seqs = {{1000, 1000}, {1000, 2024}, {128, 4096}, {129, 4095}, {1, 4097}};
  run(s);
}

TEST_F(PrefillGpu, SplitKvSmallBatchesLongContexts) {
  // Few tiles over long contexts: the planner splits the KV range and the
  // merge combines the pieces; decode rows mixed in.
  Spec s;
  s.layers = 1;
  s.kv_heads = 8;
  s.q_heads = 8;
  s.head_dim = 128;
  s.seqs = {{64, 12000}};
  run(s);
  s.kv_heads = 2;
  s.seqs = {{1, 9000}, {1, 3000}, {100, 6000}, {0, 100}, {1, 1}};
  run(s);
  s.window = 3000;
  run(s);
  s.window = 0;
  s.soft_cap = 20.0f;
  s.head_dim = 64;
  s.seqs = {{16, 12000}};
  run(s);
}

TEST_F(PrefillGpu, ManySequencesSeveralLaunches) {
  // More sequences than one launch carries.
  Spec s;
  s.kv_heads = 1;
  s.q_heads = 2;
  s.head_dim = 64;
  s.tokens_per_block = 8;
  for (uint32_t i = 0; i < 300; ++i) s.seqs.push_back({1 + i % 5, 1 + i % 5 + (i * 7) % 50});
  run(s);
}

TEST_F(PrefillGpu, HopperKernelRaggedPrefixesGroupsDims) {
  // The combinations the Hopper (wgmma) kernel takes on a compute
  // capability 9.0 device (f16 / bf16, head dim 64 / 128, any group,
  // windows, soft cap, LSE); elsewhere the mma.sync kernel runs them. Query
  // lengths 1 / 7 / 128 / 1000, kv lengths around 16-token blocks and
  // 64-token tiles, with and without a prefix; both table formats (run).
  const std::vector<std::pair<uint32_t, uint32_t>> seqs = {
      {1, 1}, {7, 16}, {128, 129}, {1000, 1000}, {1000, 1023}, {7, 2047}, {128, 192}, {1, 65}};
  for (kvc_dtype_t dt : {KVC_DTYPE_BF16, KVC_DTYPE_F16})
    for (uint32_t dim : {64u, 128u})
      for (uint32_t group : {1u, 3u, 4u, 8u}) {
        Spec s;
        s.dtype = dt;
        s.q_dtype = dt;
        s.head_dim = dim;
        s.kv_heads = 2;
        s.q_heads = 2 * group;
        s.layers = 1;
        s.seqs = seqs;
        run(s);
        if (group == 4) {
          s.window = 100;
          s.soft_cap = 10.0f;
          run(s);
        }
      }
}

TEST_F(PrefillGpu, EveryThreadBlockConfiguration) {
  // The benchmark-only configurations of bf16 head dim 128 compute the
  // same function as the default (2: the mma.sync kernel where the default
  // is a Hopper one; 4: the Hopper wgmma kernel where the default is the
  // Hopper TMA kernel).
  for (int config : {1, 2, 3, 4}) {
    SCOPED_TRACE("config " + std::to_string(config));
    kvc::set_prefill_config_override(config);
    Spec s;
    s.head_dim = 128;
    s.kv_heads = 2;
    s.q_heads = 8;
    s.seqs = ragged(16);
    run(s);
    s.window = 40;
    s.soft_cap = 5.0f;
    run(s);
    s.window = 0;
    s.soft_cap = 0.0f;
    s.kv_heads = 8;
    s.q_heads = 8;
    s.layers = 1;
    s.seqs = {{64, 6000}, {1, 3000}};
    run(s);
  }
  kvc::set_prefill_config_override(0);
}

TEST_F(PrefillGpu, WorkspaceSizeGrows) {
  Spec s;
  s.kv_heads = 8;
  s.q_heads = 32;
  s.head_dim = 128;
  s.layers = 1;
  kvc_cache_t* gpu = prefill_case::make_cache(s, KVC_DEVICE_CUDA);
  ASSERT_NE(gpu, nullptr);
  kvc_prefill_args_t a = KVC_PREFILL_ARGS_INIT;
  a.q_heads = 32;
  a.q_dtype = KVC_DTYPE_BF16;
  uint64_t prev_len = 0;
  for (uint32_t len : {1u, 600u, 1024u, 5000u, 32768u, 131072u}) {
    uint64_t prev = 0;
    for (uint32_t total : {1u, 16u, 512u, 4096u, 65536u}) {
      a.batch = 1;
      a.total_q = total;
      a.max_kv_len = len;
      a.table_stride = (len + 15) / 16;
      uint64_t bytes = 0;
      ASSERT_EQ(kvc_prefill_workspace_size(gpu, &a, &bytes), KVC_OK) << kvc_last_error_message();
      EXPECT_GE(bytes, prev) << "total_q " << total << " len " << len;
      prev = bytes;
      if (total == 1) {
        EXPECT_GE(bytes, prev_len);
        prev_len = bytes;
      }
    }
  }
  kvc_cache_destroy(gpu);
}

TEST_F(PrefillGpu, ReportsErrors) {
  Spec s;
  s.seqs = {{4, 40}, {3, 20}};
  kvc_cache_t* gpu = prefill_case::make_cache(s, KVC_DEVICE_CUDA);
  ASSERT_NE(gpu, nullptr);
  kvc_layer_view_t view = KVC_LAYER_VIEW_INIT;
  kvc_pool_desc_t pool = KVC_POOL_DESC_INIT;
  ASSERT_EQ(kvc_cache_layer_view(gpu, 0, &view), KVC_OK);
  ASSERT_EQ(kvc_cache_describe_pool(gpu, view.pool, &pool), KVC_OK);
  const Inputs in = prefill_case::make_inputs(s, view, pool.bytes, pool.base, rng);
  CUDA_OK(cudaMemcpy(pool.base, in.pool.data(), in.pool.size(), cudaMemcpyHostToDevice));
  Buf dq(in.query.data(), in.query.size() + 16), dout(in.query.size() + 16);
  Buf dtable(in.padded.data(), in.padded.size() * 4);
  kvc_prefill_args_t a = prefill_case::make_args(s, in, false);
  a.query = dq.ptr;
  a.out = dout.ptr;
  a.block_table = dtable.as<int32_t>();
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  ASSERT_EQ(kvc_prefill_attention(gpu, &a, stream), KVC_OK) << kvc_last_error_message();
  expect_no_async_error(gpu, stream);

  // Misaligned pointers: refused on the host.
  kvc_prefill_args_t b = a;
  b.query = static_cast<char*>(dq.ptr) + 2;
  EXPECT_EQ(kvc_prefill_attention(gpu, &b, stream), KVC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kvc_last_error_message()).find("query must be 16-byte aligned"), std::string::npos);
  b = a;
  b.out = static_cast<char*>(dout.ptr) + 8;
  EXPECT_EQ(kvc_prefill_attention(gpu, &b, stream), KVC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kvc_last_error_message()).find("out must be 16-byte aligned"), std::string::npos);
  // A host-side length error: nothing launched.
  std::vector<int32_t> bad_lens = {3, 20};
  b = a;
  b.kv_lens = bad_lens.data();
  EXPECT_EQ(kvc_prefill_attention(gpu, &b, stream), KVC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kvc_last_error_message()).find("sequence 0 has q_len 4 (qo_indptr) above its kv_len 3"),
            std::string::npos)
      << kvc_last_error_message();
  // A block id out of range: found on the device.
  std::vector<int32_t> bad_table = in.padded;
  bad_table[in.stride + 1] = -5;
  CUDA_OK(cudaMemcpy(dtable.ptr, bad_table.data(), bad_table.size() * 4, cudaMemcpyHostToDevice));
  ASSERT_EQ(kvc_prefill_attention(gpu, &a, stream), KVC_OK);
  kvc_status_t async = KVC_OK;
  ASSERT_EQ(kvc_cache_get_async_error(gpu, stream, &async), KVC_OK);
  EXPECT_EQ(async, KVC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kvc_last_error_message()).find("prefill_attention (layer 0): block table entry 1 of sequence 1 is -5"),
            std::string::npos)
      << kvc_last_error_message();
  // A CSR row too short for its kv_len.
  std::vector<int32_t> indptr = {0, 3, 4};
  Buf dindptr(indptr.data(), 12);
  CUDA_OK(cudaMemcpy(dtable.ptr, in.padded.data(), in.padded.size() * 4, cudaMemcpyHostToDevice));
  b = a;
  b.table_format = KVC_TABLE_CSR;
  b.table_stride = 0;
  b.indptr = dindptr.as<int32_t>();
  ASSERT_EQ(kvc_prefill_attention(gpu, &b, stream), KVC_OK);
  ASSERT_EQ(kvc_cache_get_async_error(gpu, stream, &async), KVC_OK);
  EXPECT_EQ(async, KVC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kvc_last_error_message()).find("indptr gives sequence 1 1 blocks, fewer than the 2 its kv_len spans"),
            std::string::npos)
      << kvc_last_error_message();
  expect_no_async_error(gpu, stream);
  // A workspace too small.
  a.max_kv_len = 40000;
  a.table_stride = 40000 / 16;
  uint64_t need = 0;
  ASSERT_EQ(kvc_prefill_workspace_size(gpu, &a, &need), KVC_OK);
  if (need > 0) {
    a.workspace_bytes = need - 1;
    a.workspace = dq.ptr;
    EXPECT_EQ(kvc_prefill_attention(gpu, &a, stream), KVC_ERR_BUFFER_TOO_SMALL);
    EXPECT_NE(std::string(kvc_last_error_message()).find("see kvc_prefill_workspace_size"), std::string::npos);
  }
  cudaStreamDestroy(stream);
  kvc_cache_destroy(gpu);

  // f32 K/V: CPU only.
  Spec f32 = s;
  f32.dtype = KVC_DTYPE_F32;
  f32.q_dtype = KVC_DTYPE_F32;
  kvc_cache_t* gpu32 = prefill_case::make_cache(f32, KVC_DEVICE_CUDA);
  ASSERT_NE(gpu32, nullptr);
  kvc_prefill_args_t c = prefill_case::make_args(f32, in, false);
  c.out = dout.ptr;
  c.query = dq.ptr;
  EXPECT_EQ(kvc_prefill_attention(gpu32, &c, nullptr), KVC_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(kvc_last_error_message()).find("supports f16, bf16 and fp8_e4m3"), std::string::npos);
  kvc_cache_destroy(gpu32);
}

}  // namespace
