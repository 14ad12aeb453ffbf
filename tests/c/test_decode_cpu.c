/* C API decode attention on a CPU cache: hand-checkable outputs (f32 KV,
 * every table format) and every argument error with its message. Black
 * box: only the public header. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <kvcache/kvcache.h>

#include "kernel_test_cache.h"
#include "kvc_test_assert.h"

/* Decode on a CPU cache with f32 KV: hand-checkable outputs. */
typedef struct decode_fixture {
  kvc_cache_t *cache;
  shape_t shape;
} decode_fixture_t;

static void store_token(kvc_cache_t *cache, shape_t s, uint32_t layer, int64_t slot, const float *k,
                        const float *v) {
  kvc_store_args_t a = KVC_STORE_ARGS_INIT;
  a.layer = layer;
  a.num_tokens = 1;
  a.src_dtype = s.dtype;
  a.key = k;
  a.value = v;
  a.slot_mapping = &slot;
  OK(kvc_store_kv(cache, &a, NULL));
}

/* exp(x) for small x by its series: the tests link no libm. */
static double series_exp(double x) {
  double term = 1.0, sum = 1.0;
  for (int n = 1; n < 60; ++n) {
    term *= x / n;
    sum += term;
  }
  return sum;
}

static void test_decode_reference_values(void **state) {
  (void)state;
  shape_t s = small_shape(KVC_DTYPE_F32, KVC_LAYOUT_HND);
  s.kv_heads = 2;
  s.tokens_per_block = 4;
  kvc_cache_t *cache = make_cache(s);
  /* Sequence 0: 6 tokens in blocks {7, 2}; K of token t is e0 * t for kv
   * head 0 and 0 for kv head 1; V is (t + 1) for head 0 and 10(t + 1) for
   * head 1, on every dim. */
  const int32_t table[2 * 3] = {7, 2, -1, 5, -1, -1};
  float k[2 * 64], v[2 * 64];
  for (uint32_t t = 0; t < 6; ++t) {
    for (int d = 0; d < 64; ++d) {
      k[d] = d == 0 ? (float)t : 0.0f;
      k[64 + d] = 0.0f;
      v[d] = (float)(t + 1);
      v[64 + d] = 10.0f * (float)(t + 1);
    }
    store_token(cache, s, 1, (int64_t)table[t / 4] * 4 + t % 4, k, v);
  }
  /* Sequence 1: one token in block 5. */
  for (int d = 0; d < 128; ++d) {
    k[d] = 1.0f;
    v[d] = -3.0f;
  }
  store_token(cache, s, 1, 5 * 4, k, v);

  /* 4 query heads: heads 0, 1 read kv head 0; heads 2, 3 kv head 1. */
  float q[2 * 4 * 64], out[2 * 4 * 64];
  memset(q, 0, sizeof q);
  q[0 * 64] = 1.0f;             /* seq 0 head 0: scores t * scale */
  for (int i = 0; i < 2 * 4 * 64; ++i) out[i] = NAN;
  const int32_t seq_lens[2] = {6, 1};
  kvc_decode_args_t a;
  kvc_decode_args_init(&a);
  a.layer = 1;
  a.batch = 2;
  a.q_heads = 4;
  a.q_dtype = KVC_DTYPE_F32;
  a.query = q;
  a.out = out;
  a.seq_lens = seq_lens;
  a.block_table = table;
  a.table_stride = 3;
  a.max_seq_len = 8;
  a.softmax_scale = 1.0f;
  uint64_t ws = 1;
  OK(kvc_decode_workspace_size(cache, &a, &ws));
  assert_int_equal(ws, 0);
  OK(kvc_decode_attention(cache, &a, NULL));
  /* seq 0 head 0: softmax over scores 0..5 of V = t + 1. */
  double num = 0, den = 0;
  for (int t = 0; t < 6; ++t) {
    num += series_exp((double)t) * (t + 1);
    den += series_exp((double)t);
  }
  assert_float_equal(out[0], num / den, 1e-4);
  assert_float_equal(out[63], num / den, 1e-4);
  /* seq 0 head 1: zero query -> uniform mean of 1..6 = 3.5; heads 2, 3
   * (kv head 1) -> 35. */
  assert_float_equal(out[1 * 64 + 7], 3.5, 1e-5);
  assert_float_equal(out[2 * 64], 35.0, 1e-4);
  assert_float_equal(out[3 * 64 + 63], 35.0, 1e-4);
  /* seq 1: one token -> its V exactly. */
  for (int i = 4 * 64; i < 8 * 64; ++i) assert_true(out[i] == -3.0f);

  /* Window 2: seq 0 attends to tokens 4, 5 only; the table's first block
   * is not read, so -1 there is fine. */
  const int32_t table_w[2 * 3] = {-1, 2, -1, 5, -1, -1};
  a.block_table = table_w;
  a.window = 2;
  OK(kvc_decode_attention(cache, &a, NULL));
  const double w_out = (series_exp(4.0) * 5 + series_exp(5.0) * 6) / (series_exp(4.0) + series_exp(5.0));
  assert_float_equal(out[0], w_out, 1e-4);
  assert_float_equal(out[64], 5.5, 1e-5);

  /* The same through a CSR table. */
  const int32_t indices[3] = {7, 2, 5};
  const int32_t indptr[3] = {0, 2, 3};
  a.window = 0;
  a.table_format = KVC_TABLE_CSR;
  a.block_table = indices;
  a.indptr = indptr;
  a.table_stride = 0;
  for (int i = 0; i < 2 * 4 * 64; ++i) out[i] = NAN;
  OK(kvc_decode_attention(cache, &a, NULL));
  assert_float_equal(out[0], num / den, 1e-4);
  assert_float_equal(out[2 * 64], 35.0, 1e-4);
  assert_true(out[7 * 64 + 5] == -3.0f);

  /* Length 0 gives zeros. */
  const int32_t zero_lens[2] = {0, 1};
  a.seq_lens = zero_lens;
  OK(kvc_decode_attention(cache, &a, NULL));
  for (int i = 0; i < 4 * 64; ++i) assert_true(out[i] == 0.0f);
  kvc_cache_destroy(cache);
}

static void test_decode_errors(void **state) {
  (void)state;
  shape_t s = small_shape(KVC_DTYPE_BF16, KVC_LAYOUT_NHD);
  kvc_cache_t *cache = make_cache(s);
  kvc_pool_desc_t pool = pool_of(cache, 0);
  uint16_t q[2 * 4 * 64], out[2 * 4 * 64];
  memset(q, 0, sizeof q);
  const int32_t lens[2] = {20, 3};
  int32_t table[2 * 2] = {0, 1, 2, -1};
  kvc_decode_args_t a = KVC_DECODE_ARGS_INIT;
  a.batch = 2;
  a.q_heads = 4;
  a.q_dtype = KVC_DTYPE_BF16;
  a.query = q;
  a.out = out;
  a.seq_lens = lens;
  a.block_table = table;
  a.table_stride = 2;
  a.max_seq_len = 32;
  OK(kvc_decode_attention(cache, &a, NULL));

  kvc_decode_args_t b = a;
  assert_fails(kvc_decode_attention(NULL, &a, NULL), KVC_ERR_INVALID_ARGUMENT, "cache must not be NULL");
  assert_fails(kvc_decode_attention(cache, NULL, NULL), KVC_ERR_INVALID_ARGUMENT, "args must not be NULL");
  b.q_heads = 3;
  assert_fails(kvc_decode_attention(cache, &b, NULL), KVC_ERR_INVALID_ARGUMENT,
               "q_heads must be a positive multiple of the layer's kv_heads (2), got 3");
  b = a;
  b.q_dtype = KVC_DTYPE_F16;
  assert_fails(kvc_decode_attention(cache, &b, NULL), KVC_ERR_INVALID_ARGUMENT,
               "q_dtype f16 does not fit a bf16 cache");
  b = a;
  b.table_format = 7;
  assert_fails(kvc_decode_attention(cache, &b, NULL), KVC_ERR_INVALID_ARGUMENT,
               "table_format must be KVC_TABLE_PADDED (1) or KVC_TABLE_CSR (2), got 7");
  b = a;
  b.query = NULL;
  assert_fails(kvc_decode_attention(cache, &b, NULL), KVC_ERR_INVALID_ARGUMENT, "query must not be NULL");
  b = a;
  b.out = NULL;
  assert_fails(kvc_decode_attention(cache, &b, NULL), KVC_ERR_INVALID_ARGUMENT, "out must not be NULL");
  b = a;
  b.seq_lens = NULL;
  assert_fails(kvc_decode_attention(cache, &b, NULL), KVC_ERR_INVALID_ARGUMENT, "seq_lens must not be NULL");
  b = a;
  b.block_table = NULL;
  assert_fails(kvc_decode_attention(cache, &b, NULL), KVC_ERR_INVALID_ARGUMENT, "block_table must not be NULL");
  b = a;
  b.max_seq_len = 0;
  assert_fails(kvc_decode_attention(cache, &b, NULL), KVC_ERR_INVALID_ARGUMENT, "max_seq_len must be > 0");
  b = a;
  b.max_seq_len = 33;
  assert_fails(kvc_decode_attention(cache, &b, NULL), KVC_ERR_INVALID_ARGUMENT,
               "table_stride (2) is less than the 3 blocks that max_seq_len 33 spans at 16 tokens per block");
  b = a;
  b.max_seq_len = 10;
  assert_fails(kvc_decode_attention(cache, &b, NULL), KVC_ERR_INVALID_ARGUMENT,
               "seq_lens[0] = 20 is outside [0, max_seq_len 10]");
  b = a;
  table[1] = (int32_t)pool.num_blocks;
  char want[128];
  snprintf(want, sizeof want, "block table entry 1 of sequence 0 is %d, outside [0, %d)",
           (int)pool.num_blocks, (int)pool.num_blocks);
  assert_fails(kvc_decode_attention(cache, &b, NULL), KVC_ERR_INVALID_ARGUMENT, want);
  table[1] = 1;
  b = a;
  b.softmax_scale = (float)NAN;
  assert_fails(kvc_decode_attention(cache, &b, NULL), KVC_ERR_INVALID_ARGUMENT, "softmax_scale must be finite");
  b = a;
  b.indptr = lens;
  assert_fails(kvc_decode_attention(cache, &b, NULL), KVC_ERR_INVALID_ARGUMENT, "indptr must be NULL for KVC_TABLE_PADDED");

  /* CSR */
  const int32_t indices[3] = {0, 1, 2};
  int32_t indptr[3] = {0, 1, 3};
  b = a;
  b.table_format = KVC_TABLE_CSR;
  b.block_table = indices;
  b.indptr = NULL;
  b.table_stride = 0;
  assert_fails(kvc_decode_attention(cache, &b, NULL), KVC_ERR_INVALID_ARGUMENT, "indptr must not be NULL");
  b.indptr = indptr;
  assert_fails(kvc_decode_attention(cache, &b, NULL), KVC_ERR_INVALID_ARGUMENT,
               "indptr[0..] = [0, 1) holds fewer than the 2 blocks seq_lens[0] = 20 spans");
  indptr[1] = 2;
  OK(kvc_decode_attention(cache, &b, NULL));
  b.table_stride = 4;
  assert_fails(kvc_decode_attention(cache, &b, NULL), KVC_ERR_INVALID_ARGUMENT, "table_stride must be 0 for KVC_TABLE_CSR");
  indptr[0] = 1;
  b.table_stride = 0;
  assert_fails(kvc_decode_attention(cache, &b, NULL), KVC_ERR_INVALID_ARGUMENT, "indptr[0] must be 0, got 1");

  /* Workspace: a CPU cache needs none; a non-zero size with NULL is wrong. */
  b = a;
  b.workspace_bytes = 16;
  assert_fails(kvc_decode_attention(cache, &b, NULL), KVC_ERR_INVALID_ARGUMENT, "workspace is NULL but workspace_bytes is 16");
  uint64_t ws = 99;
  assert_fails(kvc_decode_workspace_size(cache, &a, NULL), KVC_ERR_INVALID_ARGUMENT, "bytes must not be NULL");
  OK(kvc_decode_workspace_size(cache, &a, &ws));
  assert_int_equal(ws, 0);
  kvc_cache_destroy(cache);

  /* Unsupported head dim. */
  s.head_dim = 96;
  cache = make_cache(s);
  assert_fails(kvc_decode_attention(cache, &a, NULL), KVC_ERR_UNSUPPORTED,
               "decode attention supports head_dim 64, 128 or 256; layer 0 has head_dim 96");
  kvc_cache_destroy(cache);

  /* fp8 cache: f16/bf16 queries, positive scales. */
  s = small_shape(KVC_DTYPE_FP8_E4M3, KVC_LAYOUT_NHD);
  cache = make_cache(s);
  OK(kvc_decode_attention(cache, &a, NULL));
  b = a;
  b.q_dtype = KVC_DTYPE_F32;
  assert_fails(kvc_decode_attention(cache, &b, NULL), KVC_ERR_INVALID_ARGUMENT,
               "q_dtype f32 does not fit a fp8_e4m3 cache");
  b = a;
  b.k_scale = -1.0f;
  assert_fails(kvc_decode_attention(cache, &b, NULL), KVC_ERR_INVALID_ARGUMENT, "k_scale must be finite and > 0");
  kvc_cache_destroy(cache);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_decode_reference_values),
      cmocka_unit_test(test_decode_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
