// kvc_prefill_attention on a CPU cache (the reference kernel, the CUDA
// kernel's oracle) against a naive double-precision reference: every
// dtype / head dim / GQA ratio / window / soft-cap combination on small
// ragged batches, then q_len 1, 7, 128 and 1000 with kv_len at and around
// block boundaries, prefix 0 and > 0, CSR and padded tables, over a pool
// poisoned outside the tokens the sequences hold. Then the host checks of
// bad input: the message names the argument, and nothing is written.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "prefill_case.h"

namespace {

using prefill_case::Inputs;
using prefill_case::Spec;

class Prefill : public ::testing::Test {
 protected:
  std::mt19937_64 rng{std::random_device{}()};

  // Runs `s` on a CPU cache with both table formats and compares with the
  // naive reference.
  void run(const Spec& s) {
    SCOPED_TRACE(s.str());
    kvc_cache_t* cache = prefill_case::make_cache(s, KVC_DEVICE_CPU);
    ASSERT_NE(cache, nullptr) << kvc_last_error_message();
    kvc_pool_desc_t pool = KVC_POOL_DESC_INIT;
    kvc_layer_view_t view = KVC_LAYER_VIEW_INIT;
    ASSERT_EQ(kvc_cache_layer_view(cache, s.layer, &view), KVC_OK);
    ASSERT_EQ(kvc_cache_describe_pool(cache, view.pool, &pool), KVC_OK);
    const Inputs in = prefill_case::make_inputs(s, view, pool.bytes, pool.base, rng);
    std::memcpy(pool.base, in.pool.data(), in.pool.size());
    std::vector<double> want, want_lse;
    prefill_case::reference(s, in, view, pool.base, &want, &want_lse);

    for (bool csr : {false, true}) {
      SCOPED_TRACE(csr ? "CSR table" : "padded table");
      kvc_prefill_args_t a = prefill_case::make_args(s, in, csr);
      std::vector<unsigned char> out(in.query.size(), 0xFF);  // poison: NaN
      std::vector<float> lse(size_t(in.total_q) * s.q_heads, NAN);
      a.out = out.data();
      a.lse = lse.data();
      uint64_t ws = 1;
      ASSERT_EQ(kvc_prefill_workspace_size(cache, &a, &ws), KVC_OK) << kvc_last_error_message();
      EXPECT_EQ(ws, 0u);
      ASSERT_EQ(kvc_prefill_attention(cache, &a, nullptr), KVC_OK) << kvc_last_error_message();
      bool nan = false;
      const double err = prefill_case::rel_error(prefill_case::to_double(out, s.q_dtype), want, &nan);
      EXPECT_FALSE(nan) << "an output element is NaN or was not written";
      EXPECT_LT(err, prefill_case::tolerance(s.q_dtype));
      for (size_t i = 0; i < lse.size(); ++i) {
        ASSERT_TRUE(std::isfinite(lse[i])) << "lse " << i;
        ASSERT_NEAR(lse[i], want_lse[i], 1e-4 * std::max(1.0, std::fabs(want_lse[i]))) << "lse " << i;
      }
    }
    kvc_cache_destroy(cache);
  }
};

// Small ragged batches: decode rows, a chunk with a prefix, a full prompt,
// an empty sequence, and kv_len one past a block.
std::vector<std::pair<uint32_t, uint32_t>> small_batch(uint32_t T) {
  return {{1, 17}, {7, 2 * T}, {20, 20}, {0, 5}, {5, T + 1}, {1, 1}};
}

TEST_F(Prefill, EveryDtypeHeadDimGroupWindowSoftCap) {
  const std::pair<kvc_dtype_t, kvc_dtype_t> types[] = {
      {KVC_DTYPE_F32, KVC_DTYPE_F32},       {KVC_DTYPE_F16, KVC_DTYPE_F16},
      {KVC_DTYPE_BF16, KVC_DTYPE_BF16},     {KVC_DTYPE_FP8_E4M3, KVC_DTYPE_F16},
      {KVC_DTYPE_FP8_E4M3, KVC_DTYPE_BF16}};
  for (const auto& [kv, q] : types)
    for (uint32_t dim : {64u, 128u, 256u})
      for (uint32_t group : {1u, 3u, 4u})
        for (uint32_t window : {0u, 6u})
          for (float cap : {0.0f, 5.0f}) {
            Spec s;
            s.dtype = kv;
            s.q_dtype = q;
            s.head_dim = dim;
            s.kv_heads = group == 3 ? 1 : 2;
            s.q_heads = s.kv_heads * group;
            s.layout = (dim == 128) ? KVC_LAYOUT_HND : KVC_LAYOUT_NHD;
            s.tokens_per_block = 8;
            s.window = window;
            s.soft_cap = cap;
            s.layer = 1;
            if (kv == KVC_DTYPE_FP8_E4M3) {
              s.k_scale = 0.75f;
              s.v_scale = 1.25f;
            }
            s.seqs = small_batch(8);
            run(s);
            if (HasFailure()) return;
          }
}

TEST_F(Prefill, LongChunksPrefixesAndBlockBoundaries) {
  Spec s;
  s.head_dim = 64;
  s.kv_heads = 1;
  s.q_heads = 2;
  s.layers = 1;
  s.tokens_per_block = 16;
  s.softmax_scale = 0.1f;
  // q_len 1000 with no prefix; 128 new tokens after a prefix ending on a
  // block boundary, one before and one after it; 7 new tokens; a decode row.
  s.seqs = {{1000, 1000}, {128, 128 + 48}, {128, 128 + 47}, {128, 128 + 49}, {7, 7 + 16},
            {1, 64}, {128, 128}};
  run(s);
  s.window = 100;  // the chunk's first rows still see part of the prefix
  s.kv_factor = 1;  // V is K
  s.layout = KVC_LAYOUT_HND;
  run(s);
}

TEST_F(Prefill, LayerWindowAndPerCallWindow) {
  Spec s;
  s.windows = {0, 24};
  s.layer = 1;
  s.seqs = {{1, 100}, {30, 100}, {64, 64}, {3, 24}, {3, 25}};
  run(s);
  s.window = 40;  // overrides the layer's
  run(s);
}

// ---------------------------------------------------------------------------
// Bad input: precise messages, nothing written.

class PrefillChecks : public ::testing::Test {
 protected:
  void SetUp() override {
    s.seqs = {{4, 10}, {3, 3}};
    cache = prefill_case::make_cache(s, KVC_DEVICE_CPU);
    ASSERT_NE(cache, nullptr);
    kvc_pool_desc_t pool = KVC_POOL_DESC_INIT;
    kvc_layer_view_t view = KVC_LAYER_VIEW_INIT;
    ASSERT_EQ(kvc_cache_layer_view(cache, 0, &view), KVC_OK);
    ASSERT_EQ(kvc_cache_describe_pool(cache, view.pool, &pool), KVC_OK);
    std::mt19937_64 rng(3);
    in = prefill_case::make_inputs(s, view, pool.bytes, pool.base, rng);
    std::memcpy(pool.base, in.pool.data(), in.pool.size());
    out.assign(in.query.size(), 0xAB);
    a = prefill_case::make_args(s, in, false);
    a.out = out.data();
  }
  void TearDown() override { kvc_cache_destroy(cache); }

  // The call fails with `status` and a message containing `needle`, and
  // leaves out untouched.
  void expect_fail(const kvc_prefill_args_t& bad, kvc_status_t status, const std::string& needle) {
    EXPECT_EQ(kvc_prefill_attention(cache, &bad, nullptr), status);
    const std::string msg = kvc_last_error_message();
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
    for (unsigned char c : out) ASSERT_EQ(c, 0xAB) << "the failed call wrote the output";
  }

  Spec s;
  kvc_cache_t* cache = nullptr;
  Inputs in;
  std::vector<unsigned char> out;
  kvc_prefill_args_t a{};
};

TEST_F(PrefillChecks, GoodCallRuns) {
  EXPECT_EQ(kvc_prefill_attention(cache, &a, nullptr), KVC_OK) << kvc_last_error_message();
}

TEST_F(PrefillChecks, IndptrAndLengths) {
  std::vector<int32_t> qo = {0, 5, 4};
  kvc_prefill_args_t b = a;
  b.qo_indptr = qo.data();
  b.total_q = 4;
  expect_fail(b, KVC_ERR_INVALID_ARGUMENT, "qo_indptr must not decrease: qo_indptr[2] = 4 < qo_indptr[1] = 5");
  qo = {1, 4, 7};
  expect_fail(b, KVC_ERR_INVALID_ARGUMENT, "qo_indptr[0] must be 0, got 1");
  qo = {0, 4, 7};
  b.total_q = 8;
  expect_fail(b, KVC_ERR_INVALID_ARGUMENT, "qo_indptr[batch] = 7 does not match total_q = 8");
  b = a;
  std::vector<int32_t> lens = {10, 2};
  b.kv_lens = lens.data();
  expect_fail(b, KVC_ERR_INVALID_ARGUMENT, "sequence 1 has q_len 3 (qo_indptr) above its kv_len 2");
  lens = {11, 3};
  expect_fail(b, KVC_ERR_INVALID_ARGUMENT, "kv_lens[0] = 11 is outside [0, max_kv_len 10]");
  lens = {-1, 3};
  expect_fail(b, KVC_ERR_INVALID_ARGUMENT, "kv_lens[0] = -1 is outside");
}

TEST_F(PrefillChecks, Tables) {
  kvc_prefill_args_t b = a;
  b.table_stride = 0;
  expect_fail(b, KVC_ERR_INVALID_ARGUMENT, "table_stride (0) is less than the 1 blocks that max_kv_len 10");
  b = a;
  std::vector<int32_t> table = in.padded;
  table[0] = 1 << 30;
  b.block_table = table.data();
  expect_fail(b, KVC_ERR_INVALID_ARGUMENT, "block table entry 0 of sequence 0 is 1073741824, outside [0, ");
  b = prefill_case::make_args(s, in, true);
  b.out = out.data();
  std::vector<int32_t> indptr = {0, 1, 1};
  b.indptr = indptr.data();
  expect_fail(b, KVC_ERR_INVALID_ARGUMENT, "indptr[1..] = [1, 1) holds fewer than the 1 blocks kv_lens[1] = 3 spans");
  b.indptr = nullptr;
  expect_fail(b, KVC_ERR_INVALID_ARGUMENT, "indptr must not be NULL");
  b = a;
  b.table_format = 7;
  expect_fail(b, KVC_ERR_INVALID_ARGUMENT, "table_format must be KVC_TABLE_PADDED (1) or KVC_TABLE_CSR (2), got 7");
}

TEST_F(PrefillChecks, ShapesDtypesAndScalars) {
  kvc_prefill_args_t b = a;
  b.q_heads = 3;
  expect_fail(b, KVC_ERR_INVALID_ARGUMENT, "q_heads must be a positive multiple of the layer's kv_heads (2), got 3");
  b = a;
  b.q_dtype = KVC_DTYPE_F16;
  expect_fail(b, KVC_ERR_INVALID_ARGUMENT, "q_dtype f16 does not fit a bf16 cache");
  b = a;
  b.logits_soft_cap = -1.0f;
  expect_fail(b, KVC_ERR_INVALID_ARGUMENT, "logits_soft_cap must be finite and >= 0");
  b = a;
  b.layer = 9;
  expect_fail(b, KVC_ERR_INVALID_ARGUMENT, "layer");
  b = a;
  b.query = nullptr;
  expect_fail(b, KVC_ERR_INVALID_ARGUMENT, "query must not be NULL");
  b = a;
  b.qo_indptr = nullptr;
  expect_fail(b, KVC_ERR_INVALID_ARGUMENT, "qo_indptr must not be NULL");
  b = a;
  b.max_kv_len = 0;
  expect_fail(b, KVC_ERR_INVALID_ARGUMENT, "max_kv_len must be > 0 when batch > 0");

  Spec odd = s;
  odd.head_dim = 96;
  kvc_cache_t* c96 = prefill_case::make_cache(odd, KVC_DEVICE_CPU);
  ASSERT_NE(c96, nullptr);
  uint64_t bytes = 0;
  EXPECT_EQ(kvc_prefill_workspace_size(c96, &a, &bytes), KVC_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(kvc_last_error_message()).find("prefill attention supports head_dim 64, 128 or 256; layer 0 has head_dim 96"),
            std::string::npos)
      << kvc_last_error_message();
  kvc_cache_destroy(c96);
}

TEST_F(PrefillChecks, EmptyBatchAndStructSize) {
  kvc_prefill_args_t b = KVC_PREFILL_ARGS_INIT;
  b.q_heads = 4;
  b.q_dtype = KVC_DTYPE_BF16;
  EXPECT_EQ(kvc_prefill_attention(cache, &b, nullptr), KVC_OK) << kvc_last_error_message();
  kvc_prefill_args_t init;
  std::memset(&init, 0x5A, sizeof init);
  kvc_prefill_args_init(&init);
  EXPECT_EQ(init.struct_size, sizeof(kvc_prefill_args_t));
  EXPECT_EQ(init.table_format, uint32_t(KVC_TABLE_PADDED));
  EXPECT_EQ(init.k_scale, 1.0f);
  EXPECT_EQ(init.lse, nullptr);
  kvc_prefill_args_init(nullptr);
}

}  // namespace
