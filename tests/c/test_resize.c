/* C API of the in-place resize (cache.h: kvc_cache_plan_resize,
 * kvc_cache_resize; config.h: max_primary_bytes): the plan follows the
 * seed's formula and changes nothing; a grow keeps the pool's address, the
 * layer views' bases and the blocks of a sequence in flight, and describe
 * and the statistics report the new size; a shrink evicts the cached blocks
 * past the end (REMOVED events) and refuses over a block in use with
 * nothing changed; argument errors and their messages. Black box: only the
 * public header. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <kvcache/kvcache.h>

#include "kvc_test_assert.h"

#define ok(call) assert_int_equal((call), KVC_OK)

/* One layer, 1 kv head of dim 8, f32, 4 tokens per block: 256-byte blocks. */
enum { TPB = 4, BLOCK = 256 };

static kvc_cache_t *make_cache(uint64_t blocks, uint64_t max_blocks) {
  kvc_config_t *c = NULL;
  ok(kvc_config_create(&c));
  ok(kvc_config_set_num_layers(c, 1));
  ok(kvc_config_set_kv_heads(c, 1));
  ok(kvc_config_set_head_dim(c, 8));
  ok(kvc_config_set_dtype(c, KVC_DTYPE_F32));
  ok(kvc_config_set_tokens_per_block(c, TPB));
  ok(kvc_config_set_primary_bytes(c, blocks * BLOCK));
  ok(kvc_config_set_max_primary_bytes(c, max_blocks * BLOCK));
  uint64_t got = 0;
  ok(kvc_config_get_max_primary_bytes(c, &got));
  assert_int_equal(got, max_blocks * BLOCK);
  ok(kvc_config_set_event_buffer_size(c, 256));
  kvc_cache_t *cache = NULL;
  ok(kvc_cache_create(c, &cache));
  kvc_config_destroy(c);
  return cache;
}

static void add_committed(kvc_cache_t *cache, uint64_t id, int32_t first, size_t n) {
  int32_t tokens[64];
  for (size_t i = 0; i < n; ++i) tokens[i] = first + (int32_t)i;
  uint64_t cached = 0;
  ok(kvc_sequence_add(cache, id, tokens, n, NULL, NULL, &cached));
  ok(kvc_sequence_commit(cache, id, n));
}

static kvc_cache_stats_t stats_of(const kvc_cache_t *cache) {
  kvc_cache_stats_t s = KVC_CACHE_STATS_INIT;
  ok(kvc_cache_get_stats(cache, &s));
  return s;
}

static uint64_t removed_events(kvc_cache_t *cache) {
  kvc_event_t ev[64];
  kvc_event_drain_t r = KVC_EVENT_DRAIN_INIT;
  ok(kvc_cache_drain_events(cache, ev, 64, NULL, 0, &r));
  uint64_t n = 0;
  for (uint64_t i = 0; i < r.events; ++i) n += ev[i].kind == KVC_EVENT_REMOVED;
  return n;
}

static void test_plan_follows_the_formula(void **state) {
  (void)state;
  kvc_cache_t *cache = make_cache(16, 1000);
  kvc_resize_inputs_t in;
  kvc_resize_inputs_init(&in);
  assert_true(in.free_gpu_memory_fraction == 0.9);
  const kvc_resize_inputs_t macro = KVC_RESIZE_INPUTS_INIT;
  assert_int_equal(macro.struct_size, in.struct_size);
  assert_true(macro.free_gpu_memory_fraction == in.free_gpu_memory_fraction);
  kvc_resize_plan_t zero;
  kvc_resize_plan_init(&zero);
  const kvc_resize_plan_t plan_macro = KVC_RESIZE_PLAN_INIT;
  assert_memory_equal(&zero, &plan_macro, sizeof zero);
  in.free_bytes = 200000;
  in.non_paged_bytes = 40000;
  in.forward_bytes = 60000;
  in.free_gpu_memory_fraction = 0.5;
  kvc_resize_plan_t plan = KVC_RESIZE_PLAN_INIT;
  uint64_t pools[4] = {0, 0, 0, 0};
  ok(kvc_cache_plan_resize(cache, &in, &plan, pools, 4));
  assert_int_equal(plan.mem_for_paged, 50000); /* (200000 - 40000 - 60000) * 0.5 */
  assert_int_equal(plan.free_bytes, 200000);
  assert_int_equal(plan.primary_bytes, 50000);
  assert_int_equal(plan.max_primary_bytes, 1000 * BLOCK);
  assert_int_equal(plan.num_pools, 1);
  assert_int_equal(plan.blocks_per_group, 50000 / BLOCK);
  assert_int_equal(plan.num_blocks, 50000 / BLOCK);
  assert_int_equal(pools[0], 50000 / BLOCK);
  assert_int_equal(pools[1], 0);
  assert_int_equal(plan.token_capacity, (50000 / BLOCK) * TPB);
  assert_int_equal(plan.total_bytes, (50000 / BLOCK) * BLOCK);
  assert_int_equal(stats_of(cache).num_blocks, 16); /* nothing changed */

  /* Bad input. */
  in.free_gpu_memory_fraction = 1.5;
  assert_fails(kvc_cache_plan_resize(cache, &in, &plan, NULL, 0), KVC_ERR_INVALID_ARGUMENT,
               "free_gpu_memory_fraction must be in (0, 1], got 1.5");
  in.free_gpu_memory_fraction = 1.0;
  in.free_bytes = 90000;
  assert_fails(kvc_cache_plan_resize(cache, &in, &plan, NULL, 0), KVC_ERR_INVALID_ARGUMENT,
               "non_paged_bytes (40000) plus forward_bytes (60000) exceed free_bytes (90000)");
  in.free_bytes = 0;
  assert_fails(kvc_cache_plan_resize(cache, &in, &plan, NULL, 0), KVC_ERR_INVALID_ARGUMENT,
               "reports no free memory");
  in.free_bytes = 100000 + BLOCK - 1;
  assert_fails(kvc_cache_plan_resize(cache, &in, &plan, NULL, 0), KVC_ERR_INVALID_ARGUMENT,
               "too few for one block");
  in.free_bytes = 200000;
  assert_fails(kvc_cache_plan_resize(cache, &in, &plan, NULL, 3), KVC_ERR_INVALID_ARGUMENT,
               "pool_blocks is NULL but pool_capacity is 3");
  assert_fails(kvc_cache_plan_resize(cache, NULL, &plan, NULL, 0), KVC_ERR_INVALID_ARGUMENT,
               "inputs must not be NULL");
  assert_fails(kvc_cache_plan_resize(cache, &in, NULL, NULL, 0), KVC_ERR_INVALID_ARGUMENT,
               "out must not be NULL");
  assert_fails(kvc_cache_plan_resize(NULL, &in, &plan, NULL, 0), KVC_ERR_INVALID_ARGUMENT,
               "cache");
  in.reserved = 1;
  assert_fails(kvc_cache_plan_resize(cache, &in, &plan, NULL, 0), KVC_ERR_INVALID_ARGUMENT,
               "inputs->reserved must be 0, got 1");
  kvc_cache_destroy(cache);
}

static void test_grow_and_shrink_in_place(void **state) {
  (void)state;
  kvc_cache_t *cache = make_cache(8, 64);
  add_committed(cache, 1, 0, 16);   /* blocks 0..3 */
  ok(kvc_sequence_remove(cache, 1)); /* cached */
  add_committed(cache, 2, 100, 8);  /* blocks 4..5, in use */
  (void)removed_events(cache);
  kvc_layer_view_t view = KVC_LAYER_VIEW_INIT;
  ok(kvc_cache_layer_view(cache, 0, &view));
  kvc_pool_desc_t pool = KVC_POOL_DESC_INIT;
  ok(kvc_cache_describe_pool(cache, 0, &pool));
  int32_t ids[8];
  size_t n = 0;
  ok(kvc_sequence_block_ids(cache, 2, 0, ids, 8, &n));
  assert_int_equal(n, 2);

  ok(kvc_cache_resize(cache, 64 * BLOCK));
  kvc_cache_desc_t d = KVC_CACHE_DESC_INIT;
  ok(kvc_cache_describe(cache, &d));
  assert_int_equal(d.num_blocks, 64);
  assert_int_equal(d.primary_bytes, 64 * BLOCK);
  assert_int_equal(d.token_capacity, 64 * TPB);
  kvc_pool_desc_t pool2 = KVC_POOL_DESC_INIT;
  ok(kvc_cache_describe_pool(cache, 0, &pool2));
  assert_ptr_equal(pool2.base, pool.base);
  assert_int_equal(pool2.num_blocks, 64);
  kvc_layer_view_t view2 = KVC_LAYER_VIEW_INIT;
  ok(kvc_cache_layer_view(cache, 0, &view2));
  assert_ptr_equal(view2.base, view.base);
  assert_int_equal(view2.num_blocks, 64);
  const kvc_cache_stats_t s = stats_of(cache);
  assert_int_equal(s.num_blocks, 64);
  assert_int_equal(s.in_use_blocks, 2);
  assert_int_equal(s.cached_blocks, 4);
  assert_int_equal(s.free_blocks, 58);
  int32_t ids2[8];
  ok(kvc_sequence_block_ids(cache, 2, 0, ids2, 8, &n));
  assert_memory_equal(ids, ids2, 2 * sizeof(int32_t));
  assert_int_equal(removed_events(cache), 0);

  /* A shrink past the block in use is refused, naming it; nothing changed. */
  assert_fails(kvc_cache_resize(cache, 5 * BLOCK), KVC_ERR_OUT_OF_BLOCKS,
               "block 5 of pool 0 (layer group 0) is in use");
  assert_int_equal(stats_of(cache).num_blocks, 64);
  assert_int_equal(stats_of(cache).cached_blocks, 4);
  /* A shrink to 6 cuts nothing in use: the cached blocks fit, none evicted. */
  ok(kvc_cache_resize(cache, 6 * BLOCK));
  assert_int_equal(stats_of(cache).num_blocks, 6);
  assert_int_equal(stats_of(cache).cached_blocks, 4);
  assert_int_equal(removed_events(cache), 0);
  /* A shrink to 3 blocks, once sequence 2 is gone, evicts the cached ones
   * past the end (blocks 3 of A, then 4 and 5 of B), reported as events. */
  ok(kvc_sequence_remove(cache, 2));
  const uint64_t evicted = stats_of(cache).evicted_blocks;
  ok(kvc_cache_resize(cache, 3 * BLOCK));
  assert_int_equal(stats_of(cache).num_blocks, 3);
  assert_int_equal(stats_of(cache).evicted_blocks - evicted, 3);
  assert_int_equal(removed_events(cache), 3);
  assert_int_equal(stats_of(cache).cached_blocks, 3);

  /* Bad budgets. */
  assert_fails(kvc_cache_resize(cache, BLOCK - 1), KVC_ERR_INVALID_ARGUMENT,
               "too few for one block of every layer group");
  assert_fails(kvc_cache_resize(cache, 65 * BLOCK), KVC_ERR_INVALID_ARGUMENT,
               "exceed the cache's ceiling of 16384 bytes");
  assert_fails(kvc_cache_resize(NULL, BLOCK), KVC_ERR_INVALID_ARGUMENT, "cache");
  assert_int_equal(stats_of(cache).num_blocks, 3);
  kvc_cache_destroy(cache);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_plan_follows_the_formula),
      cmocka_unit_test(test_grow_and_shrink_in_place),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
