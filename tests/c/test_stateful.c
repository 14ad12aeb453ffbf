/* C API of the stateful mode on a CPU cache: a beam search round trip, and
 * every bad input with its message and nothing changed (lengths and
 * statistics as before). Black box: only the public header. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <kvcache/kvcache.h>

#include "kvc_test_assert.h"

#define OK(call) assert_int_equal((call), KVC_OK)
#define B 4
#define D 64
#define H 2

static kvc_config_t *make_config(uint32_t head_dim) {
  kvc_config_t *c = NULL;
  OK(kvc_config_create(&c));
  OK(kvc_config_set_num_layers(c, 2));
  OK(kvc_config_set_kv_heads(c, H));
  OK(kvc_config_set_head_dim(c, head_dim));
  OK(kvc_config_set_dtype(c, KVC_DTYPE_F32));
  return c;
}

static kvc_stateful_t *make_cache(uint32_t head_dim, uint32_t max_length) {
  kvc_config_t *c = make_config(head_dim);
  kvc_stateful_options_t o;
  kvc_stateful_options_init(&o);
  o.batch = B;
  o.growth_step = 8;
  o.max_length = max_length;
  kvc_stateful_t *s = NULL;
  OK(kvc_stateful_create(c, &o, &s));
  kvc_config_destroy(c);
  return s;
}

static float kv[2][B * H * 16 * D];

/* Appends n tokens of deterministic values to every row of `layer`. */
static kvc_status_t append(kvc_stateful_t *s, uint32_t layer, uint32_t n) {
  for (size_t i = 0; i < sizeof kv[0] / sizeof kv[0][0]; ++i) {
    kv[0][i] = (float)(i % 97) / 97.0f;
    kv[1][i] = (float)(i % 89) / 89.0f;
  }
  kvc_stateful_append_args_t a;
  kvc_stateful_append_args_init(&a);
  a.layer = layer;
  a.num_tokens = n;
  a.src_dtype = KVC_DTYPE_F32;
  a.key = kv[0];
  a.value = kv[1];
  return kvc_stateful_append(s, &a, NULL);
}

/* What must not change across a failed call. */
typedef struct snapshot {
  uint32_t lengths[2][B];
  kvc_stateful_stats_t stats;
} snapshot_t;

static snapshot_t snap(kvc_stateful_t *s) {
  snapshot_t r;
  memset(&r, 0, sizeof r);
  for (uint32_t l = 0; l < 2; ++l) OK(kvc_stateful_get_lengths(s, l, r.lengths[l], B));
  kvc_stateful_stats_init(&r.stats);
  OK(kvc_stateful_get_stats(s, &r.stats));
  return r;
}

static void assert_unchanged(kvc_stateful_t *s, const snapshot_t *before) {
  const snapshot_t now = snap(s);
  assert_memory_equal(now.lengths, before->lengths, sizeof now.lengths);
  assert_memory_equal(&now.stats, &before->stats, sizeof now.stats);
}

static void test_beam_round_trip(void **state) {
  (void)state;
  kvc_stateful_t *s = make_cache(D, 0);
  for (uint32_t l = 0; l < 2; ++l) OK(append(s, l, 10));
  const int32_t idx[B] = {1, 1, 3, 0};
  OK(kvc_stateful_reorder(s, idx, B, NULL));
  for (uint32_t l = 0; l < 2; ++l) OK(append(s, l, 1));

  kvc_stateful_view_t v;
  kvc_stateful_view_init(&v);
  OK(kvc_stateful_layer_view(s, 1, &v));
  assert_int_equal(v.layout, KVC_LAYOUT_HND);
  assert_int_equal(v.max_length, 11);
  assert_non_null(v.beam_table);
  assert_int_equal(v.beam_table[0 * v.beam_table_stride + 0], 1);
  assert_int_equal(v.beam_table[0 * v.beam_table_stride + 10], 0);
  assert_int_equal(v.lengths[3], 11);

  static float q[B * 4 * D], out[B * 4 * D];
  for (size_t i = 0; i < sizeof q / sizeof q[0]; ++i) q[i] = 0.01f * (float)(i % 13);
  kvc_stateful_decode_args_t d;
  kvc_stateful_decode_args_init(&d);
  d.layer = 0;
  d.q_heads = 4;
  d.q_dtype = KVC_DTYPE_F32;
  d.query = q;
  d.out = out;
  uint64_t ws = 1;
  OK(kvc_stateful_decode_workspace_size(s, &d, &ws));
  assert_int_equal(ws, 0);
  OK(kvc_stateful_decode(s, &d, NULL));
  kvc_status_t async = -1;
  OK(kvc_stateful_get_async_error(s, NULL, &async));
  assert_int_equal(async, KVC_OK);

  OK(kvc_stateful_compact(s, NULL));
  kvc_stateful_stats_t st;
  kvc_stateful_stats_init(&st);
  OK(kvc_stateful_get_stats(s, &st));
  assert_int_equal(st.num_layers, 2);
  assert_int_equal(st.reorders, 1);
  assert_int_equal(st.compactions, 1);
  assert_int_equal(st.table_bytes, 0);
  assert_true(st.peak_bytes >= st.bytes_allocated);
  kvc_stateful_layer_stats_t ls;
  kvc_stateful_layer_stats_init(&ls);
  OK(kvc_stateful_get_layer_stats(s, 1, &ls));
  assert_int_equal(ls.layer, 1);
  assert_int_equal(ls.growth_offset, 4); /* 1 * 8 / 2 */
  assert_int_equal(ls.capacity, 12);
  assert_int_equal(ls.max_length, 11);

  OK(kvc_stateful_trim(s, KVC_STATEFUL_ALL_ROWS, 11, NULL));
  OK(kvc_stateful_reset(s, true, NULL));
  OK(kvc_stateful_get_stats(s, &st));
  assert_int_equal(st.kv_bytes, 0);
  kvc_stateful_destroy(s);
  kvc_stateful_destroy(NULL);
}

static void test_create_errors(void **state) {
  (void)state;
  kvc_config_t *c = make_config(D);
  kvc_stateful_options_t o;
  kvc_stateful_options_init(&o);
  kvc_stateful_t *s = (kvc_stateful_t *)&o; /* must stay untouched */
  kvc_stateful_t *const sentinel = s;
  assert_fails(kvc_stateful_create(c, &o, &s), KVC_ERR_INVALID_ARGUMENT,
               "batch must be in 1..1024, got 0");
  o.batch = 2;
  o.layout = 7;
  assert_fails(kvc_stateful_create(c, &o, &s), KVC_ERR_INVALID_ARGUMENT, "layout must be");
  o.layout = 0;
  o.growth_step = 70000;
  assert_fails(kvc_stateful_create(c, &o, &s), KVC_ERR_INVALID_ARGUMENT,
               "growth_step must be in 1..65536 tokens (0 = 128), got 70000");
  o.growth_step = 0;
  o.growth_policy = 3;
  assert_fails(kvc_stateful_create(c, &o, &s), KVC_ERR_INVALID_ARGUMENT, "growth_policy must be");
  o.growth_policy = 0;
  o.max_length = 10;
  o.initial_length = 11;
  assert_fails(kvc_stateful_create(c, &o, &s), KVC_ERR_INVALID_ARGUMENT,
               "initial_length (11) is above max_length (10)");
  o.initial_length = 0;
  assert_fails(kvc_stateful_create(NULL, &o, &s), KVC_ERR_INVALID_ARGUMENT, "config");
  const uint32_t windows[1] = {64};
  OK(kvc_config_set_attention_windows(c, windows, 1));
  assert_fails(kvc_stateful_create(c, &o, &s), KVC_ERR_UNSUPPORTED, "attention window [0] = 64");
  assert_ptr_equal(s, sentinel);
  kvc_config_destroy(c);
}

static void test_bad_input_changes_nothing(void **state) {
  (void)state;
  kvc_stateful_t *s = make_cache(D, 12);
  for (uint32_t l = 0; l < 2; ++l) OK(append(s, l, 8));
  const snapshot_t before = snap(s);
  kvc_stateful_view_t v;
  kvc_stateful_view_init(&v);

  assert_fails(kvc_stateful_layer_view(s, 2, &v), KVC_ERR_INVALID_ARGUMENT,
               "layer must be < num_layers (2), got 2");
  assert_fails(append(s, 0, 5), KVC_ERR_INVALID_ARGUMENT,
               "appending 5 tokens to row 0 of layer 0 (length 8) would pass max_length 12");
  kvc_stateful_append_args_t a;
  kvc_stateful_append_args_init(&a);
  a.num_tokens = 1;
  a.src_dtype = KVC_DTYPE_BF16;
  a.key = kv[0];
  a.value = kv[1];
  assert_fails(kvc_stateful_append(s, &a, NULL), KVC_ERR_INVALID_ARGUMENT,
               "src_dtype bf16 (3) cannot be stored in a f32 cache");
  a.src_dtype = KVC_DTYPE_F32;
  a.value = NULL;
  assert_fails(kvc_stateful_append(s, &a, NULL), KVC_ERR_INVALID_ARGUMENT,
               "value must not be NULL");
  a.value = kv[1];
  const uint32_t rows[B] = {1, 2, 0, 1};
  a.row_tokens = rows;
  assert_fails(kvc_stateful_append(s, &a, NULL), KVC_ERR_INVALID_ARGUMENT,
               "row_tokens[1] = 2 is above num_tokens (1)");

  const int32_t bad[B] = {0, 4, 1, 1};
  assert_fails(kvc_stateful_reorder(s, bad, B, NULL), KVC_ERR_INVALID_ARGUMENT,
               "beam_idx[1] = 4 is outside [0, 4)");
  assert_fails(kvc_stateful_reorder(s, bad, 3, NULL), KVC_ERR_INVALID_ARGUMENT,
               "beam_idx has 3 entries, the cache has batch 4");
  assert_fails(kvc_stateful_trim(s, 0, 9, NULL), KVC_ERR_INVALID_ARGUMENT,
               "cannot trim 9 tokens from row 0, which has 8");
  assert_fails(kvc_stateful_trim(s, 4, 1, NULL), KVC_ERR_INVALID_ARGUMENT,
               "row must be < batch (4) or KVC_STATEFUL_ALL_ROWS, got 4");
  uint32_t few[B - 1];
  assert_fails(kvc_stateful_get_lengths(s, 0, few, B - 1), KVC_ERR_BUFFER_TOO_SMALL,
               "lengths holds 3 entries, the cache has batch 4");

  kvc_stateful_decode_args_t d;
  kvc_stateful_decode_args_init(&d);
  d.q_heads = 3;
  d.q_dtype = KVC_DTYPE_F32;
  d.query = kv[0];
  d.out = kv[1];
  assert_fails(kvc_stateful_decode(s, &d, NULL), KVC_ERR_INVALID_ARGUMENT,
               "q_heads must be a positive multiple of the layer's kv_heads (2), got 3");
  d.q_heads = 2;
  d.layer = 9;
  assert_fails(kvc_stateful_decode(s, &d, NULL), KVC_ERR_INVALID_ARGUMENT,
               "layer must be < num_layers (2), got 9");

  /* Export: too small a buffer says the size. */
  uint64_t size = 0;
  assert_fails(kvc_stateful_export_row(s, 1, NULL, 0, &size, NULL), KVC_ERR_BUFFER_TOO_SMALL,
               "buffer capacity 0 is less than");
  unsigned char *buf = malloc(size);
  OK(kvc_stateful_export_row(s, 1, buf, size, &size, NULL));
  /* Import: wrong size, garbage, another geometry. */
  assert_fails(kvc_stateful_import_row(s, 0, buf, size - 1, NULL), KVC_ERR_INVALID_ARGUMENT,
               "does not match the");
  kvc_stateful_t *other = make_cache(128, 0);
  assert_fails(kvc_stateful_import_row(other, 0, buf, size, NULL), KVC_ERR_INVALID_ARGUMENT,
               "state buffer head_dim is 64, this cache has 128");
  kvc_stateful_destroy(other);
  buf[0] ^= 0xff;
  assert_fails(kvc_stateful_import_row(s, 0, buf, size, NULL), KVC_ERR_INVALID_ARGUMENT,
               "bad magic");
  buf[0] ^= 0xff;
  assert_fails(kvc_stateful_import_row(s, B, buf, size, NULL), KVC_ERR_INVALID_ARGUMENT,
               "row must be < batch (4), got 4");
  assert_unchanged(s, &before);

  /* Layers at different lengths (inside a step): beam calls refuse. */
  OK(append(s, 0, 1));
  const snapshot_t mid = snap(s);
  const int32_t idx[B] = {1, 0, 2, 3};
  assert_fails(kvc_stateful_reorder(s, idx, B, NULL), KVC_ERR_INVALID_STATE,
               "kvc_stateful_reorder needs every layer at the same length (between steps), but "
               "row 0 has 9 tokens in layer 0 and 8 in layer 1");
  assert_fails(kvc_stateful_trim(s, 0, 1, NULL), KVC_ERR_INVALID_STATE, "kvc_stateful_trim needs");
  assert_unchanged(s, &mid);
  /* A matching import after the step completes. */
  OK(append(s, 1, 1));
  OK(kvc_stateful_import_row(s, 2, buf, size, NULL));
  uint32_t lens[B];
  OK(kvc_stateful_get_lengths(s, 1, lens, B));
  assert_int_equal(lens[2], 8);
  assert_int_equal(lens[1], 9);
  free(buf);
  kvc_stateful_destroy(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_beam_round_trip),
      cmocka_unit_test(test_create_errors),
      cmocka_unit_test(test_bad_input_changes_nothing),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
