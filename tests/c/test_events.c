/* KV events through the C API, black box: a scripted scenario with the
 * exact event list (ids, kinds, hashes, tiers, priorities, token ids),
 * portable hashes recomputed here from the algorithm events.h documents
 * (xxHash's XXH3 with the seed), kvc_block_hashes() for plain, salted and
 * LoRA prompts equal to the hashes of STORED events, refused calls emitting
 * nothing, a reset as one CLEARED, an overflow reported as LOST then a
 * snapshot resync, and the argument checks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include <xxhash.h>

#include <kvcache/kvcache.h>

#include "kvc_test_assert.h"

#define ok(call) assert_int_equal((call), KVC_OK)

enum { T = 4 };

/* `blocks` blocks of 4 tokens, events on with a ring of `ring`, seed `seed`. */
static kvc_cache_t *cache_with(uint32_t blocks, uint32_t ring, uint64_t seed) {
  kvc_config_t *c = NULL;
  ok(kvc_config_create(&c));
  ok(kvc_config_set_num_layers(c, 2));
  ok(kvc_config_set_kv_heads(c, 2));
  ok(kvc_config_set_head_dim(c, 4));
  ok(kvc_config_set_dtype(c, KVC_DTYPE_F32));
  ok(kvc_config_set_tokens_per_block(c, T));
  ok(kvc_config_set_max_tokens(c, blocks * (uint64_t)T));
  ok(kvc_config_set_partial_reuse(c, false));
  ok(kvc_config_set_event_buffer_size(c, ring));
  ok(kvc_config_set_event_hash_seed(c, seed));
  kvc_cache_t *cache = NULL;
  ok(kvc_cache_create(c, &cache));
  kvc_config_destroy(c);
  return cache;
}

/* ---- The documented algorithm, written out independently ---------------- */

static size_t put_u64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = (unsigned char)(v >> (8 * i));
  return 8;
}

static uint64_t scope_digest(const void *salt, size_t salt_size, bool has_lora, uint64_t lora,
                             uint64_t seed) {
  unsigned char b[256];
  size_t n = 0;
  b[n++] = 'S';
  b[n++] = salt != NULL;
  if (salt != NULL) {
    n += put_u64(b + n, salt_size);
    memcpy(b + n, salt, salt_size);
    n += salt_size;
  }
  b[n++] = 'L';
  b[n++] = has_lora;
  if (has_lora) n += put_u64(b + n, lora);
  return XXH3_64bits_withSeed(b, n, seed);
}

static uint64_t block_hash(uint64_t parent, uint64_t scope, const int32_t *tokens, uint32_t n,
                           uint64_t seed) {
  unsigned char b[28 + 4 * 64];
  size_t at = put_u64(b, parent);
  at += put_u64(b + at, scope);
  at += put_u64(b + at, 0); /* no extra keys */
  for (int i = 0; i < 4; ++i) b[at++] = (unsigned char)(n >> (8 * i));
  for (uint32_t t = 0; t < n; ++t)
    for (int i = 0; i < 4; ++i) b[at++] = (unsigned char)((uint32_t)tokens[t] >> (8 * i));
  return XXH3_64bits_withSeed(b, at, seed);
}

/* ---- Draining ------------------------------------------------------------ */

typedef struct {
  kvc_event_t ev[64];
  int32_t tokens[256];
  kvc_event_drain_t r;
} drained_t;

static void drain(kvc_cache_t *cache, drained_t *d) {
  kvc_event_drain_init(&d->r);
  ok(kvc_cache_drain_events(cache, d->ev, 64, d->tokens, 256, &d->r));
}

static void expect_stored(const kvc_event_t *e, uint64_t id, uint64_t hash, uint64_t parent,
                          uint32_t priority, const int32_t *tokens, const int32_t *drained) {
  assert_int_equal(e->id, id);
  assert_int_equal(e->kind, KVC_EVENT_STORED);
  assert_int_equal(e->tier, KVC_TIER_PRIMARY);
  assert_int_equal(e->hash, hash);
  assert_int_equal(e->parent_hash, parent);
  assert_int_equal(e->groups, 1);
  assert_int_equal(e->priority, priority);
  assert_int_equal(e->num_tokens, T);
  assert_int_equal(e->has_lora, 0);
  assert_true(e->token_offset != KVC_EVENT_NO_TOKENS);
  assert_memory_equal(drained + e->token_offset, tokens, sizeof(int32_t) * T);
}

static void expect_event(const kvc_event_t *e, uint64_t id, uint32_t kind, uint64_t hash) {
  assert_int_equal(e->id, id);
  assert_int_equal(e->kind, kind);
  assert_int_equal(e->hash, hash);
}

static const int32_t P10[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};

static void test_scripted_scenario(void **state) {
  (void)state;
  const uint64_t seed = 7;
  kvc_cache_t *cache = cache_with(8, 64, seed);
  const uint64_t scope = scope_digest(NULL, 0, false, 0, seed);
  const uint64_t h0 = block_hash(0, scope, P10, T, seed);
  const uint64_t h1 = block_hash(h0, scope, P10 + T, T, seed);
  drained_t d;

  /* A prompt of two full blocks and a tail: commit publishes the two. */
  ok(kvc_sequence_add(cache, 1, P10, 10, NULL, NULL, NULL));
  drain(cache, &d);
  assert_int_equal(d.r.events, 0); /* adding publishes nothing */
  ok(kvc_sequence_commit(cache, 1, 10));
  drain(cache, &d);
  assert_int_equal(d.r.events, 2);
  assert_int_equal(d.r.tokens, 2 * T);
  assert_int_equal(d.r.events_pending, 0);
  assert_int_equal(d.r.last_id, 2);
  expect_stored(&d.ev[0], 1, h0, 0, KVC_DEFAULT_PRIORITY, P10, d.tokens);
  expect_stored(&d.ev[1], 2, h1, h0, KVC_DEFAULT_PRIORITY, P10 + T, d.tokens);

  /* kvc_block_hashes computes the same from a config alone. */
  kvc_config_t *cfg = NULL;
  ok(kvc_config_create(&cfg));
  ok(kvc_config_set_tokens_per_block(cfg, T));
  ok(kvc_config_set_event_hash_seed(cfg, seed));
  uint64_t hashes[4] = {0};
  size_t count = 0;
  ok(kvc_block_hashes(cfg, P10, 10, NULL, hashes, 4, &count));
  assert_int_equal(count, 2);
  assert_int_equal(hashes[0], h0);
  assert_int_equal(hashes[1], h1);

  /* Removing keeps the blocks cached at the same priority: no event. */
  ok(kvc_sequence_remove(cache, 1));
  drain(cache, &d);
  assert_int_equal(d.r.events, 0);

  /* 28 new tokens need 7 blocks; 6 are free: the cached leaf h1 goes. */
  int32_t other[28];
  for (int i = 0; i < 28; ++i) other[i] = 100 + i;
  ok(kvc_sequence_add(cache, 2, other, 28, NULL, NULL, NULL));
  drain(cache, &d);
  assert_int_equal(d.r.events, 1);
  expect_event(&d.ev[0], 3, KVC_EVENT_REMOVED, h1);
  assert_int_equal(d.ev[0].tier, KVC_TIER_PRIMARY);
  assert_int_equal(d.ev[0].groups, 1);
  assert_int_equal(d.ev[0].token_offset, KVC_EVENT_NO_TOKENS);

  /* A refused add emits nothing. */
  int32_t third[12];
  for (int i = 0; i < 12; ++i) third[i] = 500 + i;
  assert_int_equal(kvc_sequence_add(cache, 3, third, 12, NULL, NULL, NULL), KVC_ERR_OUT_OF_BLOCKS);
  drain(cache, &d);
  assert_int_equal(d.r.events, 0);
  ok(kvc_sequence_remove(cache, 2)); /* never committed: nothing published */
  drain(cache, &d);
  assert_int_equal(d.r.events, 0);

  /* Reuse at another priority: h0 is held, released at 80 (PRIORITY_CHANGED);
   * h1 is published again at 80. */
  kvc_sequence_options_t o = KVC_SEQUENCE_OPTIONS_INIT;
  o.prompt_priority = 80;
  uint64_t cached = 0;
  ok(kvc_sequence_add(cache, 4, P10, 10, &o, NULL, &cached));
  assert_int_equal(cached, T);
  ok(kvc_sequence_commit(cache, 4, 10));
  ok(kvc_sequence_remove(cache, 4));
  drain(cache, &d);
  assert_int_equal(d.r.events, 2);
  expect_stored(&d.ev[0], 4, h1, h0, 80, P10 + T, d.tokens);
  expect_event(&d.ev[1], 5, KVC_EVENT_PRIORITY_CHANGED, h0);
  assert_int_equal(d.ev[1].priority, 80);

  /* The snapshot lists both, parents first, as of event 5. */
  kvc_snapshot_entry_t snap[8];
  uint64_t at = 0;
  ok(kvc_cache_snapshot(cache, snap, 8, &count, &at));
  assert_int_equal(count, 2);
  assert_int_equal(at, 5);
  assert_int_equal(snap[0].hash, h0);
  assert_int_equal(snap[0].parent_hash, 0);
  assert_int_equal(snap[0].priority, 80);
  assert_int_equal(snap[1].hash, h1);
  assert_int_equal(snap[1].parent_hash, h0);
  assert_int_equal(snap[1].tier, KVC_TIER_PRIMARY);
  assert_int_equal(snap[1].groups, 1);
  assert_int_equal(snap[1].num_tokens, T);
  assert_int_equal(kvc_cache_snapshot(cache, snap, 1, &count, NULL), KVC_ERR_BUFFER_TOO_SMALL);
  assert_int_equal(count, 2);

  /* Salted and LoRA prompts: STORED hashes equal kvc_block_hashes'. */
  const char salt[] = "tenant-a";
  kvc_sequence_options_t salted = KVC_SEQUENCE_OPTIONS_INIT;
  salted.salt = salt;
  salted.salt_size = sizeof salt - 1;
  kvc_sequence_options_t lora = KVC_SEQUENCE_OPTIONS_INIT;
  lora.has_lora = true;
  lora.lora_id = 42;
  const kvc_sequence_options_t *scoped[2] = {&salted, &lora};
  for (int k = 0; k < 2; ++k) {
    ok(kvc_sequence_add(cache, 10 + (uint64_t)k, P10, 10, scoped[k], NULL, NULL));
    ok(kvc_sequence_commit(cache, 10 + (uint64_t)k, 10));
    ok(kvc_sequence_remove(cache, 10 + (uint64_t)k));
    drain(cache, &d);
    ok(kvc_block_hashes(cfg, P10, 10, scoped[k], hashes, 4, &count));
    assert_int_equal(count, 2);
    /* Eviction may come first when the pool is full: find the STORED ones. */
    uint64_t stored[2];
    size_t n = 0;
    for (uint64_t i = 0; i < d.r.events; ++i)
      if (d.ev[i].kind == KVC_EVENT_STORED) {
        assert_true(n < 2);
        assert_int_equal(d.ev[i].has_lora, k == 1);
        if (k == 1) assert_int_equal(d.ev[i].lora_id, 42);
        stored[n++] = d.ev[i].hash;
      }
    assert_int_equal(n, 2);
    assert_int_equal(stored[0], hashes[0]);
    assert_int_equal(stored[1], hashes[1]);
    assert_true(hashes[0] != h0); /* another scope, another hash */
  }
  const uint64_t salted_h0 = block_hash(0, scope_digest(salt, sizeof salt - 1, false, 0, seed),
                                        P10, T, seed);
  ok(kvc_block_hashes(cfg, P10, 10, &salted, hashes, 4, &count));
  assert_int_equal(hashes[0], salted_h0);
  const uint64_t lora_h0 = block_hash(0, scope_digest(NULL, 0, true, 42, seed), P10, T, seed);
  ok(kvc_block_hashes(cfg, P10, 10, &lora, hashes, 4, &count));
  assert_int_equal(hashes[0], lora_h0);

  /* A reset is one CLEARED; the snapshot is then empty. */
  ok(kvc_cache_reset_reuse(cache));
  drain(cache, &d);
  assert_int_equal(d.r.events, 1);
  assert_int_equal(d.ev[0].kind, KVC_EVENT_CLEARED);
  assert_int_equal(d.ev[0].hash, 0);
  ok(kvc_cache_snapshot(cache, snap, 8, &count, &at));
  assert_int_equal(count, 0);
  assert_int_equal(at, d.ev[0].id);
  ok(kvc_cache_check(cache));

  kvc_config_destroy(cfg);
  kvc_cache_destroy(cache);
}

static void test_overflow_is_lost_then_resync(void **state) {
  (void)state;
  kvc_cache_t *cache = cache_with(8, 2, 0);
  int32_t p[17];
  for (int i = 0; i < 17; ++i) p[i] = 1000 + i;
  ok(kvc_sequence_add(cache, 1, p, 17, NULL, NULL, NULL));
  ok(kvc_sequence_commit(cache, 1, 17)); /* 4 STORED into a ring of 2 */
  drained_t d;
  /* Sizes first: LOST plus two events, 2 x T token ids. */
  kvc_event_drain_init(&d.r);
  ok(kvc_cache_drain_events(cache, NULL, 0, NULL, 0, &d.r));
  assert_int_equal(d.r.events, 0);
  assert_int_equal(d.r.events_pending, 3);
  assert_int_equal(d.r.tokens_pending, 2 * T);
  assert_int_equal(d.r.last_id, 4);
  /* A token buffer for one block: LOST, then the first kept event only. */
  kvc_event_drain_init(&d.r);
  ok(kvc_cache_drain_events(cache, d.ev, 64, d.tokens, T, &d.r));
  assert_int_equal(d.r.events, 2);
  assert_int_equal(d.ev[0].kind, KVC_EVENT_LOST);
  assert_int_equal(d.ev[0].id, 1);
  assert_int_equal(d.ev[0].lost_count, 2);
  assert_int_equal(d.ev[1].id, 3);
  assert_int_equal(d.ev[1].kind, KVC_EVENT_STORED);
  assert_int_equal(d.r.events_pending, 1);
  assert_int_equal(d.r.tokens_pending, T);
  /* Resync: the snapshot as of event 4 holds all four blocks. */
  kvc_snapshot_entry_t snap[8];
  size_t count = 0;
  uint64_t at = 0;
  ok(kvc_cache_snapshot(cache, snap, 8, &count, &at));
  assert_int_equal(count, 4);
  assert_int_equal(at, 4);
  for (int i = 1; i < 4; ++i) assert_int_equal(snap[i].parent_hash, snap[i - 1].hash);
  /* Without a token buffer, STORED comes without token ids. */
  kvc_event_drain_init(&d.r);
  ok(kvc_cache_drain_events(cache, d.ev, 64, NULL, 0, &d.r));
  assert_int_equal(d.r.events, 1);
  assert_int_equal(d.ev[0].id, 4);
  assert_int_equal(d.ev[0].hash, snap[3].hash);
  assert_int_equal(d.ev[0].token_offset, KVC_EVENT_NO_TOKENS);
  assert_int_equal(d.r.tokens, 0);
  assert_int_equal(d.r.tokens_pending, 0);
  ok(kvc_cache_check(cache));
  kvc_cache_destroy(cache);
}

static void test_arguments(void **state) {
  (void)state;
  kvc_config_t *c = NULL;
  ok(kvc_config_create(&c));
  uint32_t size = 1;
  ok(kvc_config_get_event_buffer_size(c, &size));
  assert_int_equal(size, 0);
  uint64_t seed = 1;
  ok(kvc_config_get_event_hash_seed(c, &seed));
  assert_int_equal(seed, 0);
  assert_fails(kvc_config_set_event_buffer_size(c, (1u << 20) + 1), KVC_ERR_INVALID_ARGUMENT,
               "event_buffer_size must be at most 1048576 events, got 1048577");
  assert_fails(kvc_config_get_event_hash_seed(c, NULL), KVC_ERR_INVALID_ARGUMENT,
               "out must not be NULL");
  uint64_t h[2];
  size_t count = 99;
  assert_fails(kvc_block_hashes(NULL, P10, 10, NULL, h, 2, &count), KVC_ERR_INVALID_ARGUMENT,
               "config must not be NULL");
  assert_fails(kvc_block_hashes(c, NULL, 10, NULL, h, 2, &count), KVC_ERR_INVALID_ARGUMENT,
               "tokens must not be NULL");
  assert_fails(kvc_block_hashes(c, P10, 10, NULL, h, 2, NULL), KVC_ERR_INVALID_ARGUMENT,
               "count must not be NULL");
  /* The default tokens_per_block is 16: a 10-token prompt has no full block. */
  ok(kvc_block_hashes(c, P10, 10, NULL, NULL, 0, &count));
  assert_int_equal(count, 0);
  ok(kvc_config_set_tokens_per_block(c, T));
  assert_int_equal(kvc_block_hashes(c, P10, 10, NULL, h, 1, &count), KVC_ERR_BUFFER_TOO_SMALL);
  assert_int_equal(count, 2);
  kvc_extra_key_t bad = {0, 0, "x", 1};
  kvc_sequence_options_t o = KVC_SEQUENCE_OPTIONS_INIT;
  o.extra_keys = &bad;
  o.num_extra_keys = 1;
  assert_fails(kvc_block_hashes(c, P10, 10, &o, h, 2, &count), KVC_ERR_INVALID_ARGUMENT,
               "options->extra_keys[0].length must be > 0, got 0");
  /* An extra key over the second block changes its hash only. */
  uint64_t plain[2], keyed[2];
  ok(kvc_block_hashes(c, P10, 10, NULL, plain, 2, &count));
  kvc_extra_key_t image = {5, 2, "img", 3};
  o.extra_keys = &image;
  ok(kvc_block_hashes(c, P10, 10, &o, keyed, 2, &count));
  assert_int_equal(keyed[0], plain[0]);
  assert_true(keyed[1] != plain[1]);

  /* Events off: drain and snapshot say so. */
  ok(kvc_config_set_num_layers(c, 1));
  ok(kvc_config_set_kv_heads(c, 1));
  ok(kvc_config_set_head_dim(c, 4));
  ok(kvc_config_set_max_tokens(c, 64));
  kvc_cache_t *off = NULL;
  ok(kvc_cache_create(c, &off));
  kvc_event_drain_t r = KVC_EVENT_DRAIN_INIT;
  kvc_event_t ev[4];
  assert_fails(kvc_cache_drain_events(off, ev, 4, NULL, 0, &r), KVC_ERR_UNSUPPORTED,
               "events are off for this cache");
  kvc_snapshot_entry_t snap[1];
  assert_fails(kvc_cache_snapshot(off, snap, 1, &count, NULL), KVC_ERR_UNSUPPORTED,
               "events are off for this cache");
  kvc_cache_destroy(off);
  kvc_config_destroy(c);

  kvc_cache_t *cache = cache_with(4, 8, 0);
  assert_fails(kvc_cache_drain_events(cache, ev, 4, NULL, 0, NULL), KVC_ERR_INVALID_ARGUMENT,
               "result must not be NULL");
  assert_fails(kvc_cache_drain_events(cache, NULL, 4, NULL, 0, &r), KVC_ERR_INVALID_ARGUMENT,
               "events must not be NULL");
  assert_fails(kvc_cache_drain_events(cache, ev, 4, NULL, 3, &r), KVC_ERR_INVALID_ARGUMENT,
               "tokens must not be NULL");
  assert_fails(kvc_cache_drain_events(NULL, ev, 4, NULL, 0, &r), KVC_ERR_INVALID_ARGUMENT,
               "cache must not be NULL");
  assert_fails(kvc_cache_snapshot(cache, NULL, 2, &count, NULL), KVC_ERR_INVALID_ARGUMENT,
               "entries must not be NULL");
  assert_fails(kvc_cache_snapshot(cache, snap, 1, NULL, NULL), KVC_ERR_INVALID_ARGUMENT,
               "count must not be NULL");
  kvc_cache_destroy(cache);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_scripted_scenario),
      cmocka_unit_test(test_overflow_is_lost_then_resync),
      cmocka_unit_test(test_arguments),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
