/* Content oracle: K/V bytes derived from (token, position, layer, kv, head,
 * dim) are written through kvc_store_kv() at the slots the cache hands out,
 * and every reused, copied or forked block is read back through the layer
 * views and compared bit for bit, for f32, f16 and bf16. Black box: only the
 * public header. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <kvcache/kvcache.h>

#define LAYERS 2
#define HEADS 2
#define DIM 4
#define T 4
#define MAX_TOKENS 64

#define ok(call) assert_int_equal((call), KVC_OK)

/* The element bits of (token, position, layer, kv, head, dim): a finite,
 * normal value whose low bits mix every coordinate. */
static uint32_t mix(int32_t token, uint64_t pos, uint32_t layer, uint32_t kv, uint32_t h,
                    uint32_t d) {
  uint32_t x = (uint32_t)token * 2654435761u ^ (uint32_t)pos * 40503u ^ layer * 97u ^ kv * 13u ^
               h * 7u ^ d;
  x ^= x >> 15;
  x *= 2246822519u;
  x ^= x >> 13;
  return x;
}

static void put_elem(unsigned char *p, kvc_dtype_t dtype, uint32_t bits) {
  if (dtype == KVC_DTYPE_F32) {
    const uint32_t v = 0x3F800000u | (bits & 0x7FFFFFu);
    memcpy(p, &v, 4);
  } else if (dtype == KVC_DTYPE_F16) {
    const uint16_t v = (uint16_t)(0x3C00u | (bits & 0x3FFu));
    memcpy(p, &v, 2);
  } else {
    const uint16_t v = (uint16_t)(0x3F80u | (bits & 0x7Fu));
    memcpy(p, &v, 2);
  }
}

static size_t elem_size(kvc_dtype_t dtype) { return dtype == KVC_DTYPE_F32 ? 4 : 2; }

typedef struct oracle {
  kvc_cache_t *cache;
  kvc_dtype_t dtype;
  kvc_layer_view_t views[LAYERS];
} oracle_t;

static void oracle_open_sized(oracle_t *o, kvc_dtype_t dtype, bool copy_on_partial,
                              uint64_t max_tokens, uint64_t host_cache_bytes) {
  kvc_config_t *c = NULL;
  ok(kvc_config_create(&c));
  ok(kvc_config_set_num_layers(c, LAYERS));
  ok(kvc_config_set_kv_heads(c, HEADS));
  ok(kvc_config_set_head_dim(c, DIM));
  ok(kvc_config_set_dtype(c, dtype));
  ok(kvc_config_set_tokens_per_block(c, T));
  ok(kvc_config_set_max_tokens(c, max_tokens));
  ok(kvc_config_set_host_cache_bytes(c, host_cache_bytes));
  ok(kvc_config_set_copy_on_partial_reuse(c, copy_on_partial));
  o->dtype = dtype;
  ok(kvc_cache_create(c, &o->cache));
  kvc_config_destroy(c);
  for (uint32_t l = 0; l < LAYERS; ++l) {
    kvc_layer_view_init(&o->views[l]);
    ok(kvc_cache_layer_view(o->cache, l, &o->views[l]));
  }
  /* A sentinel everywhere, so rows nobody wrote are recognisable. */
  kvc_pool_desc_t pool = KVC_POOL_DESC_INIT;
  ok(kvc_cache_describe_pool(o->cache, 0, &pool));
  memset(pool.base, 0xA5, (size_t)pool.bytes);
}

static void oracle_open(oracle_t *o, kvc_dtype_t dtype, bool copy_on_partial) {
  oracle_open_sized(o, dtype, copy_on_partial, 32 * T, 0);
}

static unsigned char *elem_at(const oracle_t *o, uint32_t layer, int64_t block, uint32_t kv,
                              uint32_t row, uint32_t h, uint32_t d) {
  const kvc_layer_view_t *v = &o->views[layer];
  return (unsigned char *)v->base + (uint64_t)block * v->block_stride + kv * v->kv_stride +
         row * v->token_stride + h * v->head_stride + d * v->elem_size;
}

/* Writes the KV of every token added to the sequences since the last call,
 * through the slot mapping and the store kernel; returns slots written. */
static size_t write_new_tokens(oracle_t *o, uint64_t id, const int32_t *all_tokens) {
  int64_t slots[MAX_TOKENS];
  size_t n = 0;
  int32_t added = 0;
  ok(kvc_batch_slot_mapping(o->cache, 0, &id, 1, slots, MAX_TOKENS, &n, &added));
  assert_int_equal((size_t)added, n);
  kvc_sequence_desc_t sd = KVC_SEQUENCE_DESC_INIT;
  ok(kvc_sequence_describe(o->cache, id, &sd));
  const uint64_t first = sd.num_tokens - n;
  const size_t es = elem_size(o->dtype);
  unsigned char *key = malloc(n * HEADS * DIM * es + 1);
  unsigned char *val = malloc(n * HEADS * DIM * es + 1);
  size_t written = 0;
  for (uint32_t l = 0; l < LAYERS; ++l) {
    for (size_t i = 0; i < n; ++i)
      for (uint32_t h = 0; h < HEADS; ++h)
        for (uint32_t d = 0; d < DIM; ++d) {
          const uint64_t pos = first + i;
          const size_t at = ((i * HEADS + h) * DIM + d) * es;
          put_elem(key + at, o->dtype, mix(all_tokens[pos], pos, l, 0, h, d));
          put_elem(val + at, o->dtype, mix(all_tokens[pos], pos, l, 1, h, d));
        }
    kvc_store_args_t a;
    kvc_store_args_init(&a);
    a.layer = l;
    a.num_tokens = (uint32_t)n;
    a.src_dtype = o->dtype;
    a.key = key;
    a.value = val;
    a.slot_mapping = slots;
    ok(kvc_store_kv(o->cache, &a, NULL));
  }
  for (size_t i = 0; i < n; ++i) written += slots[i] >= 0;
  free(key);
  free(val);
  return written;
}

/* Every token of sequence `id` holds exactly its derived bytes. */
static void check_sequence(const oracle_t *o, uint64_t id, const int32_t *tokens) {
  kvc_sequence_desc_t sd = KVC_SEQUENCE_DESC_INIT;
  ok(kvc_sequence_describe(o->cache, id, &sd));
  int32_t blocks[MAX_TOKENS];
  size_t nb = 0;
  ok(kvc_sequence_block_ids(o->cache, id, 0, blocks, MAX_TOKENS, &nb));
  const size_t es = elem_size(o->dtype);
  for (uint64_t pos = 0; pos < sd.num_tokens; ++pos)
    for (uint32_t l = 0; l < LAYERS; ++l)
      for (uint32_t kv = 0; kv < 2; ++kv)
        for (uint32_t h = 0; h < HEADS; ++h)
          for (uint32_t d = 0; d < DIM; ++d) {
            unsigned char want[4];
            put_elem(want, o->dtype, mix(tokens[pos], pos, l, kv, h, d));
            const unsigned char *have = elem_at(o, l, blocks[pos / T], kv, (uint32_t)(pos % T), h, d);
            if (memcmp(want, have, es) != 0)
              fail_msg("sequence %llu token %llu layer %u kv %u head %u dim %u differs",
                       (unsigned long long)id, (unsigned long long)pos, l, kv, h, d);
          }
}

/* Rows >= `from` of every (layer, kv, head) of `block` still hold the
 * sentinel. */
static void check_untouched(const oracle_t *o, int32_t block, uint32_t from) {
  const size_t es = elem_size(o->dtype);
  for (uint32_t l = 0; l < LAYERS; ++l)
    for (uint32_t kv = 0; kv < 2; ++kv)
      for (uint32_t r = from; r < T; ++r)
        for (uint32_t h = 0; h < HEADS; ++h)
          for (uint32_t d = 0; d < DIM; ++d) {
            const unsigned char *p = elem_at(o, l, block, kv, r, h, d);
            for (size_t b = 0; b < es; ++b)
              if (p[b] != 0xA5) fail_msg("block %d row %u was written", block, r);
          }
}

static void run_oracle(kvc_dtype_t dtype) {
  oracle_t o;
  oracle_open(&o, dtype, true);
  int32_t p1[10];
  for (int i = 0; i < 10; ++i) p1[i] = 1000 + i;
  uint64_t cached = 99;
  ok(kvc_sequence_add(o.cache, 1, p1, 10, NULL, NULL, &cached));
  assert_int_equal(cached, 0);
  assert_int_equal(write_new_tokens(&o, 1, p1), 10);
  ok(kvc_sequence_commit(o.cache, 1, 10));
  check_sequence(&o, 1, p1);
  int32_t b1[3];
  size_t nb = 0;
  ok(kvc_sequence_block_ids(o.cache, 1, 0, b1, 3, &nb));
  ok(kvc_sequence_remove(o.cache, 1));

  /* Sequence 2 shares block 0 and 2 rows of block 1: copy on partial reuse. */
  int32_t p2[9] = {1000, 1001, 1002, 1003, 1004, 1005, 7, 8, 9};
  ok(kvc_sequence_add(o.cache, 2, p2, 9, NULL, NULL, &cached));
  assert_int_equal(cached, 6);
  int32_t b2[3];
  ok(kvc_sequence_block_ids(o.cache, 2, 0, b2, 3, &nb));
  assert_int_equal(b2[0], b1[0]);
  assert_int_not_equal(b2[1], b1[1]);
  check_untouched(&o, b2[1], 2);   /* only the 2 matched rows were copied */
  assert_int_equal(write_new_tokens(&o, 2, p2), 3);
  ok(kvc_sequence_commit(o.cache, 2, 9));
  check_sequence(&o, 2, p2);        /* reused block, copied rows, new rows */
  /* The copy's source, sequence 1's second block, still holds its tokens. */
  ok(kvc_sequence_add(o.cache, 3, p1, 10, NULL, NULL, &cached));
  assert_int_equal(cached, 9);
  assert_int_equal(write_new_tokens(&o, 3, p1), 1);
  check_sequence(&o, 3, p1);
  ok(kvc_sequence_remove(o.cache, 3));

  /* Fork, then write on the child: the tail is copied, the parent intact. */
  ok(kvc_sequence_fork(o.cache, 2, 4));
  int32_t p4[10];
  memcpy(p4, p2, sizeof(p2));
  p4[9] = 4242;
  ok(kvc_sequence_extend(o.cache, 4, &p4[9], 1, NULL));
  int32_t b4[3];
  ok(kvc_sequence_block_ids(o.cache, 4, 0, b4, 3, &nb));
  assert_int_not_equal(b4[2], b2[2]);
  assert_int_equal(write_new_tokens(&o, 4, p4), 1);
  check_sequence(&o, 4, p4);
  check_sequence(&o, 2, p2);
  /* And the parent writes its own next token into its own tail. */
  int32_t p2b[10];
  memcpy(p2b, p2, sizeof(p2));
  p2b[9] = 77;
  ok(kvc_sequence_extend(o.cache, 2, &p2b[9], 1, NULL));
  assert_int_equal(write_new_tokens(&o, 2, p2b), 1);
  check_sequence(&o, 2, p2b);
  check_sequence(&o, 4, p4);
  ok(kvc_cache_check(o.cache));
  kvc_cache_destroy(o.cache);
}

static void test_oracle_f32(void **state) { (void)state; run_oracle(KVC_DTYPE_F32); }
static void test_oracle_f16(void **state) { (void)state; run_oracle(KVC_DTYPE_F16); }
static void test_oracle_bf16(void **state) { (void)state; run_oracle(KVC_DTYPE_BF16); }

/* Rewind into a published block, then write: the published bytes survive. */
static void test_rewind_keeps_published_bytes(void **state) {
  (void)state;
  oracle_t o;
  oracle_open(&o, KVC_DTYPE_F16, true);
  int32_t p[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  ok(kvc_sequence_add(o.cache, 1, p, 9, NULL, NULL, NULL));
  write_new_tokens(&o, 1, p);
  ok(kvc_sequence_commit(o.cache, 1, 9));
  ok(kvc_sequence_rewind(o.cache, 1, 3)); /* tail = published block [5..8], 2 rows kept */
  int32_t q[7] = {1, 2, 3, 4, 5, 6, 66};
  ok(kvc_sequence_extend(o.cache, 1, &q[6], 1, NULL));
  write_new_tokens(&o, 1, q);
  check_sequence(&o, 1, q);
  uint64_t cached = 0;
  ok(kvc_sequence_add(o.cache, 2, p, 9, NULL, NULL, &cached));
  assert_int_equal(cached, 8);
  write_new_tokens(&o, 2, p);
  check_sequence(&o, 2, p);
  ok(kvc_cache_check(o.cache));
  kvc_cache_destroy(o.cache);
}

/* Copy on partial reuse off: the block is used in place, bytes intact. */
static void test_partial_in_place(void **state) {
  (void)state;
  oracle_t o;
  oracle_open(&o, KVC_DTYPE_BF16, false);
  int32_t p[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  ok(kvc_sequence_add(o.cache, 1, p, 8, NULL, NULL, NULL));
  write_new_tokens(&o, 1, p);
  ok(kvc_sequence_commit(o.cache, 1, 8));
  int32_t b1[2];
  size_t nb = 0;
  ok(kvc_sequence_block_ids(o.cache, 1, 0, b1, 2, &nb));
  ok(kvc_sequence_remove(o.cache, 1));
  int32_t q[7] = {1, 2, 3, 4, 5, 6, 99};
  uint64_t cached = 0;
  ok(kvc_sequence_add(o.cache, 2, q, 7, NULL, NULL, &cached));
  assert_int_equal(cached, 6);
  int32_t b2[2];
  ok(kvc_sequence_block_ids(o.cache, 2, 0, b2, 2, &nb));
  assert_int_equal(b2[1], b1[1]);
  assert_int_equal(write_new_tokens(&o, 2, q), 1);
  check_sequence(&o, 2, q);
  ok(kvc_cache_check(o.cache));
  kvc_cache_destroy(o.cache);
}

static kvc_cache_stats_t stats_of(const kvc_cache_t *cache) {
  kvc_cache_stats_t s = KVC_CACHE_STATS_INIT;
  ok(kvc_cache_get_stats(cache, &s));
  return s;
}

/* A 4-block cache with a host tier of 4 block sets: a prompt's cached
 * blocks are offloaded when another prompt needs the room, and onboarded
 * with every byte intact when the prompt comes back. */
static void test_host_tier_round_trip(void **state) {
  (void)state;
  const uint64_t set_bytes = LAYERS * 2 * T * HEADS * DIM * 2; /* f16 */
  oracle_t o;
  oracle_open_sized(&o, KVC_DTYPE_F16, true, 4 * T, 4 * set_bytes + 100);
  kvc_cache_desc_t d = KVC_CACHE_DESC_INIT;
  ok(kvc_cache_describe(o.cache, &d));
  assert_int_equal(d.host_cache_bytes, 4 * set_bytes); /* whole block sets */
  kvc_cache_stats_t s = stats_of(o.cache);
  assert_int_equal(s.host_blocks, 4);
  assert_int_equal(s.host_free_blocks, 4);

  int32_t p1[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  uint64_t cached = 99;
  ok(kvc_sequence_add(o.cache, 1, p1, 9, NULL, NULL, &cached));
  write_new_tokens(&o, 1, p1);
  ok(kvc_sequence_commit(o.cache, 1, 9));
  ok(kvc_sequence_remove(o.cache, 1)); /* two full blocks and the 1-token tail cached */

  int32_t p2[13];
  for (int i = 0; i < 13; ++i) p2[i] = 500 + i;
  ok(kvc_sequence_add(o.cache, 2, p2, 13, NULL, NULL, &cached)); /* takes all 4 blocks */
  assert_int_equal(cached, 0);
  write_new_tokens(&o, 2, p2);
  check_sequence(&o, 2, p2);
  s = stats_of(o.cache);
  assert_int_equal(s.offloaded_blocks, 3);
  assert_int_equal(s.offloaded_bytes, 3 * set_bytes);
  assert_int_equal(s.host_cached_blocks, 3);
  assert_int_equal(s.host_free_blocks, 1);
  assert_int_equal(s.evicted_blocks, 0);
  assert_int_equal(s.tree_nodes, 3);
  ok(kvc_sequence_remove(o.cache, 2));

  ok(kvc_sequence_add(o.cache, 3, p1, 9, NULL, NULL, &cached));
  assert_int_equal(cached, 8);
  write_new_tokens(&o, 3, p1);
  check_sequence(&o, 3, p1); /* the onboarded rows, bit for bit */
  s = stats_of(o.cache);
  assert_int_equal(s.onboarded_blocks, 2);
  assert_int_equal(s.onboarded_bytes, 2 * set_bytes);
  assert_int_equal(s.host_cached_blocks, 1); /* the tail: the prompt's last token is recomputed */
  assert_int_equal(s.reused_blocks, 2);
  ok(kvc_cache_check(o.cache));
  kvc_cache_destroy(o.cache);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_oracle_f32),
      cmocka_unit_test(test_oracle_f16),
      cmocka_unit_test(test_oracle_bf16),
      cmocka_unit_test(test_rewind_keeps_published_bytes),
      cmocka_unit_test(test_partial_in_place),
      cmocka_unit_test(test_host_tier_round_trip),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
