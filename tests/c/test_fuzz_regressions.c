/* Regressions of the defects found by fuzzing the C API from outside (each
 * found with a reproducer, a C program against the public API): each
 * reproducer's calls, every one returning KVC_OK, with kvc_cache_check after
 * every call, and the argument checks that let a wrapped length or a
 * non-zero reserved field through. Black box: only the
 * public header. Under ASan + UBSan (scripts/test asan) the first two were
 * heap-buffer-overflows. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <kvcache/kvcache.h>

#include "kvc_test_assert.h"

#define ok(call) assert_int_equal((call), KVC_OK)

static kvc_cache_t *cache;

/* Every call succeeds and leaves every invariant intact. */
static void step(kvc_status_t status) {
  if (status != KVC_OK) fail_msg("call failed: %s", kvc_last_error_message());
  if (kvc_cache_check(cache) != KVC_OK) fail_msg("kvc_cache_check: %s", kvc_last_error_message());
}

/* Two layers of 1 x 4 f32, blocks of 4 tokens, 160 tokens per group; layer
 * 1 attends to a window of 9 tokens (both groups in one pool). */
static void create_windowed(uint64_t host_cache_bytes) {
  kvc_config_t *cfg = NULL;
  ok(kvc_config_create(&cfg));
  ok(kvc_config_set_num_layers(cfg, 2));
  ok(kvc_config_set_kv_heads(cfg, 1));
  ok(kvc_config_set_head_dim(cfg, 4));
  ok(kvc_config_set_dtype(cfg, KVC_DTYPE_F32));
  ok(kvc_config_set_tokens_per_block(cfg, 4));
  ok(kvc_config_set_max_tokens(cfg, 160));
  const uint32_t windows[2] = {0, 9};
  ok(kvc_config_set_attention_windows(cfg, windows, 2));
  if (host_cache_bytes > 0) ok(kvc_config_set_host_cache_bytes(cfg, host_cache_bytes));
  ok(kvc_cache_create(cfg, &cache));
  kvc_config_destroy(cfg);
}

/* The prompt doc * 100 + i for i < n, salted or not. */
static void add(uint64_t id, int doc, int n, int salted) {
  int32_t t[64];
  for (int i = 0; i < n; i++) t[i] = doc * 100 + i;
  kvc_sequence_options_t o = KVC_SEQUENCE_OPTIONS_INIT;
  if (salted) {
    o.salt = "tenant";
    o.salt_size = 6;
  }
  step(kvc_sequence_add(cache, id, t, (size_t)n, &o, NULL, NULL));
}

static void ext(uint64_t id, int doc, int n) {
  int32_t t[8];
  for (int i = 0; i < n; i++) t[i] = doc * 100 + i;
  step(kvc_sequence_extend(cache, id, t, (size_t)n, NULL));
}

static void decode(uint64_t a, uint64_t b) {
  const uint64_t ids[2] = {a, b};
  const int32_t tokens[2] = {1, 2};
  step(kvc_batch_extend(cache, ids, tokens, 2, NULL));
}

/* repro_host_window.c: an add that onboards a host-tier block while no
 * primary block is free (the plan made room for the anchor groups only). */
static void test_onboard_with_windowed_slots_cached(void **state) {
  (void)state;
  create_windowed(1 << 16);
  add(5, 1, 20, 0);
  add(4, 0, 13, 0);
  decode(5, 4);
  step(kvc_sequence_commit(cache, 5, 21));
  step(kvc_sequence_remove(cache, 5));
  add(5, 2, 29, 1);
  step(kvc_sequence_remove(cache, 4));
  add(4, 1, 24, 1);
  ext(4, 1, 3);
  decode(5, 4);
  ext(5, 1, 2);
  step(kvc_sequence_commit(cache, 4, 28));
  step(kvc_sequence_commit(cache, 5, 32));
  step(kvc_sequence_pin(cache, 5));
  add(3, 1, 23, 0);
  step(kvc_sequence_remove(cache, 5));
  add(5, 0, 30, 1);
  step(kvc_sequence_pin(cache, 3));
  step(kvc_sequence_remove(cache, 3));
  step(kvc_sequence_commit(cache, 5, 30));
  step(kvc_sequence_fork(cache, 5, 2));
  step(kvc_sequence_remove(cache, 5));
  add(5, 0, 26, 0);
  step(kvc_sequence_remove(cache, 4));
  add(1, 2, 10, 0);
  add(3, 0, 30, 0);
  add(0, 2, 5, 1);
  add(4, 1, 4, 1);
  kvc_cache_stats_t s = KVC_CACHE_STATS_INIT;
  ok(kvc_cache_get_stats(cache, &s));
  assert_true(s.offloaded_blocks > 0);
  kvc_cache_destroy(cache);
}

/* repro_window_check.c / repro_window_crash.c: a windowed block that a node
 * adopted at commit, shared by forks and a pin, given back to a sequence by
 * rewind, was published into a new node at removal though the pin still
 * held it (and then evicted from under the pin). */
static void test_rewound_block_shared_with_a_pin(void **state) {
  (void)state;
  create_windowed(0);
  add(3, 0, 24, 0);
  add(5, 0, 27, 1);
  step(kvc_sequence_commit(cache, 5, 24));
  add(0, 0, 18, 0);
  step(kvc_sequence_remove(cache, 5));
  step(kvc_sequence_fork(cache, 0, 1));
  add(5, 1, 25, 1);
  add(2, 2, 26, 1);
  decode(3, 2);
  step(kvc_sequence_remove(cache, 0));
  ext(2, 1, 4);
  add(0, 1, 29, 0);
  step(kvc_sequence_remove(cache, 1));
  add(1, 0, 8, 1);
  decode(2, 1);
  step(kvc_sequence_commit(cache, 1, 9));
  step(kvc_sequence_remove(cache, 2));
  step(kvc_sequence_fork(cache, 1, 2));
  step(kvc_sequence_remove(cache, 5));
  step(kvc_sequence_fork(cache, 2, 5));
  step(kvc_sequence_remove(cache, 1));
  step(kvc_sequence_pin(cache, 2));
  step(kvc_sequence_remove(cache, 2));
  step(kvc_sequence_rewind(cache, 5, 2));
  step(kvc_sequence_remove(cache, 5));
  /* Continued as repro_window_crash.c did: adds that evict everything. */
  add(6, 3, 60, 0);
  step(kvc_sequence_remove(cache, 6));
  add(7, 0, 60, 1);
  step(kvc_sequence_unpin(cache, 2));
  step(kvc_sequence_remove(cache, 7));
  add(8, 4, 60, 0);
  step(kvc_sequence_remove(cache, 8));
  step(kvc_sequence_remove(cache, 3));
  step(kvc_sequence_remove(cache, 0));
  kvc_cache_stats_t s = KVC_CACHE_STATS_INIT;
  ok(kvc_cache_get_stats(cache, &s));
  assert_int_equal(s.in_use_blocks, 0);
  kvc_cache_destroy(cache);
}

/* repro_blocks_needed.c: length + n wrapped for n near UINT64_MAX. */
static void test_huge_token_counts_are_refused(void **state) {
  (void)state;
  create_windowed(0);
  const int32_t tokens[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  step(kvc_sequence_add(cache, 1, tokens, 8, NULL, NULL, NULL));
  const uint64_t asks[3] = {UINT64_MAX, UINT64_MAX - 3, 0x80000000ull};
  for (int i = 0; i < 3; i++) {
    uint64_t need = 77;
    assert_fails(kvc_sequence_blocks_needed(cache, 1, asks[i], &need), KVC_ERR_INVALID_ARGUMENT,
                 "on a sequence of 8 tokens would pass the limit of 2147483647 tokens");
    assert_int_equal(need, 77);
  }
  uint64_t need = 0;
  ok(kvc_sequence_blocks_needed(cache, 1, 0x7fffffffull - 8, &need));
  /* extend: the count is checked before the tokens are read. */
  assert_fails(kvc_sequence_extend(cache, 1, tokens, SIZE_MAX, NULL), KVC_ERR_INVALID_ARGUMENT,
               "num_tokens = 18446744073709551615 on a sequence of 8 tokens");
  kvc_sequence_desc_t d = KVC_SEQUENCE_DESC_INIT;
  ok(kvc_sequence_describe(cache, 1, &d));
  assert_int_equal(d.num_tokens, 8);
  kvc_cache_destroy(cache);
}

static void test_retention_reserved_must_be_zero(void **state) {
  (void)state;
  create_windowed(0);
  kvc_retention_range_t r = {0, 8, 80, 1, 0};
  kvc_sequence_options_t o = KVC_SEQUENCE_OPTIONS_INIT;
  o.retention_ranges = &r;
  o.num_retention_ranges = 1;
  const int32_t tokens[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  assert_fails(kvc_sequence_add(cache, 1, tokens, 8, &o, NULL, NULL), KVC_ERR_INVALID_ARGUMENT,
               "options->retention_ranges[0].reserved must be 0, got 1");
  r.reserved = 0;
  step(kvc_sequence_add(cache, 1, tokens, 8, &o, NULL, NULL));
  kvc_cache_destroy(cache);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_onboard_with_windowed_slots_cached),
      cmocka_unit_test(test_rewound_block_shared_with_a_pin),
      cmocka_unit_test(test_huge_token_counts_are_refused),
      cmocka_unit_test(test_retention_reserved_must_be_zero),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
