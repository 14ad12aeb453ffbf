// The stateful mode on the CPU backend: append across growth boundaries bit
// for bit against a naive concatenation, the staggered growth schedule and
// its peak, trim, export/import, and a failed growth changing nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "stateful_fixture.h"

namespace kvc {
namespace test {
namespace {

struct Step {
  std::vector<unsigned char> key, value;
  std::vector<uint32_t> rows;
  kvc_stateful_append_args_t args = KVC_STATEFUL_APPEND_ARGS_INIT;
};

// Random K/V of n positions for every row of `layer`, rows taking a random
// count in [0, n] (all n when `all`).
Step make_step(std::mt19937& rng, const StatefulCache& c, const StatefulModel& cfg, uint32_t layer,
               uint32_t n, kvc_dtype_t src_dtype, bool all) {
  Step s;
  const size_t elems = size_t(c.batch()) * cfg.kv_heads[layer] * n * cfg.head_dim;
  s.key = random_elems(rng, src_dtype, elems);
  if (cfg.kv_factor == 2) s.value = random_elems(rng, src_dtype, elems);
  s.rows.resize(c.batch());
  for (uint32_t& r : s.rows) r = all ? n : uint32_t(rng() % (n + 1));
  s.args.layer = layer;
  s.args.num_tokens = n;
  s.args.src_dtype = src_dtype;
  s.args.key = s.key.data();
  s.args.value = cfg.kv_factor == 2 ? s.value.data() : nullptr;
  s.args.row_tokens = all ? nullptr : s.rows.data();
  return s;
}

void record(NaiveHistory& ref, const Step& s, kvc_layout_t layout) {
  for (uint32_t r = 0; r < ref.B; ++r) {
    ref.append(s.args.layer, r, 0, s.key.data(), s.args.num_tokens, s.rows[r], layout);
    if (ref.kv_factor == 2)
      ref.append(s.args.layer, r, 1, s.value.data(), s.args.num_tokens, s.rows[r], layout);
  }
}

struct AppendCase {
  kvc_dtype_t dtype;
  kvc_layout_t layout;
  uint32_t kv_factor;
};

class StatefulAppend : public ::testing::TestWithParam<AppendCase> {};

TEST_P(StatefulAppend, AcrossGrowthEqualsConcatenation) {
  const AppendCase p = GetParam();
  const StatefulModel cfg = stateful_config(3, {2, 1, 3}, 8, p.dtype, p.kv_factor);
  StatefulCache c(cfg, stateful_options(3, p.layout, 4));
  NaiveHistory ref(3, 3, {2, 1, 3}, 8, dtype_size(p.dtype), p.kv_factor);
  std::mt19937 rng(7);
  for (int step = 0; step < 30; ++step) {
    for (uint32_t l = 0; l < 3; ++l) {
      const Step s = make_step(rng, c, cfg, l, 1 + rng() % 5, p.dtype, step % 3 == 0);
      c.append(s.args, nullptr);
      record(ref, s, p.layout);
      ASSERT_EQ(compare_layer(c, l, ref), "") << "step " << step;
    }
  }
  for (uint32_t l = 0; l < 3; ++l) EXPECT_GT(c.layer_stats(l).reallocations, 3u);
}

INSTANTIATE_TEST_SUITE_P(
    Dtypes, StatefulAppend,
    ::testing::Values(AppendCase{KVC_DTYPE_F32, KVC_LAYOUT_HND, 2},
                      AppendCase{KVC_DTYPE_F16, KVC_LAYOUT_NHD, 2},
                      AppendCase{KVC_DTYPE_BF16, KVC_LAYOUT_HND, 1},
                      AppendCase{KVC_DTYPE_FP8_E4M3, KVC_LAYOUT_NHD, 2}));

TEST(Stateful, Fp8AppendQuantizesWithScale) {
  const StatefulModel cfg = stateful_config(1, {2}, 16, KVC_DTYPE_FP8_E4M3);
  StatefulCache c(cfg, stateful_options(2, KVC_LAYOUT_HND, 8));
  std::mt19937 rng(3);
  Step s = make_step(rng, c, cfg, 0, 3, KVC_DTYPE_BF16, true);
  s.args.k_scale = 0.25f;
  s.args.v_scale = 2.0f;
  c.append(s.args, nullptr);
  // The expected bytes: the bf16 input quantized as x / scale.
  std::vector<unsigned char> k8(s.key.size() / 2), v8(s.value.size() / 2);
  for (size_t i = 0; i < k8.size(); ++i) {
    k8[i] = f32_to_fp8e4m3(load_f32(s.key.data(), KVC_DTYPE_BF16, i) / 0.25f);
    v8[i] = f32_to_fp8e4m3(load_f32(s.value.data(), KVC_DTYPE_BF16, i) / 2.0f);
  }
  NaiveHistory ref(1, 2, {2}, 16, 1, 2);
  for (uint32_t r = 0; r < 2; ++r) {
    ref.append(0, r, 0, k8.data(), 3, 3, KVC_LAYOUT_HND);
    ref.append(0, r, 1, v8.data(), 3, 3, KVC_LAYOUT_HND);
  }
  EXPECT_EQ(compare_layer(c, 0, ref), "");
}

// The decode loop of a 32-layer model: under the default policy no two
// layers grow on the same step and the peak is the computed one; under the
// uniform policy every layer grows on the same steps.
void growth_schedule(bool staggered) {
  const uint32_t L = 32, B = 2, H = 2, D = 4, step = 128, prompt = 100, steps = 700;
  const StatefulModel cfg = stateful_config(L, {H}, D, KVC_DTYPE_BF16);
  StatefulCache c(cfg, stateful_options(B, KVC_LAYOUT_HND, step, staggered));
  const GrowthPolicy& pol = c.policy();
  auto bytes = [&](uint32_t cap) { return uint64_t(2) * B * H * cap * D * 2; };
  uint64_t now = c.stats().bytes_allocated, peak = now;
  std::vector<uint32_t> caps(L, 0);
  std::mt19937 rng(1);
  std::vector<uint64_t> before(L, 0);
  for (uint32_t t = 0; t <= steps; ++t) {
    const uint32_t n = t == 0 ? prompt : 1;
    const uint32_t need = t == 0 ? prompt : prompt + t;
    for (uint32_t l = 0; l < L; ++l) {
      const Step s = make_step(rng, c, cfg, l, n, KVC_DTYPE_BF16, true);
      c.append(s.args, nullptr);
      if (need > caps[l]) {  // what the policy says the append does
        const uint32_t cap = pol.capacity_for(l, need);
        peak = std::max(peak, now + bytes(cap));
        now += bytes(cap) - bytes(caps[l]);
        caps[l] = cap;
      }
    }
    uint32_t grown = 0;
    for (uint32_t l = 0; l < L; ++l) {
      const uint64_t r = c.layer_stats(l).reallocations;
      grown += r != before[l] ? 1 : 0;
      before[l] = r;
      EXPECT_EQ(c.layer_stats(l).capacity, caps[l]);
    }
    if (staggered) ASSERT_LE(grown, 1u) << "step " << t;
    else ASSERT_TRUE(grown == 0 || grown == L) << "step " << t;
  }
  const StatefulStats st = c.stats();
  EXPECT_EQ(st.bytes_allocated, now);
  EXPECT_EQ(st.peak_bytes, peak);
  // One append grows one layer and frees its old buffer, so the live bytes
  // peak at the steady size plus one layer's new buffer under both
  // policies; what staggering changes is how many replaced buffers one
  // step frees (see the benchmark's device pool figures).
  EXPECT_LT(double(peak), 1.15 * double(now));
  EXPECT_GT(st.reallocations, 0u);
}

TEST(Stateful, StaggeredGrowthNeverTwoLayersOnOneStep) { growth_schedule(true); }
TEST(Stateful, UniformGrowthGrowsEveryLayerTogether) { growth_schedule(false); }

TEST(Stateful, TrimThenAppend) {
  const StatefulModel cfg = stateful_config(2, {2}, 8, KVC_DTYPE_F16);
  StatefulCache c(cfg, stateful_options(3, KVC_LAYOUT_NHD, 4));
  NaiveHistory ref(2, 3, {2, 2}, 8, 2, 2);
  std::mt19937 rng(5);
  auto step = [&](uint32_t n) {
    for (uint32_t l = 0; l < 2; ++l) {
      const Step s = make_step(rng, c, cfg, l, n, KVC_DTYPE_F16, true);
      c.append(s.args, nullptr);
      record(ref, s, KVC_LAYOUT_NHD);
    }
  };
  step(10);
  c.trim(1, 3, nullptr);
  for (uint32_t l = 0; l < 2; ++l) ref.trim(l, 1, 3);
  step(2);
  c.trim(KVC_STATEFUL_ALL_ROWS, 4, nullptr);
  for (uint32_t l = 0; l < 2; ++l)
    for (uint32_t r = 0; r < 3; ++r) ref.trim(l, r, 4);
  step(5);
  for (uint32_t l = 0; l < 2; ++l) EXPECT_EQ(compare_layer(c, l, ref), "");
  EXPECT_EQ(c.lengths(0), (std::vector<uint32_t>{13, 10, 13}));
}

TEST(Stateful, ExportImportRoundTrip) {
  const StatefulModel cfg = stateful_config(2, {2, 4}, 8, KVC_DTYPE_BF16);
  for (kvc_layout_t layout : {KVC_LAYOUT_HND, KVC_LAYOUT_NHD}) {
    StatefulCache a(cfg, stateful_options(3, layout, 4));
    NaiveHistory ref(2, 3, {2, 4}, 8, 2, 2);
    std::mt19937 rng(9);
    for (uint32_t l = 0; l < 2; ++l) {
      const Step s = make_step(rng, a, cfg, l, 7, KVC_DTYPE_BF16, true);
      a.append(s.args, nullptr);
      record(ref, s, layout);
    }
    const int32_t idx[3] = {2, 2, 0};  // rows read other rows through the table
    a.reorder(idx, 3, nullptr);
    ref.reorder({2, 2, 0});
    const uint64_t size = a.export_row(1, nullptr, 0, nullptr);
    std::vector<unsigned char> buf(size);
    ASSERT_EQ(a.export_row(1, buf.data(), size, nullptr), size);

    // Into another cache's row 0, and back over row 2 of a compacted one.
    StatefulCache b(cfg, stateful_options(2, layout, 4));
    b.import_row(0, buf.data(), size, nullptr);
    NaiveHistory rb(2, 2, {2, 4}, 8, 2, 2);
    for (uint32_t l = 0; l < 2; ++l)
      for (uint32_t k = 0; k < 2; ++k)
        for (uint32_t h = 0; h < cfg.kv_heads[l]; ++h) rb.at(l, 0, k, h) = ref.at(l, 1, k, h);
    for (uint32_t l = 0; l < 2; ++l) EXPECT_EQ(compare_layer(b, l, rb), "");
    std::vector<unsigned char> again(size);
    ASSERT_EQ(b.export_row(0, again.data(), size, nullptr), size);
    EXPECT_EQ(again, buf);

    a.compact(nullptr);
    a.import_row(2, buf.data(), size, nullptr);
    for (uint32_t l = 0; l < 2; ++l)
      for (uint32_t k = 0; k < 2; ++k)
        for (uint32_t h = 0; h < cfg.kv_heads[l]; ++h) ref.at(l, 2, k, h) = ref.at(l, 1, k, h);
    for (uint32_t l = 0; l < 2; ++l) EXPECT_EQ(compare_layer(a, l, ref), "");
  }
}

TEST(Stateful, FailedGrowthChangesNothing) {
  const StatefulModel cfg = stateful_config(2, {2}, 8, KVC_DTYPE_F32);
  // The real CPU backend with the fault hook: the next allocation fails.
  FaultPlan faults;
  auto dev = std::make_unique<CpuDevice>();
  dev->set_fault_hook(&faults);
  auto owned = std::make_unique<StatefulCache>(cfg, stateful_options(2, KVC_LAYOUT_HND, 4),
                                               std::move(dev));
  StatefulCache& c = *owned;
  NaiveHistory ref(2, 2, {2, 2}, 8, 4, 2);
  std::mt19937 rng(11);
  for (uint32_t l = 0; l < 2; ++l) {
    const Step s = make_step(rng, c, cfg, l, 4, KVC_DTYPE_F32, true);
    c.append(s.args, nullptr);
    record(ref, s, KVC_LAYOUT_HND);
  }
  const kvc_stateful_view_t v0 = c.view(0);
  const StatefulStats st0 = c.stats();
  const StatefulLayerStats ls0 = c.layer_stats(0);
  faults.fail_allocation(1);
  const Step s = make_step(rng, c, cfg, 0, 3, KVC_DTYPE_F32, true);  // needs growth
  try {
    c.append(s.args, nullptr);
    FAIL() << "append did not fail";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), KVC_ERR_OUT_OF_MEMORY);
    EXPECT_NE(std::string(e.what()).find("injected"), std::string::npos);
  }
  const kvc_stateful_view_t v1 = c.view(0);
  EXPECT_EQ(v1.key, v0.key);
  EXPECT_EQ(v1.capacity, v0.capacity);
  EXPECT_EQ(c.stats().bytes_allocated, st0.bytes_allocated);
  EXPECT_EQ(c.stats().peak_bytes, st0.peak_bytes);
  EXPECT_EQ(c.layer_stats(0).reallocations, ls0.reallocations);
  for (uint32_t l = 0; l < 2; ++l) EXPECT_EQ(compare_layer(c, l, ref), "");
  // The same append goes through once memory is there.
  c.append(s.args, nullptr);
  record(ref, s, KVC_LAYOUT_HND);
  EXPECT_EQ(compare_layer(c, 0, ref), "");
  EXPECT_EQ(c.layer_stats(0).reallocations, ls0.reallocations + 1);

  // A failed table creation leaves no table behind.
  for (uint32_t l = 1; l < 2; ++l) {
    const Step t = make_step(rng, c, cfg, l, 3, KVC_DTYPE_F32, true);
    c.append(t.args, nullptr);
    record(ref, t, KVC_LAYOUT_HND);
  }
  const StatefulStats st1 = c.stats();
  faults.fail_allocation(1);
  const int32_t idx[2] = {1, 1};
  EXPECT_THROW(c.reorder(idx, 2, nullptr), Error);
  EXPECT_EQ(c.view(0).beam_table, nullptr);
  EXPECT_EQ(c.stats().bytes_allocated, st1.bytes_allocated);
  EXPECT_EQ(c.stats().reorders, 0u);
  for (uint32_t l = 0; l < 2; ++l) EXPECT_EQ(compare_layer(c, l, ref), "");
  // Failures leaked nothing: every allocation is released with the cache.
  owned.reset();
  EXPECT_EQ(faults.live, 0);
}

}  // namespace
}  // namespace test
}  // namespace kvc
