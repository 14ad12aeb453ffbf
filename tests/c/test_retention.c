/* C API of retention policies: range validation messages, nothing changed
 * on failure, the manual clock switch and its errors, and a duration that
 * runs out on the manual clock changing which block is evicted. Black box:
 * only the public header. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <kvcache/kvcache.h>

#include "kvc_test_assert.h"

#define ok(call) assert_int_equal((call), KVC_OK)


/* `blocks` blocks of 4 tokens, 2 layers, f32, no partial reuse. */
static kvc_cache_t *cache_with(uint32_t blocks, bool manual_clock) {
  kvc_config_t *c = NULL;
  ok(kvc_config_create(&c));
  ok(kvc_config_set_num_layers(c, 2));
  ok(kvc_config_set_kv_heads(c, 2));
  ok(kvc_config_set_head_dim(c, 4));
  ok(kvc_config_set_dtype(c, KVC_DTYPE_F32));
  ok(kvc_config_set_tokens_per_block(c, 4));
  ok(kvc_config_set_max_tokens(c, blocks * 4ull));
  ok(kvc_config_set_partial_reuse(c, false));
  ok(kvc_config_set_manual_clock(c, manual_clock));
  kvc_cache_t *cache = NULL;
  ok(kvc_cache_create(c, &cache));
  kvc_config_destroy(c);
  return cache;
}

static kvc_retention_range_t range_of(uint64_t start, uint64_t end, uint32_t priority,
                                      uint64_t duration_ms) {
  kvc_retention_range_t r;
  memset(&r, 0, sizeof r);
  r.start = start;
  r.end = end;
  r.priority = priority;
  r.duration_ms = duration_ms;
  return r;
}

static const int32_t P10[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};

static void test_manual_clock_setting(void **state) {
  (void)state;
  kvc_config_t *c = NULL;
  ok(kvc_config_create(&c));
  bool on = true;
  ok(kvc_config_get_manual_clock(c, &on));
  assert_false(on);
  ok(kvc_config_set_manual_clock(c, true));
  ok(kvc_config_get_manual_clock(c, &on));
  assert_true(on);
  assert_fails(kvc_config_set_manual_clock(NULL, true), KVC_ERR_INVALID_ARGUMENT,
               "config must not be NULL");
  assert_fails(kvc_config_get_manual_clock(c, NULL), KVC_ERR_INVALID_ARGUMENT,
               "out must not be NULL");
  kvc_config_destroy(c);

  kvc_cache_t *monotonic = cache_with(4, false);
  assert_fails(kvc_cache_advance_clock(monotonic, 5), KVC_ERR_INVALID_STATE,
               "needs a cache created with kvc_config_set_manual_clock(config, true)");
  kvc_cache_destroy(monotonic);
  assert_fails(kvc_cache_advance_clock(NULL, 5), KVC_ERR_INVALID_ARGUMENT,
               "cache must not be NULL");
  kvc_cache_t *manual = cache_with(4, true);
  ok(kvc_cache_advance_clock(manual, 5));
  assert_fails(kvc_cache_advance_clock(manual, UINT64_MAX), KVC_ERR_INVALID_ARGUMENT,
               "milliseconds (18446744073709551615) would overflow the clock, now at 5 ms");
  kvc_cache_destroy(manual);
}

static void test_invalid_policies(void **state) {
  (void)state;
  kvc_cache_t *cache = cache_with(8, true);
  kvc_sequence_options_t o = KVC_SEQUENCE_OPTIONS_INIT;
  kvc_retention_range_t r[2];
  uint64_t cached = 77;
  o.retention_ranges = r;

  r[0] = range_of(0, 64, 80, 0);
  r[1] = range_of(32, 96, 50, 0);
  o.num_retention_ranges = 2;
  assert_fails(kvc_sequence_add(cache, 1, P10, 10, &o, NULL, &cached), KVC_ERR_INVALID_ARGUMENT,
               "options->retention_ranges[1] [32, 96) overlaps options->retention_ranges[0] [0, 64)");
  r[0] = range_of(0, KVC_RETENTION_OPEN_END, 80, 0);
  r[1] = range_of(64, 128, 50, 0);
  assert_fails(kvc_sequence_add(cache, 1, P10, 10, &o, NULL, &cached), KVC_ERR_INVALID_ARGUMENT,
               "options->retention_ranges[0] is open-ended (end = KVC_RETENTION_OPEN_END) but is "
               "not the last of the 2 ranges");
  r[0] = range_of(64, 10, 80, 0);
  o.num_retention_ranges = 1;
  assert_fails(kvc_sequence_add(cache, 1, P10, 10, &o, NULL, &cached), KVC_ERR_INVALID_ARGUMENT,
               "options->retention_ranges[0].end must be > its start (64), got 10");
  r[0] = range_of(0, 8, 101, 0);
  assert_fails(kvc_sequence_add(cache, 1, P10, 10, &o, NULL, &cached), KVC_ERR_INVALID_ARGUMENT,
               "options->retention_ranges[0].priority must be in 0..100, got 101");
  o.retention_ranges = NULL;
  assert_fails(kvc_sequence_add(cache, 1, P10, 10, &o, NULL, &cached), KVC_ERR_INVALID_ARGUMENT,
               "options->retention_ranges must not be NULL when options->num_retention_ranges is 1");
  assert_fails(kvc_cache_probe(cache, P10, 10, &o, &cached), KVC_ERR_INVALID_ARGUMENT,
               "options->retention_ranges must not be NULL");
  assert_int_equal(cached, 77); /* untouched on failure */
  kvc_cache_stats_t s = KVC_CACHE_STATS_INIT;
  ok(kvc_cache_get_stats(cache, &s));
  assert_int_equal(s.num_sequences, 0);
  assert_int_equal(s.free_blocks, 8);

  o.retention_ranges = r;
  r[0] = range_of(0, KVC_RETENTION_OPEN_END, 100, 0);
  ok(kvc_sequence_add(cache, 1, P10, 10, &o, NULL, &cached));
  kvc_cache_destroy(cache);
}

/* Caches a one-block prompt (4 tokens + a last one) and removes it. */
static void cache_block(kvc_cache_t *cache, uint64_t id, int32_t first,
                        const kvc_sequence_options_t *o) {
  int32_t t[5];
  for (int i = 0; i < 5; ++i) t[i] = first + i;
  ok(kvc_sequence_add(cache, id, t, 5, o, NULL, NULL));
  ok(kvc_sequence_commit(cache, id, 5));
  ok(kvc_sequence_remove(cache, id));
}

static uint64_t probe_block(const kvc_cache_t *cache, int32_t first) {
  int32_t t[5];
  for (int i = 0; i < 5; ++i) t[i] = first + i;
  uint64_t cached = 0;
  ok(kvc_cache_probe(cache, t, 5, NULL, &cached));
  return cached;
}

/* A at 80 for 100 ms, then B at 35 released later; a 2-block prompt must
 * evict one of them from a 3-block cache. */
static void victim_after(uint64_t elapsed_ms, uint64_t *a_cached, uint64_t *b_cached) {
  kvc_cache_t *cache = cache_with(3, true);
  kvc_sequence_options_t o = KVC_SEQUENCE_OPTIONS_INIT;
  kvc_retention_range_t r = range_of(0, KVC_RETENTION_OPEN_END, 80, 100);
  o.retention_ranges = &r;
  o.num_retention_ranges = 1;
  cache_block(cache, 1, 0, &o);   /* 1 block + a 1-token block (freed) */
  cache_block(cache, 2, 100, NULL);
  ok(kvc_cache_advance_clock(cache, elapsed_ms));
  const int32_t c[8] = {200, 201, 202, 203, 204, 205, 206, 207};
  ok(kvc_sequence_add(cache, 3, c, 8, NULL, NULL, NULL));
  *a_cached = probe_block(cache, 0);
  *b_cached = probe_block(cache, 100);
  ok(kvc_cache_check(cache));
  kvc_cache_destroy(cache);
}

static void test_expiry_changes_victim(void **state) {
  (void)state;
  uint64_t a = 0, b = 0;
  victim_after(99, &a, &b);
  assert_int_equal(a, 4); /* A still at 80: B (35) is evicted */
  assert_int_equal(b, 0);
  victim_after(100, &a, &b);
  assert_int_equal(a, 0); /* A back at 35 and older than B: A goes */
  assert_int_equal(b, 4);
}

static void test_decode_duration(void **state) {
  (void)state;
  /* A generated block at 90 for 10 ms, then a default block B released
   * later; a 2-block prompt must evict one of these two leaves. */
  uint64_t gen_kept[2], b_kept[2];
  for (int round = 0; round < 2; ++round) {
    kvc_cache_t *cache = cache_with(4, true);
    kvc_sequence_options_t o = KVC_SEQUENCE_OPTIONS_INIT;
    o.decode_priority = 90;
    o.decode_duration_ms = 10;
    const int32_t p[4] = {0, 1, 2, 3}, g[4] = {50, 51, 52, 53};
    ok(kvc_sequence_add(cache, 1, p, 4, &o, NULL, NULL));
    ok(kvc_sequence_extend(cache, 1, g, 4, NULL));
    ok(kvc_sequence_commit(cache, 1, 8));
    ok(kvc_sequence_remove(cache, 1));
    cache_block(cache, 2, 100, NULL);
    ok(kvc_cache_advance_clock(cache, round == 0 ? 9 : 10));
    const int32_t c[8] = {200, 201, 202, 203, 204, 205, 206, 207};
    ok(kvc_sequence_add(cache, 3, c, 8, NULL, NULL, NULL));
    const int32_t q[9] = {0, 1, 2, 3, 50, 51, 52, 53, 9};
    ok(kvc_cache_probe(cache, q, 9, NULL, &gen_kept[round]));
    b_kept[round] = probe_block(cache, 100);
    ok(kvc_cache_check(cache));
    kvc_cache_destroy(cache);
  }
  assert_int_equal(gen_kept[0], 8); /* at 9 ms the generated block is still 90 */
  assert_int_equal(b_kept[0], 0);
  assert_int_equal(gen_kept[1], 4); /* at 10 ms it is 35 and older than B */
  assert_int_equal(b_kept[1], 4);
}

/* The example, seen from outside: ranges {[0,64) -> 80,
 * [64,128) -> 50} over a 256-token prompt in 64-token blocks give the
 * blocks priorities [80, 50, 35, 35]. Beside it, a one-block prompt X at 60.
 * Each new one-block sequence evicts the lowest-priority cached leaf, so
 * the order of evictions reads the priorities back. */
static void test_ranges_map_to_blocks(void **state) {
  (void)state;
  kvc_config_t *c = NULL;
  ok(kvc_config_create(&c));
  ok(kvc_config_set_num_layers(c, 1));
  ok(kvc_config_set_kv_heads(c, 1));
  ok(kvc_config_set_head_dim(c, 4));
  ok(kvc_config_set_dtype(c, KVC_DTYPE_F32));
  ok(kvc_config_set_tokens_per_block(c, 64));
  ok(kvc_config_set_max_tokens(c, 5 * 64));
  ok(kvc_config_set_partial_reuse(c, false));
  kvc_cache_t *cache = NULL;
  ok(kvc_cache_create(c, &cache));
  kvc_config_destroy(c);

  int32_t p[257], x[65];
  for (int i = 0; i < 257; ++i) p[i] = i;
  for (int i = 0; i < 65; ++i) x[i] = 5000 + i;
  kvc_retention_range_t r[2] = {range_of(0, 64, 80, 0), range_of(64, 128, 50, 0)};
  kvc_sequence_options_t o = KVC_SEQUENCE_OPTIONS_INIT;
  o.retention_ranges = r;
  o.num_retention_ranges = 2;
  ok(kvc_sequence_add(cache, 1, p, 256, &o, NULL, NULL));
  ok(kvc_sequence_commit(cache, 1, 256));
  ok(kvc_sequence_remove(cache, 1));
  kvc_sequence_options_t ox = KVC_SEQUENCE_OPTIONS_INIT;
  ox.prompt_priority = 60;
  ok(kvc_sequence_add(cache, 2, x, 64, &ox, NULL, NULL));
  ok(kvc_sequence_commit(cache, 2, 64));
  ok(kvc_sequence_remove(cache, 2));

  /* Prompt tokens (of p) and X tokens still cached after each eviction. */
  const uint64_t want_p[5] = {192, 128, 64, 64, 0};
  const uint64_t want_x[5] = {64, 64, 64, 0, 0};
  for (int k = 0; k < 5; ++k) {
    const int32_t t = 9000 + k;
    ok(kvc_sequence_add(cache, 10 + (uint64_t)k, &t, 1, NULL, NULL, NULL));
    uint64_t cached_p = 0, cached_x = 0;
    ok(kvc_cache_probe(cache, p, 257, NULL, &cached_p));
    ok(kvc_cache_probe(cache, x, 65, NULL, &cached_x));
    assert_int_equal(cached_p, want_p[k]);
    assert_int_equal(cached_x, want_x[k]);
  }
  kvc_cache_destroy(cache);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_manual_clock_setting),
      cmocka_unit_test(test_invalid_policies),
      cmocka_unit_test(test_ranges_map_to_blocks),
      cmocka_unit_test(test_expiry_changes_victim),
      cmocka_unit_test(test_decode_duration),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
