/* C API of per-layer-group statistics (kvc_cache_get_group_stats): a full
 * group and a windowed group sharing one pool, exact counts through a
 * prompt's add, commit and removal, its reuse, evictions and a reset, and
 * how they add up to kvc_cache_get_stats; argument errors and their
 * messages; the struct_size contract. Black box: only the public header. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <kvcache/kvcache.h>

#include "kvc_test_assert.h"

#define ok(call) assert_int_equal((call), KVC_OK)

enum { TPB = 16, WINDOW = 32, PROMPT = 128, MAX_TOKENS = 1024 };

/* 2 layers, windows {0, 32}: group 0 full, group 1 windowed; both have the
 * same block bytes, so they draw from one pool. 16 tokens per block. */
static kvc_cache_t *windowed_cache(void) {
  kvc_config_t *c = NULL;
  ok(kvc_config_create(&c));
  ok(kvc_config_set_num_layers(c, 2));
  const uint32_t windows[2] = {0, WINDOW};
  ok(kvc_config_set_attention_windows(c, windows, 2));
  ok(kvc_config_set_kv_heads(c, 2));
  ok(kvc_config_set_head_dim(c, 8));
  ok(kvc_config_set_dtype(c, KVC_DTYPE_F32));
  ok(kvc_config_set_tokens_per_block(c, TPB));
  ok(kvc_config_set_max_tokens(c, MAX_TOKENS));
  kvc_cache_t *cache = NULL;
  ok(kvc_cache_create(c, &cache));
  kvc_config_destroy(c);
  return cache;
}

static kvc_group_stats_t group_stats_of(const kvc_cache_t *cache, uint32_t group) {
  kvc_group_stats_t s = KVC_GROUP_STATS_INIT;
  ok(kvc_cache_get_group_stats(cache, group, &s));
  return s;
}

static kvc_cache_stats_t stats_of(const kvc_cache_t *cache) {
  kvc_cache_stats_t s = KVC_CACHE_STATS_INIT;
  ok(kvc_cache_get_stats(cache, &s));
  return s;
}

/* Each group's counts, then what they must add up to: per-group block
 * counts sum to the cache's, and the one pool's free blocks are the cache's. */
static void expect_group(const kvc_cache_t *cache, uint32_t group, uint64_t in_use,
                         uint64_t cached, uint64_t reused, uint64_t missed, uint64_t evicted,
                         uint64_t released) {
  const kvc_group_stats_t s = group_stats_of(cache, group);
  assert_int_equal(s.struct_size, sizeof(kvc_group_stats_t));
  assert_int_equal(s.pool, 0);
  assert_int_equal(s.in_use_blocks, in_use);
  assert_int_equal(s.cached_blocks, cached);
  assert_int_equal(s.reused_blocks, reused);
  assert_int_equal(s.missed_blocks, missed);
  assert_int_equal(s.evicted_blocks, evicted);
  assert_int_equal(s.released_blocks, released);
}

static void expect_sums(const kvc_cache_t *cache, uint64_t free_blocks) {
  const kvc_cache_stats_t t = stats_of(cache);
  const kvc_group_stats_t g0 = group_stats_of(cache, 0);
  const kvc_group_stats_t g1 = group_stats_of(cache, 1);
  assert_int_equal(t.free_blocks, free_blocks);
  assert_int_equal(g0.pool_free_blocks, free_blocks);
  assert_int_equal(g1.pool_free_blocks, free_blocks);
  assert_int_equal(g0.in_use_blocks + g1.in_use_blocks, t.in_use_blocks);
  assert_int_equal(g0.cached_blocks + g1.cached_blocks, t.cached_blocks);
  assert_int_equal(t.free_blocks + t.cached_blocks + t.in_use_blocks, t.num_blocks);
}

static void fill(int32_t *tokens, int n, int32_t first) {
  for (int i = 0; i < n; ++i) tokens[i] = first + i;
}

static void test_full_and_windowed_group(void **state) {
  (void)state;
  kvc_cache_t *cache = windowed_cache();
  kvc_cache_desc_t d = KVC_CACHE_DESC_INIT;
  ok(kvc_cache_describe(cache, &d));
  assert_int_equal(d.num_groups, 2);
  assert_int_equal(d.num_pools, 1);
  assert_int_equal(d.num_blocks, 128); /* 1024 tokens of 16, in both groups */
  kvc_group_desc_t g1 = KVC_GROUP_DESC_INIT;
  ok(kvc_cache_describe_group(cache, 1, &g1));
  assert_int_equal(g1.window, WINDOW);
  expect_group(cache, 0, 0, 0, 0, 0, 0, 0);
  expect_group(cache, 1, 0, 0, 0, 0, 0, 0);
  expect_sums(cache, 128);

  /* 128 tokens: 8 blocks in each group, all missed; nothing committed, so
   * the windowed group still holds all 8. */
  int32_t prompt[PROMPT];
  fill(prompt, PROMPT, 1000);
  uint64_t cached = 77;
  ok(kvc_sequence_add(cache, 1, prompt, PROMPT, NULL, NULL, &cached));
  assert_int_equal(cached, 0);
  expect_group(cache, 0, 8, 0, 0, 8, 0, 0);
  expect_group(cache, 1, 8, 0, 0, 8, 0, 0);
  expect_sums(cache, 112);

  /* Committed: token 128, the next, attends to tokens 97..128 (window 32),
   * so the windowed group keeps blocks 6 and 7 and releases 0..5, which stay
   * cached in the tree. */
  ok(kvc_sequence_commit(cache, 1, PROMPT));
  expect_group(cache, 0, 8, 0, 0, 8, 0, 0);
  const kvc_group_stats_t w = group_stats_of(cache, 1);
  assert_true(w.in_use_blocks <= WINDOW / TPB + 1);
  assert_int_equal(w.released_blocks, PROMPT / TPB - w.in_use_blocks);
  expect_group(cache, 1, 2, 6, 0, 8, 0, 6);
  expect_sums(cache, 112);

  /* Removed: everything it held is cached. */
  ok(kvc_sequence_remove(cache, 1));
  expect_group(cache, 0, 0, 8, 0, 8, 0, 0);
  expect_group(cache, 1, 0, 8, 0, 8, 0, 6);
  expect_sums(cache, 112);

  /* Again: 127 tokens cached (never the last one): 7 full blocks and 15
   * tokens of the 8th, copied into a new block. The full group reuses all 8
   * positions; the windowed one only 6 and 7, which cover the window ending
   * at token 127; positions 0..5 are neither reused nor missed. */
  ok(kvc_sequence_add(cache, 2, prompt, PROMPT, NULL, NULL, &cached));
  assert_int_equal(cached, PROMPT - 1);
  expect_group(cache, 0, 8, 1, 8, 8, 0, 0);
  expect_group(cache, 1, 2, 7, 2, 8, 0, 6);
  expect_sums(cache, 110);
  /* Its copied last block, 15 tokens committed, is published on removal. */
  ok(kvc_sequence_remove(cache, 2));
  expect_group(cache, 0, 0, 9, 8, 8, 0, 0);
  expect_group(cache, 1, 0, 9, 2, 8, 0, 6);
  expect_sums(cache, 110);

  /* 960 new tokens need 60 blocks per group, 120 of the 110 free: 10 cached
   * blocks are evicted: 6 blocks of the windowed group alone, and 2
   * positions, a block of each group each. */
  static int32_t big[960];
  fill(big, 960, 5000);
  ok(kvc_sequence_add(cache, 3, big, 960, NULL, NULL, &cached));
  assert_int_equal(cached, 0);
  expect_group(cache, 0, 60, 7, 8, 68, 2, 0);
  expect_group(cache, 1, 60, 1, 2, 68, 8, 6);
  expect_sums(cache, 0);
  ok(kvc_sequence_commit(cache, 3, 960));
  expect_group(cache, 0, 60, 7, 8, 68, 2, 0);
  expect_group(cache, 1, 2, 59, 2, 68, 8, 64);
  expect_sums(cache, 0);
  ok(kvc_sequence_remove(cache, 3));

  /* reset_reuse drops every cached block without counting evictions, as
   * kvc_cache_stats_t does. */
  ok(kvc_cache_reset_reuse(cache));
  expect_group(cache, 0, 0, 0, 8, 68, 2, 0);
  expect_group(cache, 1, 0, 0, 2, 68, 8, 64);
  expect_sums(cache, 128);
  ok(kvc_cache_check(cache));
  kvc_cache_destroy(cache);
}

static void test_group_stats_arguments(void **state) {
  (void)state;
  kvc_cache_t *cache = windowed_cache();
  kvc_group_stats_t s = KVC_GROUP_STATS_INIT;
  s.pool = 77;
  s.released_blocks = 77;
  assert_fails(kvc_cache_get_group_stats(cache, 2, &s), KVC_ERR_INVALID_ARGUMENT,
               "group must be < num_groups (2), got 2");
  assert_string_equal(kvc_last_error_message(), "group must be < num_groups (2), got 2");
  assert_fails(kvc_cache_get_group_stats(cache, UINT32_MAX, &s), KVC_ERR_INVALID_ARGUMENT,
               "group must be < num_groups (2), got 4294967295");
  assert_fails(kvc_cache_get_group_stats(cache, 0, NULL), KVC_ERR_INVALID_ARGUMENT,
               "out must not be NULL");
  assert_fails(kvc_cache_get_group_stats(NULL, 0, &s), KVC_ERR_INVALID_ARGUMENT,
               "cache must not be NULL");
  s.struct_size = 0;
  assert_fails(kvc_cache_get_group_stats(cache, 0, &s), KVC_ERR_INVALID_ARGUMENT,
               "out->struct_size must be set (use its _init function), got 0");
  /* Untouched on failure. */
  assert_int_equal(s.pool, 77);
  assert_int_equal(s.released_blocks, 77);
  kvc_cache_destroy(cache);
}

static void test_group_stats_struct_size(void **state) {
  (void)state;
  /* kvc_group_stats_init gives what the macro gives; NULL is ignored. */
  kvc_group_stats_t by_macro = KVC_GROUP_STATS_INIT;
  kvc_group_stats_t by_init;
  memset(&by_init, 0xab, sizeof by_init);
  kvc_group_stats_init(&by_init);
  assert_memory_equal(&by_macro, &by_init, sizeof by_init);
  assert_int_equal(by_init.struct_size, sizeof(kvc_group_stats_t));
  kvc_group_stats_init(NULL);

  kvc_cache_t *cache = windowed_cache();
  int32_t prompt[PROMPT];
  fill(prompt, PROMPT, 1000);
  uint64_t cached = 0;
  ok(kvc_sequence_add(cache, 1, prompt, PROMPT, NULL, NULL, &cached));
  ok(kvc_sequence_commit(cache, 1, PROMPT));

  /* An older, smaller struct: only its bytes are written. */
  kvc_group_stats_t small;
  memset(&small, 0xcd, sizeof small);
  small.struct_size = (uint32_t)offsetof(kvc_group_stats_t, pool_free_blocks);
  ok(kvc_cache_get_group_stats(cache, 1, &small));
  assert_int_equal(small.struct_size, offsetof(kvc_group_stats_t, pool_free_blocks));
  assert_int_equal(small.pool, 0);
  assert_int_equal(small.in_use_blocks, 2);
  assert_int_equal(small.cached_blocks, 6);
  assert_int_equal(small.pool_free_blocks, 0xcdcdcdcdcdcdcdcdull);
  assert_int_equal(small.released_blocks, 0xcdcdcdcdcdcdcdcdull);

  /* A newer, larger struct: its unknown tail is zeroed. */
  struct {
    kvc_group_stats_t known;
    uint64_t appended[2];
  } big;
  memset(&big, 0xcd, sizeof big);
  big.known.struct_size = (uint32_t)sizeof big;
  ok(kvc_cache_get_group_stats(cache, 1, &big.known));
  assert_int_equal(big.known.struct_size, sizeof big);
  assert_int_equal(big.known.released_blocks, 6);
  assert_int_equal(big.known.pool_free_blocks, 112);
  assert_int_equal(big.appended[0], 0);
  assert_int_equal(big.appended[1], 0);
  kvc_cache_destroy(cache);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_full_and_windowed_group),
      cmocka_unit_test(test_group_stats_arguments),
      cmocka_unit_test(test_group_stats_struct_size),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
