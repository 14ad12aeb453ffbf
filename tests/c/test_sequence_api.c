/* C API of sequences, batches and statistics: statuses and messages of every
 * argument error, nothing changed on failure, capacity-in/count-out
 * buffers, exact block tables and slot mappings. Black box: only the public
 * header. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <kvcache/kvcache.h>

#include "kvc_test_assert.h"

#define ok(call) assert_int_equal((call), KVC_OK)


/* 16 blocks of 4 tokens, 2 layers, f32. */
static kvc_cache_t *small_cache(uint32_t blocks) {
  kvc_config_t *c = NULL;
  ok(kvc_config_create(&c));
  ok(kvc_config_set_num_layers(c, 2));
  ok(kvc_config_set_kv_heads(c, 2));
  ok(kvc_config_set_head_dim(c, 4));
  ok(kvc_config_set_dtype(c, KVC_DTYPE_F32));
  ok(kvc_config_set_tokens_per_block(c, 4));
  ok(kvc_config_set_max_tokens(c, blocks * 4ull));
  kvc_cache_t *cache = NULL;
  ok(kvc_cache_create(c, &cache));
  kvc_config_destroy(c);
  return cache;
}

static kvc_cache_stats_t stats_of(const kvc_cache_t *cache) {
  kvc_cache_stats_t s = KVC_CACHE_STATS_INIT;
  ok(kvc_cache_get_stats(cache, &s));
  return s;
}

static const int32_t P10[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};

static void test_add_arguments(void **state) {
  (void)state;
  kvc_cache_t *cache = small_cache(16);
  uint64_t cached = 77;
  assert_fails(kvc_sequence_add(NULL, 1, P10, 10, NULL, NULL, &cached), KVC_ERR_INVALID_ARGUMENT,
               "cache must not be NULL");
  assert_fails(kvc_sequence_add(cache, 1, NULL, 10, NULL, NULL, &cached), KVC_ERR_INVALID_ARGUMENT,
               "tokens must not be NULL when num_tokens is 10");
  assert_fails(kvc_sequence_add(cache, 1, P10, 0, NULL, NULL, &cached), KVC_ERR_INVALID_ARGUMENT,
               "prompt cannot be empty");
  kvc_sequence_options_t o = KVC_SEQUENCE_OPTIONS_INIT;
  o.prompt_priority = 101;
  assert_fails(kvc_sequence_add(cache, 1, P10, 10, &o, NULL, &cached), KVC_ERR_INVALID_ARGUMENT,
               "options->prompt_priority must be in 0..100, got 101");
  kvc_sequence_options_init(&o);
  o.salt_size = 3;
  assert_fails(kvc_sequence_add(cache, 1, P10, 10, &o, NULL, &cached), KVC_ERR_INVALID_ARGUMENT,
               "options->salt must not be NULL when options->salt_size is 3");
  kvc_sequence_options_init(&o);
  kvc_extra_key_t key = {2, 0, "img", 3};
  o.extra_keys = &key;
  o.num_extra_keys = 1;
  assert_fails(kvc_sequence_add(cache, 1, P10, 10, &o, NULL, &cached), KVC_ERR_INVALID_ARGUMENT,
               "options->extra_keys[0].length must be > 0, got 0");
  kvc_sequence_options_init(&o);
  o.struct_size = 0;
  assert_fails(kvc_sequence_add(cache, 1, P10, 10, &o, NULL, &cached), KVC_ERR_INVALID_ARGUMENT,
               "options->struct_size must be set");
  assert_int_equal(cached, 77); /* untouched on failure */
  assert_int_equal(stats_of(cache).num_sequences, 0);
  assert_int_equal(stats_of(cache).free_blocks, 16);

  ok(kvc_sequence_add(cache, 1, P10, 10, NULL, NULL, &cached));
  assert_int_equal(cached, 0);
  assert_fails(kvc_sequence_add(cache, 1, P10, 10, NULL, NULL, &cached), KVC_ERR_ALREADY_EXISTS,
               "sequence 1 already exists");
  ok(kvc_cache_check(cache));
  kvc_cache_destroy(cache);
}

static void test_sequence_lifecycle_statuses(void **state) {
  (void)state;
  kvc_cache_t *cache = small_cache(16);
  ok(kvc_sequence_add(cache, 5, P10, 10, NULL, NULL, NULL));
  assert_fails(kvc_sequence_extend(cache, 6, P10, 1, NULL), KVC_ERR_NOT_FOUND,
               "no sequence 6 in this cache");
  assert_fails(kvc_sequence_extend(cache, 5, NULL, 2, NULL), KVC_ERR_INVALID_ARGUMENT,
               "tokens must not be NULL when num_tokens is 2");
  ok(kvc_sequence_extend(cache, 5, NULL, 0, NULL));
  assert_fails(kvc_sequence_commit(cache, 5, 11), KVC_ERR_INVALID_ARGUMENT,
               "num_computed (11) exceeds the length (10 tokens) of sequence 5");
  assert_fails(kvc_sequence_rewind(cache, 5, 11), KVC_ERR_INVALID_ARGUMENT,
               "cannot rewind 11 tokens: sequence 5 has only 10");
  assert_fails(kvc_sequence_fork(cache, 5, 5), KVC_ERR_ALREADY_EXISTS, "sequence 5 already exists");
  assert_fails(kvc_sequence_fork(cache, 9, 10), KVC_ERR_NOT_FOUND, "no sequence 9");
  assert_fails(kvc_sequence_remove(cache, 9), KVC_ERR_NOT_FOUND, "no sequence 9");
  assert_fails(kvc_sequence_unpin(cache, 5), KVC_ERR_NOT_FOUND, "sequence 5 is not pinned");

  ok(kvc_sequence_commit(cache, 5, 10));
  ok(kvc_sequence_pin(cache, 5));
  assert_fails(kvc_sequence_pin(cache, 5), KVC_ERR_ALREADY_EXISTS, "sequence 5 is already pinned");
  ok(kvc_sequence_fork(cache, 5, 6));
  kvc_sequence_desc_t d = KVC_SEQUENCE_DESC_INIT;
  ok(kvc_sequence_describe(cache, 6, &d));
  assert_int_equal(d.num_tokens, 10);
  assert_int_equal(d.prompt_tokens, 10);
  assert_int_equal(d.committed_tokens, 10);
  assert_int_equal(d.num_blocks, 3);
  assert_int_equal(d.prompt_priority, KVC_DEFAULT_PRIORITY);
  uint64_t needed = 0;
  ok(kvc_sequence_blocks_needed(cache, 6, 1, &needed));
  assert_int_equal(needed, 1); /* the shared tail is copied */
  ok(kvc_sequence_blocks_needed(cache, 6, 3, &needed));
  assert_int_equal(needed, 2);
  ok(kvc_sequence_rewind(cache, 6, 6));
  ok(kvc_sequence_describe(cache, 6, &d));
  assert_int_equal(d.num_blocks, 1);
  assert_int_equal(d.committed_tokens, 4);

  assert_fails(kvc_cache_reset_reuse(cache), KVC_ERR_INVALID_STATE, "blocks are in use");
  ok(kvc_sequence_remove(cache, 5));
  ok(kvc_sequence_remove(cache, 6));
  kvc_cache_stats_t s = stats_of(cache);
  assert_int_equal(s.in_use_blocks, 2); /* the pin */
  assert_int_equal(s.num_pinned, 1);
  ok(kvc_sequence_unpin(cache, 5));
  ok(kvc_cache_reset_reuse(cache));
  s = stats_of(cache);
  assert_int_equal(s.free_blocks, 16);
  assert_int_equal(s.cached_blocks, 0);
  ok(kvc_cache_check(cache));
  kvc_cache_destroy(cache);
}

static void test_block_ids_buffer(void **state) {
  (void)state;
  kvc_cache_t *cache = small_cache(16);
  ok(kvc_sequence_add(cache, 1, P10, 10, NULL, NULL, NULL));
  int32_t ids[3] = {-7, -7, -7};
  size_t count = 0;
  assert_fails(kvc_sequence_block_ids(cache, 1, 0, ids, 2, &count), KVC_ERR_BUFFER_TOO_SMALL,
               "ids holds 2 entries but sequence 1 has 3 blocks");
  assert_int_equal(count, 3);
  assert_int_equal(ids[0], -7);
  count = 0;
  assert_int_equal(kvc_sequence_block_ids(cache, 1, 0, NULL, 0, &count), KVC_ERR_BUFFER_TOO_SMALL);
  assert_int_equal(count, 3);
  ok(kvc_sequence_block_ids(cache, 1, 0, ids, 3, &count));
  assert_int_equal(count, 3);
  assert_int_equal(ids[0], 0);
  assert_int_equal(ids[1], 1);
  assert_int_equal(ids[2], 2);
  assert_fails(kvc_sequence_block_ids(cache, 1, 1, ids, 3, &count), KVC_ERR_INVALID_ARGUMENT,
               "group must be < num_groups (1), got 1");
  kvc_cache_destroy(cache);
}

static void test_out_of_blocks_changes_nothing(void **state) {
  (void)state;
  kvc_cache_t *cache = small_cache(4);
  ok(kvc_sequence_add(cache, 1, P10, 10, NULL, NULL, NULL)); /* 3 of 4 blocks */
  const kvc_cache_stats_t before = stats_of(cache);
  uint64_t cached = 5;
  assert_fails(kvc_sequence_add(cache, 2, P10, 10, NULL, NULL, &cached), KVC_ERR_OUT_OF_BLOCKS,
               "adding the prompt needs 3 blocks per layer group but only 1 are free (1) or "
               "evictable (0)");
  assert_int_equal(cached, 5);
  assert_fails(kvc_sequence_extend(cache, 1, P10, 7, NULL), KVC_ERR_OUT_OF_BLOCKS,
               "extending sequence 1 needs 2 blocks");
  const kvc_cache_stats_t after = stats_of(cache);
  assert_memory_equal(&before, &after, sizeof(before));
  kvc_sequence_desc_t d = KVC_SEQUENCE_DESC_INIT;
  ok(kvc_sequence_describe(cache, 1, &d));
  assert_int_equal(d.num_tokens, 10);
  ok(kvc_cache_check(cache));
  kvc_cache_destroy(cache);
}

/* kvc_cache_make_room: evicts cached blocks (never one in use) until the
 * sets asked for are free, or nothing cached is left; the sets free out. */
static void test_make_room(void **state) {
  (void)state;
  uint64_t free_sets = 99;
  assert_fails(kvc_cache_make_room(NULL, 1, NULL, &free_sets), KVC_ERR_INVALID_ARGUMENT, "cache");
  assert_int_equal(free_sets, 99);
  kvc_cache_t *cache = small_cache(8);
  ok(kvc_sequence_add(cache, 1, P10, 10, NULL, NULL, NULL));
  ok(kvc_sequence_commit(cache, 1, 10));
  ok(kvc_sequence_remove(cache, 1));
  ok(kvc_sequence_add(cache, 2, P10 + 4, 6, NULL, NULL, NULL)); /* in use: 2 blocks */
  const kvc_cache_stats_t before = stats_of(cache);
  assert_true(before.cached_blocks > 0);
  ok(kvc_cache_make_room(cache, 0, NULL, &free_sets));
  assert_int_equal(free_sets, before.free_blocks);
  ok(kvc_cache_make_room(cache, before.free_blocks + 1, NULL, NULL));
  kvc_cache_stats_t s = stats_of(cache);
  assert_int_equal(s.free_blocks, before.free_blocks + 1);
  assert_int_equal(s.evicted_blocks, before.evicted_blocks + 1);
  ok(kvc_cache_make_room(cache, UINT64_MAX, NULL, &free_sets));
  s = stats_of(cache);
  assert_int_equal(s.cached_blocks, 0);
  assert_int_equal(s.in_use_blocks, before.in_use_blocks);
  assert_int_equal(free_sets, s.free_blocks);
  assert_int_equal(s.free_blocks + s.in_use_blocks, 8);
  ok(kvc_cache_check(cache));
  kvc_cache_destroy(cache);
}

/* A decode step short of blocks is refused whole: no sequence grows. */
static void test_out_of_blocks_in_a_decode_step(void **state) {
  (void)state;
  kvc_cache_t *cache = small_cache(4);
  ok(kvc_sequence_add(cache, 1, P10, 8, NULL, NULL, NULL)); /* 2 blocks each, none free */
  ok(kvc_sequence_add(cache, 2, P10, 8, NULL, NULL, NULL));
  const kvc_cache_stats_t before = stats_of(cache);
  const uint64_t ids[2] = {1, 2};
  const int32_t next[2] = {7, 7};
  assert_fails(kvc_batch_extend(cache, ids, next, 2, NULL), KVC_ERR_OUT_OF_BLOCKS,
               "this decode step needs 2 blocks per layer group but only 0 are free (0) or "
               "evictable (0)");
  const kvc_cache_stats_t after = stats_of(cache);
  assert_memory_equal(&before, &after, sizeof(before));
  for (uint64_t id = 1; id <= 2; ++id) {
    kvc_sequence_desc_t d = KVC_SEQUENCE_DESC_INIT;
    ok(kvc_sequence_describe(cache, id, &d));
    assert_int_equal(d.num_tokens, 8);
  }
  ok(kvc_cache_check(cache));
  kvc_cache_destroy(cache);
}

static void test_probe_and_stats(void **state) {
  (void)state;
  kvc_cache_t *cache = small_cache(16);
  uint64_t cached = 9;
  ok(kvc_cache_probe(cache, P10, 10, NULL, &cached));
  assert_int_equal(cached, 0);
  ok(kvc_sequence_add(cache, 1, P10, 10, NULL, NULL, NULL));
  ok(kvc_sequence_commit(cache, 1, 10));
  ok(kvc_sequence_remove(cache, 1));
  ok(kvc_cache_probe(cache, P10, 10, NULL, &cached));
  assert_int_equal(cached, 9); /* 2 full blocks + 1 of the published tail [8, 9] */
  kvc_sequence_options_t salted = KVC_SEQUENCE_OPTIONS_INIT;
  salted.salt = "";
  salted.salt_size = 0;
  ok(kvc_cache_probe(cache, P10, 10, &salted, &cached));
  assert_int_equal(cached, 0); /* empty salt != no salt */
  kvc_sequence_options_t lora0 = KVC_SEQUENCE_OPTIONS_INIT;
  lora0.has_lora = true;
  ok(kvc_cache_probe(cache, P10, 10, &lora0, &cached));
  assert_int_equal(cached, 0);
  assert_fails(kvc_cache_probe(cache, P10, 10, NULL, NULL), KVC_ERR_INVALID_ARGUMENT,
               "cached_tokens must not be NULL");

  ok(kvc_sequence_add(cache, 2, P10, 10, NULL, NULL, &cached));
  assert_int_equal(cached, 9);
  kvc_cache_stats_t s = stats_of(cache);
  assert_int_equal(s.num_blocks, 16);
  assert_int_equal(s.in_use_blocks, 3);
  assert_int_equal(s.cached_blocks, 1); /* the copied partial tail stays cached */
  assert_int_equal(s.free_blocks, 12);
  assert_int_equal(s.reused_blocks, 3);
  assert_int_equal(s.missed_blocks, 3);
  assert_true(s.hit_rate > 0.49 && s.hit_rate < 0.51);
  assert_int_equal(s.evicted_blocks, 0);
  assert_int_equal(s.num_sequences, 1);
  assert_int_equal(s.tree_nodes, 3);
  kvc_cache_destroy(cache);
}

static void test_batch_tables(void **state) {
  (void)state;
  kvc_cache_t *cache = small_cache(16);
  ok(kvc_sequence_add(cache, 10, P10, 10, NULL, NULL, NULL)); /* blocks 0 1 2 */
  ok(kvc_sequence_add(cache, 20, P10, 4, NULL, NULL, NULL));  /* block 3 */
  const uint64_t ids[2] = {10, 20};

  int32_t table[2][4];
  memset(table, 0x55, sizeof(table));
  size_t needed = 0;
  assert_fails(kvc_batch_block_table(cache, 0, ids, 2, &table[0][0], 2, -1, &needed),
               KVC_ERR_BUFFER_TOO_SMALL, "the batch needs 3");
  assert_int_equal(needed, 3);
  assert_int_equal(table[0][0], 0x55555555);
  ok(kvc_batch_block_table(cache, 0, ids, 2, &table[0][0], 4, -1, &needed));
  const int32_t want[2][4] = {{0, 1, 2, -1}, {3, -1, -1, -1}};
  assert_memory_equal(table, want, sizeof(want));

  int32_t indptr[3], indices[4], last[2];
  size_t n = 0;
  assert_fails(kvc_batch_block_table_csr(cache, 0, ids, 2, indptr, indices, 3, last, &n),
               KVC_ERR_BUFFER_TOO_SMALL, "indices holds 3 entries but the batch needs 4");
  assert_int_equal(n, 4);
  ok(kvc_batch_block_table_csr(cache, 0, ids, 2, indptr, indices, 4, last, &n));
  const int32_t want_indptr[3] = {0, 3, 4}, want_indices[4] = {0, 1, 2, 3}, want_last[2] = {2, 4};
  assert_memory_equal(indptr, want_indptr, sizeof(want_indptr));
  assert_memory_equal(indices, want_indices, sizeof(want_indices));
  assert_memory_equal(last, want_last, sizeof(want_last));

  int32_t lens[2];
  ok(kvc_batch_sequence_lengths(cache, ids, 2, lens));
  assert_int_equal(lens[0], 10);
  assert_int_equal(lens[1], 4);
  const uint64_t bad[2] = {10, 30};
  assert_fails(kvc_batch_sequence_lengths(cache, bad, 2, lens), KVC_ERR_NOT_FOUND,
               "ids[1]: no sequence 30");

  /* Slot mapping: the whole prompts first, then only what is new. */
  int64_t slots[16];
  int32_t added[2];
  assert_fails(kvc_batch_slot_mapping(cache, 0, ids, 2, slots, 13, &n, added),
               KVC_ERR_BUFFER_TOO_SMALL, "slots holds 13 entries but the batch needs 14");
  assert_int_equal(n, 14);
  ok(kvc_batch_slot_mapping(cache, 0, ids, 2, slots, 16, &n, added));
  assert_int_equal(n, 14);
  assert_int_equal(added[0], 10);
  assert_int_equal(added[1], 4);
  for (int i = 0; i < 10; ++i) assert_int_equal(slots[i], i);
  for (int i = 0; i < 4; ++i) assert_int_equal(slots[10 + i], 12 + i);
  const int32_t next[2] = {100, 200};
  ok(kvc_batch_extend(cache, ids, next, 2, NULL));
  ok(kvc_batch_slot_mapping(cache, 0, ids, 2, slots, 16, &n, added));
  assert_int_equal(n, 2);
  assert_int_equal(slots[0], 10); /* block 2, row 2 */
  assert_int_equal(slots[1], 16); /* new block 4, row 0 */
  ok(kvc_batch_slot_mapping(cache, 0, ids, 2, slots, 16, &n, added));
  assert_int_equal(n, 0);
  const uint64_t twice[2] = {10, 10};
  assert_fails(kvc_batch_extend(cache, twice, next, 2, NULL), KVC_ERR_INVALID_ARGUMENT,
               "ids[1] = 10 appears twice in the batch");
  assert_fails(kvc_batch_extend(cache, NULL, next, 2, NULL), KVC_ERR_INVALID_ARGUMENT,
               "ids must not be NULL when count is 2");

  /* Reused tokens map to -1. */
  ok(kvc_sequence_commit(cache, 10, 11));
  uint64_t cached = 0;
  ok(kvc_sequence_add(cache, 30, P10, 9, NULL, NULL, &cached));
  assert_int_equal(cached, 8);
  const uint64_t id30 = 30;
  ok(kvc_batch_slot_mapping(cache, 0, &id30, 1, slots, 16, &n, NULL));
  assert_int_equal(n, 9);
  for (int i = 0; i < 8; ++i) assert_int_equal(slots[i], -1);
  assert_true(slots[8] >= 0);
  ok(kvc_cache_check(cache));
  kvc_cache_destroy(cache);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_add_arguments),
      cmocka_unit_test(test_sequence_lifecycle_statuses),
      cmocka_unit_test(test_block_ids_buffer),
      cmocka_unit_test(test_out_of_blocks_changes_nothing),
      cmocka_unit_test(test_out_of_blocks_in_a_decode_step),
      cmocka_unit_test(test_make_room),
      cmocka_unit_test(test_probe_and_stats),
      cmocka_unit_test(test_batch_tables),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
