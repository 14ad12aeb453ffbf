/* C API of the disk tier (tiers.h): its setting and argument errors, the
 * refusals at create (missing directory, budget below one block), a round
 * trip through the disk with the KV bytes read back bit for bit, a restart
 * on the same directory that keeps the prefix cache, and the per-tier
 * statistics with their struct_size contract. Black box: only the public
 * header; kvc_cache_flush_tiers instead of any waiting. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include <kvcache/kvcache.h>

#include "kvc_test_assert.h"

#define ok(call) assert_int_equal((call), KVC_OK)

enum { T = 4, BLOCK_BYTES = 2 * T * 4 * 4, MAX_BLOCKS = 8 }; /* 1 layer, K+V, 1 head, dim 4, f32 */

static char dir[64];

static int make_dir(void **state) {
  (void)state;
  strcpy(dir, "/tmp/kvc-disk-c-XXXXXX");
  return mkdtemp(dir) == NULL ? -1 : 0;
}

static int remove_dir(void **state) {
  (void)state;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  return system(cmd) == 0 ? 0 : -1;
}

static kvc_config_t *config(uint64_t disk_bytes) {
  kvc_config_t *c = NULL;
  ok(kvc_config_create(&c));
  ok(kvc_config_set_num_layers(c, 1));
  ok(kvc_config_set_kv_heads(c, 1));
  ok(kvc_config_set_head_dim(c, 4));
  ok(kvc_config_set_dtype(c, KVC_DTYPE_F32));
  ok(kvc_config_set_tokens_per_block(c, T));
  ok(kvc_config_set_max_tokens(c, MAX_BLOCKS * T));
  ok(kvc_config_set_partial_reuse(c, false));
  if (disk_bytes != 0) ok(kvc_config_set_disk_cache(c, dir, disk_bytes));
  return c;
}

static kvc_cache_t *cache_with_disk(void) {
  kvc_config_t *c = config(1 << 20);
  kvc_cache_t *cache = NULL;
  ok(kvc_cache_create(c, &cache));
  kvc_config_destroy(c);
  return cache;
}

static void setting_and_errors(void **state) {
  (void)state;
  kvc_config_t *c = config(0);
  const char *d = NULL;
  uint64_t bytes = 7;
  ok(kvc_config_get_disk_cache(c, &d, &bytes));
  assert_string_equal(d, "");
  assert_int_equal(bytes, 0);
  ok(kvc_config_set_disk_cache(c, dir, 4096));
  ok(kvc_config_get_disk_cache(c, &d, &bytes));
  assert_string_equal(d, dir);
  assert_int_equal(bytes, 4096);
  assert_fails(kvc_config_set_disk_cache(c, dir, 0), KVC_ERR_INVALID_ARGUMENT,
               "disk cache bytes must be > 0 for directory");
  assert_fails(kvc_config_set_disk_cache(c, NULL, 5), KVC_ERR_INVALID_ARGUMENT,
               "disk cache bytes must be 0 without a directory, got 5");
  ok(kvc_config_get_disk_cache(c, &d, &bytes)); /* unchanged by the failures */
  assert_int_equal(bytes, 4096);
  assert_fails(kvc_config_set_disk_cache(NULL, dir, 1), KVC_ERR_INVALID_ARGUMENT,
               "config must not be NULL");
  kvc_cache_t *cache = NULL;
  ok(kvc_config_set_disk_cache(c, dir, 100)); /* a record is 192 + 128 bytes */
  assert_fails(kvc_cache_create(c, &cache), KVC_ERR_INVALID_ARGUMENT,
               "disk cache bytes 100 is below one block record (320 bytes");
  ok(kvc_config_set_disk_cache(c, "/nonexistent/kvc-disk", 1 << 20));
  assert_fails(kvc_cache_create(c, &cache), KVC_ERR_INVALID_ARGUMENT,
               "disk cache directory '/nonexistent/kvc-disk' cannot be used");
  /* The stateful mode has no stores: refused, not ignored. */
  ok(kvc_config_set_disk_cache(c, dir, 1 << 20));
  kvc_stateful_t *stateful = NULL;
  kvc_stateful_options_t so = KVC_STATEFUL_OPTIONS_INIT;
  so.batch = 1;
  assert_fails(kvc_stateful_create(c, &so, &stateful), KVC_ERR_UNSUPPORTED,
               "the stateful mode has no disk tier");
  ok(kvc_config_set_disk_cache(c, NULL, 0));
  ok(kvc_cache_create(c, &cache));
  kvc_tier_stats_t s = KVC_TIER_STATS_INIT;
  assert_fails(kvc_cache_get_tier_stats(cache, KVC_TIER_DISK, &s), KVC_ERR_NOT_FOUND,
               "this cache has no disk tier");
  assert_fails(kvc_cache_get_tier_stats(cache, KVC_TIER_HOST, &s), KVC_ERR_INVALID_ARGUMENT,
               "tier must be KVC_TIER_DISK (2) or KVC_TIER_REMOTE (3), got 1");
  ok(kvc_cache_flush_tiers(cache));
  assert_fails(kvc_cache_flush_tiers(NULL), KVC_ERR_INVALID_ARGUMENT, "cache must not be NULL");
  kvc_cache_destroy(cache);
  kvc_config_destroy(c);
}

static unsigned char byte_of(int32_t token, uint64_t i) {
  return (unsigned char)((uint32_t)token * 131u + (uint32_t)i * 7u + 1u);
}

/* Writes (or, check != 0, compares) the KV of tokens [from, to) of `id`. */
static void kv(kvc_cache_t *cache, uint64_t id, const int32_t *tokens, size_t from, size_t to,
               int check) {
  kvc_layer_view_t v = KVC_LAYER_VIEW_INIT;
  ok(kvc_cache_layer_view(cache, 0, &v));
  int32_t ids[MAX_BLOCKS];
  size_t n = 0;
  ok(kvc_sequence_block_ids(cache, id, 0, ids, MAX_BLOCKS, &n));
  for (size_t p = from; p < to; ++p)
    for (uint32_t k = 0; k < 2; ++k) {
      unsigned char *row = (unsigned char *)v.base + (uint64_t)ids[p / T] * v.block_stride +
                           k * v.kv_stride + (p % T) * v.token_stride;
      for (uint64_t i = 0; i < 16; ++i) {
        const unsigned char want = byte_of(tokens[p], i + 16 * k + 32 * p);
        if (check) assert_int_equal(row[i], want);
        else row[i] = want;
      }
    }
}

static void cache_prompt(kvc_cache_t *cache, uint64_t id, const int32_t *t, size_t n,
                         uint64_t expect_cached) {
  uint64_t cached = 99;
  ok(kvc_sequence_add(cache, id, t, n, NULL, NULL, &cached));
  assert_int_equal(cached, expect_cached);
  kv(cache, id, t, 0, cached, 1);
  kv(cache, id, t, cached, n, 0);
  ok(kvc_sequence_commit(cache, id, n));
  ok(kvc_sequence_remove(cache, id));
}

static kvc_tier_stats_t disk_stats(kvc_cache_t *cache) {
  ok(kvc_cache_flush_tiers(cache));
  kvc_tier_stats_t s = KVC_TIER_STATS_INIT;
  ok(kvc_cache_get_tier_stats(cache, KVC_TIER_DISK, &s));
  return s;
}

static void round_trip_and_restart(void **state) {
  (void)state;
  int32_t a[13], b[32];
  for (int i = 0; i < 13; ++i) a[i] = 100 + i;
  for (int i = 0; i < 32; ++i) b[i] = 900 + i;
  kvc_cache_t *cache = cache_with_disk();
  cache_prompt(cache, 1, a, 13, 0);
  cache_prompt(cache, 2, b, 32, 0); /* evicts a's 3 full blocks */
  /* Written through at commit (CPU backend): a's 3 full blocks and b's 8. */
  kvc_tier_stats_t s = disk_stats(cache);
  assert_int_equal(s.tier, KVC_TIER_DISK);
  assert_int_equal(s.offered_blocks, 11);
  assert_int_equal(s.stored_blocks, 11);
  assert_int_equal(s.blocks, 11);
  assert_int_equal(s.capacity_bytes, 1 << 20);
  assert_int_equal(s.dropped_blocks, 0);
  assert_int_equal(s.write_count, 11);
  /* The probe looks at the tree only (kvc_cache_probe): a's blocks are on
   * the disk, not in the tree, so it finds none of what the add loads. */
  uint64_t probed = 99;
  ok(kvc_cache_probe(cache, a, 13, NULL, &probed));
  assert_int_equal(probed, 0);
  cache_prompt(cache, 3, a, 13, 12); /* back from the disk, bit for bit */
  s = disk_stats(cache);
  assert_int_equal(s.onboarded_blocks, 3);
  assert_int_equal(s.onboarded_bytes, 3 * BLOCK_BYTES);
  /* Blocks loaded from the disk are not written to it again. */
  assert_int_equal(s.offered_blocks, 11);
  assert_int_equal(s.stored_blocks, 11);
  assert_int_equal(s.hits, 3);
  assert_int_equal(s.rejected, 0);
  /* b's first 4 blocks are in the tree, a evicted its last 4 to the disk:
   * 7 blocks are reused (the last token is computed), a leaves again. */
  ok(kvc_cache_probe(cache, b, 32, NULL, &probed));
  assert_int_equal(probed, 16);
  cache_prompt(cache, 4, b, 32, 28);
  kvc_cache_destroy(cache);
  /* A new cache on the directory finds what the first one stored. */
  cache = cache_with_disk();
  s = disk_stats(cache);
  assert_true(s.blocks >= 3);
  cache_prompt(cache, 5, a, 13, 12);
  /* struct_size: an older, smaller struct gets only its own fields. */
  kvc_tier_stats_t small;
  memset(&small, 0xab, sizeof small);
  small.struct_size = offsetof(kvc_tier_stats_t, capacity_bytes);
  ok(kvc_cache_get_tier_stats(cache, KVC_TIER_DISK, &small));
  assert_int_equal(small.tier, KVC_TIER_DISK);
  assert_int_equal(small.capacity_bytes, 0xababababababababull);
  small.struct_size = 0;
  assert_fails(kvc_cache_get_tier_stats(cache, KVC_TIER_DISK, &small), KVC_ERR_INVALID_ARGUMENT,
               "out->struct_size must be set");
  kvc_cache_destroy(cache);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(setting_and_errors),
      cmocka_unit_test(round_trip_and_restart),
  };
  return cmocka_run_group_tests(tests, make_dir, remove_dir);
}
