// Beam search on the stateful mode (CPU backend): random reorders over 200
// steps, the indirect decode bit for bit against gather-then-decode, the
// table work a reorder does, compaction, and the guard against a row
// overwriting what another row reads.
#include <gtest/gtest.h>

#include <random>

#include "backend/cpu_kernels.h"
#include "stateful_fixture.h"

namespace kvc {
namespace test {
namespace {

// Appends one random token per row to every layer and records it.
void append_all(StatefulCache& c, const StatefulModel& cfg, NaiveHistory& ref, std::mt19937& rng,
                uint32_t n) {
  for (uint32_t l = 0; l < cfg.num_layers; ++l) {
    const size_t elems = size_t(c.batch()) * cfg.kv_heads[l] * n * cfg.head_dim;
    const std::vector<unsigned char> k = random_elems(rng, cfg.dtype, elems);
    const std::vector<unsigned char> v = random_elems(rng, cfg.dtype, elems);
    kvc_stateful_append_args_t a = KVC_STATEFUL_APPEND_ARGS_INIT;
    a.layer = l;
    a.num_tokens = n;
    a.src_dtype = cfg.dtype;
    a.key = k.data();
    a.value = v.data();
    c.append(a, nullptr);
    for (uint32_t r = 0; r < c.batch(); ++r) {
      ref.append(l, r, 0, k.data(), n, n, KVC_LAYOUT_HND);
      ref.append(l, r, 1, v.data(), n, n, KVC_LAYOUT_HND);
    }
  }
}

// Gather-then-decode: each row's history laid out in plain rows of its own
// (the naive reference), then the same decode with rows reading themselves.
std::vector<unsigned char> gathered_decode(NaiveHistory& ref, uint32_t layer, uint32_t q_heads,
                                           kvc_dtype_t q_dtype, const void* query,
                                           kvc_dtype_t dtype) {
  const uint32_t B = ref.B, H = ref.heads[layer], D = ref.D;
  uint32_t cap = 1;
  std::vector<int32_t> lens(B), ids(B);
  for (uint32_t r = 0; r < B; ++r) {
    lens[r] = int32_t(ref.length(layer, r));
    cap = std::max(cap, uint32_t(lens[r]));
    ids[r] = int32_t(r);
  }
  const uint64_t es = ref.es, row = uint64_t(H) * cap * D * es;
  std::vector<unsigned char> buf(2 * B * row);
  for (uint32_t r = 0; r < B; ++r)
    for (uint32_t k = 0; k < 2; ++k)
      for (uint32_t h = 0; h < H; ++h) {
        const auto& v = ref.at(layer, r, k, h);
        std::copy(v.begin(), v.end(), buf.begin() + int64_t(k * B * row + r * row + h * cap * D * es));
      }
  std::vector<unsigned char> out(size_t(B) * q_heads * D * dtype_size(q_dtype));
  DecodeWork w;
  w.kv.base = buf.data();
  w.kv.num_blocks = B;
  w.kv.block_stride = row;
  w.kv.kv_stride = B * row;
  w.kv.head_stride = uint64_t(cap) * D * es;
  w.kv.token_stride = D * es;
  w.kv.tokens_per_block = 1u << 31;
  w.kv.kv_heads = H;
  w.kv.head_dim = D;
  w.kv.kv_factor = 2;
  w.kv.dtype = dtype;
  w.batch = B;
  w.q_heads = q_heads;
  w.q_dtype = q_dtype;
  w.query = query;
  w.out = out.data();
  w.seq_lens = lens.data();
  w.block_table = ids.data();
  w.table_stride = 1;
  w.max_seq_len = cap;
  w.softmax_scale = 1.0f / 8.0f;
  w.k_scale = 0.5f;
  w.v_scale = 2.0f;
  w.contiguous_rows = true;
  cpu_decode_attention(w);
  return out;
}

std::vector<unsigned char> stateful_decode(StatefulCache& c, uint32_t layer, uint32_t q_heads,
                                           kvc_dtype_t q_dtype, const void* query,
                                           uint32_t head_dim) {
  std::vector<unsigned char> out(size_t(c.batch()) * q_heads * head_dim * dtype_size(q_dtype));
  StatefulDecodeArgs a;
  a.layer = layer;
  a.q_heads = q_heads;
  a.q_dtype = q_dtype;
  a.query = query;
  a.out = out.data();
  a.softmax_scale = 1.0f / 8.0f;
  a.k_scale = 0.5f;
  a.v_scale = 2.0f;
  c.decode(a, nullptr);
  return out;
}

struct BeamCase {
  uint32_t width;
  kvc_dtype_t dtype;
  kvc_dtype_t q_dtype;
};

class StatefulBeams : public ::testing::TestWithParam<BeamCase> {};

TEST_P(StatefulBeams, IndirectDecodeEqualsGatherThenDecode) {
  const BeamCase p = GetParam();
  const uint32_t B = p.width, D = 64, steps = 200;
  const StatefulModel cfg = stateful_config(2, {2, 1}, D, p.dtype);  // GQA, then MQA
  StatefulCache c(cfg, stateful_options(B, KVC_LAYOUT_HND, 16));
  NaiveHistory ref(2, B, {2, 1}, D, dtype_size(p.dtype), 2);
  std::mt19937 rng(p.width * 31 + p.dtype);
  append_all(c, cfg, ref, rng, 5);  // the prompt, in every beam
  std::vector<int32_t> idx(B);
  for (uint32_t s = 0; s < steps; ++s) {
    // A few beams survive and fork; sometimes nothing moves.
    const uint32_t survivors = 1 + rng() % B;
    for (uint32_t b = 0; b < B; ++b) idx[b] = s % 17 == 0 ? int32_t(b) : int32_t(rng() % survivors);
    c.reorder(idx.data(), B, nullptr);
    ref.reorder(idx);
    append_all(c, cfg, ref, rng, 1);
    const uint32_t layer = s % 2, q_heads = 2 * cfg.kv_heads[layer];
    const std::vector<unsigned char> q =
        random_elems(rng, p.q_dtype, size_t(B) * q_heads * D);
    const auto got = stateful_decode(c, layer, q_heads, p.q_dtype, q.data(), D);
    const auto want = gathered_decode(ref, layer, q_heads, p.q_dtype, q.data(), p.dtype);
    ASSERT_EQ(got, want) << "step " << s;
    if (s % 25 == 0) {
      ASSERT_EQ(compare_layer(c, layer, ref), "") << "step " << s;
    }
  }
  const StatefulStats st = c.stats();
  EXPECT_GT(st.reorders, 150u);
  // Only the entries past each pair's shared prefix move: less than a full
  // table copy per reorder.
  EXPECT_LT(st.table_entries_copied, uint64_t(B) * (steps + 5) * st.reorders / 2);

  // Compaction: plain rows, no table, the same bytes and the same output.
  const std::vector<unsigned char> q = random_elems(rng, p.q_dtype, size_t(B) * 4 * D);
  const auto before = stateful_decode(c, 0, 4, p.q_dtype, q.data(), D);
  c.compact(nullptr);
  EXPECT_EQ(c.view(0).beam_table, nullptr);
  EXPECT_EQ(c.stats().table_bytes, 0u);
  EXPECT_EQ(stateful_decode(c, 0, 4, p.q_dtype, q.data(), D), before);
  for (uint32_t l = 0; l < 2; ++l) EXPECT_EQ(compare_layer(c, l, ref), "");
}

INSTANTIATE_TEST_SUITE_P(Widths, StatefulBeams,
                         ::testing::Values(BeamCase{4, KVC_DTYPE_BF16, KVC_DTYPE_BF16},
                                           BeamCase{8, KVC_DTYPE_F16, KVC_DTYPE_F16},
                                           BeamCase{4, KVC_DTYPE_FP8_E4M3, KVC_DTYPE_BF16}));

TEST(StatefulBeams, ReorderCopiesOnlyPastTheSharedPrefix) {
  const StatefulModel cfg = stateful_config(1, {1}, 8, KVC_DTYPE_F32);
  StatefulCache c(cfg, stateful_options(4, KVC_LAYOUT_HND, 8));
  NaiveHistory ref(1, 4, {1}, 8, 4, 2);
  std::mt19937 rng(2);
  append_all(c, cfg, ref, rng, 20);
  const int32_t all0[4] = {0, 0, 0, 0};
  c.reorder(all0, 4, nullptr);  // rows 1..3 copy row 0's 20 entries
  ref.reorder({0, 0, 0, 0});
  EXPECT_EQ(c.stats().table_entries_copied, 60u);
  append_all(c, cfg, ref, rng, 1);  // rows now differ at position 20 only
  const int32_t swap[4] = {1, 0, 2, 3};
  c.reorder(swap, 4, nullptr);
  ref.reorder({1, 0, 2, 3});
  EXPECT_EQ(c.stats().table_entries_copied, 62u);  // one entry per moved row
  append_all(c, cfg, ref, rng, 1);
  EXPECT_EQ(compare_layer(c, 0, ref), "");
}

TEST(StatefulBeams, AppendOverPositionsAnotherRowReadsIsRefused) {
  const StatefulModel cfg = stateful_config(1, {1}, 8, KVC_DTYPE_F32);
  StatefulCache c(cfg, stateful_options(2, KVC_LAYOUT_HND, 8));
  NaiveHistory ref(1, 2, {1}, 8, 4, 2);
  std::mt19937 rng(4);
  append_all(c, cfg, ref, rng, 6);
  const int32_t idx[2] = {1, 1};  // row 0 now reads row 1's six positions
  c.reorder(idx, 2, nullptr);
  ref.reorder({1, 1});
  c.trim(1, 2, nullptr);
  ref.trim(0, 1, 2);
  const std::vector<unsigned char> k = random_elems(rng, KVC_DTYPE_F32, 2 * 8);
  kvc_stateful_append_args_t a = KVC_STATEFUL_APPEND_ARGS_INIT;
  a.num_tokens = 1;
  a.src_dtype = KVC_DTYPE_F32;
  a.key = k.data();
  a.value = k.data();
  const StatefulStats st = c.stats();
  try {
    c.append(a, nullptr);
    FAIL() << "append did not fail";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), KVC_ERR_INVALID_STATE);
    EXPECT_NE(std::string(e.what()).find("row 0 reads row 1's buffer at position 4"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(c.lengths(0), (std::vector<uint32_t>{6, 4}));
  EXPECT_EQ(c.stats().bytes_allocated, st.bytes_allocated);
  EXPECT_EQ(compare_layer(c, 0, ref), "");
  // After compaction each row owns its history and the append goes through.
  c.compact(nullptr);
  c.append(a, nullptr);
  EXPECT_EQ(c.lengths(0), (std::vector<uint32_t>{7, 5}));
}

// Found by the fuzz harness (stateful configuration): the readers' bounds
// of the beam book only shrink to a trimmed row's length, so after trims
// they named a reader that reads nothing any more, and a write no row reads
// was refused (INVALID_STATE with a false message). Now such a bound is
// checked against the table: only a write over a position another row
// really reads is refused.
TEST(StatefulBeams, TrimmedReadersDoNotBlockWrites) {
  const StatefulModel cfg = stateful_config(1, {1}, 8, KVC_DTYPE_F32);
  StatefulCache c(cfg, stateful_options(2, KVC_LAYOUT_HND, 4));
  NaiveHistory ref(1, 2, {1}, 8, 4, 2);
  std::mt19937 rng(9);
  append_all(c, cfg, ref, rng, 5);
  const int32_t to0[2] = {0, 0}, to1[2] = {1, 1};
  c.reorder(to0, 2, nullptr);  // row 1 reads row 0's [0, 5)
  ref.reorder({0, 0});
  append_all(c, cfg, ref, rng, 5);
  c.reorder(to1, 2, nullptr);  // both rows: row 0's [0, 5), then row 1's [5, 10)
  ref.reorder({1, 1});
  c.trim(0, 7, nullptr);  // row 0 reads row 0's [0, 3)
  ref.trim(0, 0, 7);
  c.trim(1, 8, nullptr);  // row 1 reads row 0's [0, 2): no row reads row 1's buffer
  ref.trim(0, 1, 8);
  // Row 1 appends at position 2 of its own buffer.
  const std::vector<unsigned char> k = random_elems(rng, KVC_DTYPE_F32, 2 * 8);
  const std::vector<unsigned char> v = random_elems(rng, KVC_DTYPE_F32, 2 * 8);
  const uint32_t rows[2] = {0, 1};
  kvc_stateful_append_args_t a = KVC_STATEFUL_APPEND_ARGS_INIT;
  a.num_tokens = 1;
  a.src_dtype = KVC_DTYPE_F32;
  a.key = k.data();
  a.value = v.data();
  a.row_tokens = rows;
  c.append(a, nullptr);
  ref.append(0, 1, 0, k.data(), 1, 1, KVC_LAYOUT_HND);
  ref.append(0, 1, 1, v.data(), 1, 1, KVC_LAYOUT_HND);
  EXPECT_EQ(c.lengths(0), (std::vector<uint32_t>{3, 3}));
  EXPECT_EQ(compare_layer(c, 0, ref), "");
  // Row 1's state imports back into row 1: no row reads its buffer.
  const uint64_t size = c.export_row(1, nullptr, 0, nullptr);
  std::vector<unsigned char> state(size);
  c.export_row(1, state.data(), size, nullptr);
  c.import_row(1, state.data(), size, nullptr);
  EXPECT_EQ(compare_layer(c, 0, ref), "");
  // A real reader still blocks: row 0 reads row 0's [0, 3); row 1 takes it
  // and row 0, cut to 1, may not write position 1 that row 1 reads.
  const int32_t keep0[2] = {0, 0};
  c.reorder(keep0, 2, nullptr);
  ref.reorder({0, 0});
  c.trim(0, 2, nullptr);
  ref.trim(0, 0, 2);
  const uint32_t only0[2] = {1, 0};
  a.row_tokens = only0;
  try {
    c.append(a, nullptr);
    FAIL() << "append did not fail";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), KVC_ERR_INVALID_STATE);
    EXPECT_NE(std::string(e.what()).find("row 1 reads row 0's buffer at position 1"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(compare_layer(c, 0, ref), "");
}

}  // namespace
}  // namespace test
}  // namespace kvc
