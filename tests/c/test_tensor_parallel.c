/* Tensor parallelism (kvc_config_set_ranks) on the CPU backend: one cache
 * over 2 and 4 ranks, each rank's pools in its own host memory. K/V bytes
 * derived from (token, position, layer, kv, model head, dim) are written on
 * every rank through kvc_store_kv with the rank's share of the heads, and
 * read back through every rank's layer view bit for bit through reuse,
 * copy on partial reuse, fork, offload and onboard with a host tier, and
 * resize; a randomized run checks every rank after every step with the
 * invariant checker. Also the sharding rule (split, replicate, refuse), the
 * description, and bad input. Black box: only the public header. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <kvcache/kvcache.h>

#define LAYERS 2
#define DIM 4
#define T 4
#define MAX_RANKS 4
#define MAX_HEADS 8
#define MAX_TOKENS 256
#define MAX_SEQS 8

#define ok(call)                                                           \
  do {                                                                     \
    const kvc_status_t st_ = (call);                                       \
    if (st_ != KVC_OK) fail_msg("%s: %d %s", #call, st_, kvc_last_error_message()); \
  } while (0)

static void fails(kvc_status_t got, kvc_status_t want, const char *needle) {
  if (got != want) fail_msg("status %d, want %d: %s", got, want, kvc_last_error_message());
  if (needle != NULL && strstr(kvc_last_error_message(), needle) == NULL)
    fail_msg("message '%s' lacks '%s'", kvc_last_error_message(), needle);
}

/* f16 bits of (token, position, layer, kv, model head, dim): a normal
 * value whose low bits mix every coordinate. */
static uint16_t elem(int32_t token, uint64_t pos, uint32_t layer, uint32_t kv, uint32_t h,
                     uint32_t d) {
  uint32_t x = (uint32_t)token * 2654435761u ^ (uint32_t)pos * 40503u ^ layer * 97u ^ kv * 13u ^
               h * 7u ^ d;
  x ^= x >> 15;
  x *= 2246822519u;
  x ^= x >> 13;
  return (uint16_t)(0x3C00u | (x & 0x3FFu));
}

typedef struct tp {
  kvc_cache_t *cache;
  uint32_t ranks;
  uint32_t heads; /* the model's kv heads */
  kvc_layer_view_t views[MAX_RANKS][LAYERS];
} tp_t;

static void tp_open(tp_t *o, uint32_t ranks, uint32_t heads, uint64_t max_tokens,
                    uint64_t host_cache_bytes, uint64_t max_primary_bytes) {
  kvc_config_t *c = NULL;
  ok(kvc_config_create(&c));
  ok(kvc_config_set_num_layers(c, LAYERS));
  ok(kvc_config_set_kv_heads(c, heads));
  ok(kvc_config_set_head_dim(c, DIM));
  ok(kvc_config_set_dtype(c, KVC_DTYPE_F16));
  ok(kvc_config_set_tokens_per_block(c, T));
  const int32_t ordinals[MAX_RANKS] = {3, 0, 7, 1}; /* CPU: names of host pools */
  ok(kvc_config_set_ranks(c, KVC_DEVICE_CPU, ordinals, ranks));
  if (max_primary_bytes != 0) {
    ok(kvc_config_set_primary_bytes(c, max_primary_bytes / 2));
    ok(kvc_config_set_max_primary_bytes(c, max_primary_bytes));
  } else {
    ok(kvc_config_set_max_tokens(c, max_tokens));
  }
  ok(kvc_config_set_host_cache_bytes(c, host_cache_bytes));
  const kvc_status_t created = kvc_cache_create(c, &o->cache);
  if (created != KVC_OK) fail_msg("create: %s", kvc_last_error_message());
  kvc_config_destroy(c);
  o->ranks = ranks;
  o->heads = heads;
  for (uint32_t r = 0; r < ranks; ++r)
    for (uint32_t l = 0; l < LAYERS; ++l) {
      kvc_layer_view_init(&o->views[r][l]);
      ok(kvc_cache_layer_view_rank(o->cache, r, l, &o->views[r][l]));
    }
  /* A sentinel in every rank's pool. */
  for (uint32_t r = 0; r < ranks; ++r) {
    const kvc_layer_view_t *v = &o->views[r][0];
    memset(v->base, 0xA5, (size_t)(v->num_blocks * v->block_stride));
  }
}

static unsigned char *elem_at(const tp_t *o, uint32_t r, uint32_t layer, int64_t block,
                              uint32_t kv, uint32_t row, uint32_t h, uint32_t d) {
  const kvc_layer_view_t *v = &o->views[r][layer];
  return (unsigned char *)v->base + (uint64_t)block * v->block_stride + kv * v->kv_stride +
         row * v->token_stride + h * v->head_stride + d * v->elem_size;
}

/* Writes, on every rank, the K/V of the tokens added to `id` since the last
 * call; returns the slots written. */
static size_t write_new(tp_t *o, uint64_t id, const int32_t *all) {
  int64_t slots[MAX_TOKENS];
  size_t n = 0;
  int32_t added = 0;
  ok(kvc_batch_slot_mapping(o->cache, 0, &id, 1, slots, MAX_TOKENS, &n, &added));
  kvc_sequence_desc_t sd = KVC_SEQUENCE_DESC_INIT;
  ok(kvc_sequence_describe(o->cache, id, &sd));
  const uint64_t first = sd.num_tokens - n;
  uint16_t *key = malloc((n + 1) * MAX_HEADS * DIM * 2);
  uint16_t *val = malloc((n + 1) * MAX_HEADS * DIM * 2);
  for (uint32_t r = 0; r < o->ranks; ++r)
    for (uint32_t l = 0; l < LAYERS; ++l) {
      const kvc_layer_view_t *v = &o->views[r][l];
      for (size_t i = 0; i < n; ++i)
        for (uint32_t h = 0; h < v->kv_heads; ++h)
          for (uint32_t d = 0; d < DIM; ++d) {
            const uint64_t pos = first + i;
            const size_t at = (i * v->kv_heads + h) * DIM + d;
            key[at] = elem(all[pos], pos, l, 0, v->first_kv_head + h, d);
            val[at] = elem(all[pos], pos, l, 1, v->first_kv_head + h, d);
          }
      kvc_store_args_t a;
      kvc_store_args_init(&a);
      a.layer = l;
      a.rank = r;
      a.num_tokens = (uint32_t)n;
      a.src_dtype = KVC_DTYPE_F16;
      a.key = key;
      a.value = val;
      a.slot_mapping = slots;
      ok(kvc_store_kv(o->cache, &a, NULL));
    }
  free(key);
  free(val);
  size_t written = 0;
  for (size_t i = 0; i < n; ++i) written += slots[i] >= 0;
  return written;
}

/* Every token of `id` holds its bytes on every rank. */
static void check_seq(const tp_t *o, uint64_t id, const int32_t *tokens) {
  kvc_sequence_desc_t sd = KVC_SEQUENCE_DESC_INIT;
  ok(kvc_sequence_describe(o->cache, id, &sd));
  int32_t blocks[MAX_TOKENS / T + 1];
  size_t nb = 0;
  ok(kvc_sequence_block_ids(o->cache, id, 0, blocks, MAX_TOKENS / T + 1, &nb));
  for (uint32_t r = 0; r < o->ranks; ++r)
    for (uint64_t pos = 0; pos < sd.num_tokens; ++pos)
      for (uint32_t l = 0; l < LAYERS; ++l)
        for (uint32_t kv = 0; kv < 2; ++kv)
          for (uint32_t h = 0; h < o->views[r][l].kv_heads; ++h)
            for (uint32_t d = 0; d < DIM; ++d) {
              const uint16_t want = elem(tokens[pos], pos, l, kv, o->views[r][l].first_kv_head + h, d);
              uint16_t have;
              memcpy(&have, elem_at(o, r, l, blocks[pos / T], kv, (uint32_t)(pos % T), h, d), 2);
              if (want != have)
                fail_msg("rank %u sequence %llu token %llu layer %u kv %u head %u dim %u: "
                         "%04x != %04x", r, (unsigned long long)id, (unsigned long long)pos, l,
                         kv, h, d, have, want);
            }
}

static void check_sharding(const tp_t *o) {
  const uint32_t per = o->heads % o->ranks == 0 ? o->heads / o->ranks : 1;
  const uint32_t repl = o->heads % o->ranks == 0 ? 1 : o->ranks / o->heads;
  kvc_cache_desc_t d = KVC_CACHE_DESC_INIT;
  ok(kvc_cache_describe(o->cache, &d));
  assert_int_equal(d.num_ranks, o->ranks);
  assert_int_equal(d.max_head_replication, repl);
  kvc_group_desc_t g = KVC_GROUP_DESC_INIT;
  ok(kvc_cache_describe_group(o->cache, 0, &g));
  assert_int_equal(g.kv_heads, o->heads);
  assert_int_equal(g.kv_heads_per_rank, per);
  assert_int_equal(g.head_replication, repl);
  assert_int_equal(g.block_bytes, (uint64_t)LAYERS * 2 * T * per * DIM * 2);
  for (uint32_t r = 0; r < o->ranks; ++r)
    for (uint32_t l = 0; l < LAYERS; ++l) {
      const kvc_layer_view_t *v = &o->views[r][l];
      assert_int_equal(v->rank, r);
      assert_int_equal(v->kv_heads, per);
      assert_int_equal(v->total_kv_heads, o->heads);
      assert_int_equal(v->first_kv_head, repl == 1 ? r * per : r / repl);
      /* One set of block ids: every rank addresses as many blocks, in its
       * own memory. */
      assert_int_equal(v->num_blocks, o->views[0][l].num_blocks);
      assert_int_equal(v->block_stride, o->views[0][l].block_stride);
      if (r > 0) assert_ptr_not_equal(v->base, o->views[0][l].base);
    }
  kvc_layer_view_t v = KVC_LAYER_VIEW_INIT;
  char want[64];
  snprintf(want, sizeof want, "rank must be < num_ranks (%u), got %u", o->ranks, o->ranks);
  fails(kvc_cache_layer_view_rank(o->cache, o->ranks, 0, &v), KVC_ERR_INVALID_ARGUMENT, want);
}

/* Store, reuse with copy on partial reuse, fork: every rank bit for bit. */
static void run_reuse_fork(uint32_t ranks, uint32_t heads) {
  tp_t o;
  tp_open(&o, ranks, heads, 32 * T, 0, 0);
  check_sharding(&o);
  int32_t p1[10];
  for (int i = 0; i < 10; ++i) p1[i] = 1000 + i;
  uint64_t cached = 99;
  ok(kvc_sequence_add(o.cache, 1, p1, 10, NULL, NULL, &cached));
  assert_int_equal(cached, 0);
  assert_int_equal(write_new(&o, 1, p1), 10);
  ok(kvc_sequence_commit(o.cache, 1, 10));
  check_seq(&o, 1, p1);
  ok(kvc_sequence_remove(o.cache, 1));

  int32_t p2[9] = {1000, 1001, 1002, 1003, 1004, 1005, 7, 8, 9};
  ok(kvc_sequence_add(o.cache, 2, p2, 9, NULL, NULL, &cached));
  assert_int_equal(cached, 6); /* block 0 reused, 2 rows of block 1 copied on every rank */
  assert_int_equal(write_new(&o, 2, p2), 3);
  ok(kvc_sequence_commit(o.cache, 2, 9));
  check_seq(&o, 2, p2);
  ok(kvc_sequence_add(o.cache, 3, p1, 10, NULL, NULL, &cached));
  assert_int_equal(cached, 9);
  assert_int_equal(write_new(&o, 3, p1), 1);
  check_seq(&o, 3, p1);

  ok(kvc_sequence_fork(o.cache, 2, 4));
  int32_t p4[10];
  memcpy(p4, p2, sizeof p2);
  p4[9] = 4242;
  ok(kvc_sequence_extend(o.cache, 4, &p4[9], 1, NULL)); /* the shared tail copied */
  assert_int_equal(write_new(&o, 4, p4), 1);
  check_seq(&o, 4, p4);
  check_seq(&o, 2, p2);
  ok(kvc_cache_check(o.cache));
  kvc_cache_destroy(o.cache);
}

static void test_reuse_fork_2_ranks(void **s) { (void)s; run_reuse_fork(2, 4); }
static void test_reuse_fork_4_ranks(void **s) { (void)s; run_reuse_fork(4, 8); }
static void test_reuse_fork_4_ranks_replicated(void **s) { (void)s; run_reuse_fork(4, 2); }
static void test_reuse_fork_2_ranks_one_head(void **s) { (void)s; run_reuse_fork(2, 1); }

/* A 4-block cache with a host tier of 4 block sets per rank: offload and
 * onboard move every rank's bytes. */
static void run_host_tier(uint32_t ranks, uint32_t heads) {
  const uint32_t per = heads % ranks == 0 ? heads / ranks : 1;
  const uint64_t set_bytes = (uint64_t)LAYERS * 2 * T * per * DIM * 2;
  tp_t o;
  tp_open(&o, ranks, heads, 4 * T, 4 * set_bytes, 0);
  kvc_cache_desc_t d = KVC_CACHE_DESC_INIT;
  ok(kvc_cache_describe(o.cache, &d));
  assert_int_equal(d.host_cache_bytes, 4 * set_bytes); /* per rank */
  int32_t p1[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  uint64_t cached = 99;
  ok(kvc_sequence_add(o.cache, 1, p1, 9, NULL, NULL, &cached));
  write_new(&o, 1, p1);
  ok(kvc_sequence_commit(o.cache, 1, 9));
  ok(kvc_sequence_remove(o.cache, 1));
  int32_t p2[13];
  for (int i = 0; i < 13; ++i) p2[i] = 500 + i;
  ok(kvc_sequence_add(o.cache, 2, p2, 13, NULL, NULL, &cached)); /* offloads sequence 1's */
  write_new(&o, 2, p2);
  check_seq(&o, 2, p2);
  kvc_cache_stats_t s = KVC_CACHE_STATS_INIT;
  ok(kvc_cache_get_stats(o.cache, &s));
  assert_int_equal(s.offloaded_blocks, 3);
  assert_int_equal(s.offloaded_bytes, 3 * set_bytes); /* one rank's */
  ok(kvc_sequence_remove(o.cache, 2));
  /* The pools are overwritten where sequence 1's blocks were: poison them
   * on every rank so only a real onboard brings the bytes back. */
  for (uint32_t r = 0; r < ranks; ++r)
    memset(o.views[r][0].base, 0x5A, (size_t)(o.views[r][0].num_blocks * o.views[r][0].block_stride));
  ok(kvc_sequence_add(o.cache, 3, p1, 9, NULL, NULL, &cached));
  assert_int_equal(cached, 8);
  ok(kvc_cache_get_stats(o.cache, &s));
  assert_int_equal(s.onboarded_blocks, 2);
  write_new(&o, 3, p1);
  check_seq(&o, 3, p1); /* onboarded on every rank, bit for bit */
  ok(kvc_cache_check(o.cache));
  kvc_cache_destroy(o.cache);
}

static void test_host_tier_2_ranks(void **s) { (void)s; run_host_tier(2, 4); }
static void test_host_tier_4_ranks(void **s) { (void)s; run_host_tier(4, 4); }

/* Resize grows and shrinks every rank; the bytes of live and cached blocks
 * survive on every rank. */
static void run_resize(uint32_t ranks) {
  const uint32_t heads = 4;
  const uint64_t block = (uint64_t)LAYERS * 2 * T * (heads / ranks) * DIM * 2;
  tp_t o;
  tp_open(&o, ranks, heads, 0, 0, 16 * block);
  kvc_cache_desc_t d = KVC_CACHE_DESC_INIT;
  ok(kvc_cache_describe(o.cache, &d));
  assert_int_equal(d.num_blocks, 8);
  int32_t p1[20], p2[12];
  for (int i = 0; i < 20; ++i) p1[i] = 100 + i;
  for (int i = 0; i < 12; ++i) p2[i] = 900 + i;
  ok(kvc_sequence_add(o.cache, 1, p1, 20, NULL, NULL, NULL));
  write_new(&o, 1, p1);
  ok(kvc_sequence_commit(o.cache, 1, 20));
  ok(kvc_cache_resize(o.cache, 16 * block)); /* grow every rank */
  ok(kvc_cache_describe(o.cache, &d));
  assert_int_equal(d.num_blocks, 16);
  for (uint32_t r = 0; r < ranks; ++r) {
    kvc_layer_view_t v = KVC_LAYER_VIEW_INIT;
    ok(kvc_cache_layer_view_rank(o.cache, r, 1, &v));
    assert_int_equal(v.num_blocks, 16);
    assert_ptr_equal(v.base, o.views[r][1].base); /* in place */
  }
  ok(kvc_sequence_add(o.cache, 2, p2, 12, NULL, NULL, NULL));
  write_new(&o, 2, p2);
  ok(kvc_sequence_commit(o.cache, 2, 12));
  check_seq(&o, 1, p1);
  check_seq(&o, 2, p2);
  ok(kvc_sequence_remove(o.cache, 1)); /* their blocks stay cached */
  ok(kvc_sequence_remove(o.cache, 2));
  ok(kvc_cache_resize(o.cache, 6 * block)); /* shrink every rank: cached blocks past the end move or go */
  ok(kvc_cache_describe(o.cache, &d));
  assert_int_equal(d.num_blocks, 6);
  uint64_t cached = 0;
  ok(kvc_sequence_add(o.cache, 3, p1, 20, NULL, NULL, &cached));
  write_new(&o, 3, p1);
  check_seq(&o, 3, p1); /* whatever was reused kept its bytes on every rank */
  fails(kvc_cache_resize(o.cache, 2 * block), KVC_ERR_OUT_OF_BLOCKS, NULL);
  ok(kvc_cache_describe(o.cache, &d));
  assert_int_equal(d.num_blocks, 6); /* nothing changed */
  check_seq(&o, 3, p1);
  ok(kvc_cache_check(o.cache));
  kvc_cache_destroy(o.cache);
}

static void test_resize_2_ranks(void **s) { (void)s; run_resize(2); }
static void test_resize_4_ranks(void **s) { (void)s; run_resize(4); }

/* Randomized: adds (some sharing prefixes), extends, commits, forks,
 * removes on a small cache with a host tier; after every step every live
 * sequence is checked on every rank and the invariant checker runs. */
static uint64_t rng_state;
static uint32_t rnd(uint32_t n) {
  rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
  return (uint32_t)(rng_state >> 33) % n;
}

static void run_random(uint32_t ranks, uint32_t heads, uint64_t seed) {
  rng_state = seed;
  const uint32_t per = heads % ranks == 0 ? heads / ranks : 1;
  const uint64_t set_bytes = (uint64_t)LAYERS * 2 * T * per * DIM * 2;
  tp_t o;
  tp_open(&o, ranks, heads, 24 * T, 8 * set_bytes, 0);
  int32_t toks[MAX_SEQS][MAX_TOKENS];
  uint32_t len[MAX_SEQS] = {0};
  int live[MAX_SEQS] = {0};
  for (int step = 0; step < 300; ++step) {
    const uint32_t id = rnd(MAX_SEQS);
    const uint32_t op = rnd(5);
    if (!live[id]) {
      /* A prompt from one of 3 stems, so prompts share prefixes. */
      const uint32_t n = 1 + rnd(24);
      const int32_t stem = (int32_t)rnd(3) * 1000;
      for (uint32_t i = 0; i < n; ++i) toks[id][i] = stem + (int32_t)(i < n / 2 ? i : rnd(4));
      const kvc_status_t st = kvc_sequence_add(o.cache, id, toks[id], n, NULL, NULL, NULL);
      if (st == KVC_ERR_OUT_OF_BLOCKS) continue;
      ok(st);
      live[id] = 1;
      len[id] = n;
      write_new(&o, id, toks[id]);
    } else if (op == 0 && len[id] + 3 < MAX_TOKENS) {
      const uint32_t n = 1 + rnd(3);
      for (uint32_t i = 0; i < n; ++i) toks[id][len[id] + i] = (int32_t)rnd(50);
      const kvc_status_t st = kvc_sequence_extend(o.cache, id, &toks[id][len[id]], n, NULL);
      if (st == KVC_ERR_OUT_OF_BLOCKS) continue;
      ok(st);
      len[id] += n;
      write_new(&o, id, toks[id]);
    } else if (op == 1) {
      ok(kvc_sequence_commit(o.cache, id, len[id]));
    } else if (op == 2) {
      uint32_t child = rnd(MAX_SEQS);
      if (live[child]) continue;
      ok(kvc_sequence_fork(o.cache, id, child));
      memcpy(toks[child], toks[id], len[id] * sizeof(int32_t));
      len[child] = len[id];
      live[child] = 1;
    } else {
      ok(kvc_sequence_commit(o.cache, id, len[id]));
      ok(kvc_sequence_remove(o.cache, id));
      live[id] = 0;
    }
    ok(kvc_cache_check(o.cache));
    for (uint32_t s = 0; s < MAX_SEQS; ++s)
      if (live[s]) check_seq(&o, s, toks[s]);
  }
  kvc_cache_stats_t st = KVC_CACHE_STATS_INIT;
  ok(kvc_cache_get_stats(o.cache, &st));
  if (st.reused_blocks == 0) fail_msg("the run reused no block (seed %llu)", (unsigned long long)seed);
  kvc_cache_destroy(o.cache);
}

static void test_random_2_ranks(void **s) {
  (void)s;
  for (uint64_t seed = 1; seed <= 3; ++seed) run_random(2, 4, seed);
}
static void test_random_4_ranks(void **s) {
  (void)s;
  for (uint64_t seed = 1; seed <= 3; ++seed) run_random(4, 4, seed);
  run_random(4, 2, 9); /* replicated heads */
}

static kvc_config_t *shape(uint32_t heads) {
  kvc_config_t *c = NULL;
  ok(kvc_config_create(&c));
  ok(kvc_config_set_num_layers(c, LAYERS));
  ok(kvc_config_set_kv_heads(c, heads));
  ok(kvc_config_set_head_dim(c, DIM));
  ok(kvc_config_set_tokens_per_block(c, T));
  ok(kvc_config_set_max_tokens(c, 16 * T));
  return c;
}

static void expect_ranks(const kvc_config_t *c, uint32_t n, const int32_t *want) {
  int32_t got[MAX_RANKS] = {0};
  uint32_t count = 0;
  ok(kvc_config_get_ranks(c, got, MAX_RANKS, &count));
  assert_int_equal(count, n);
  for (uint32_t r = 0; r < n; ++r) assert_int_equal(got[r], want[r]);
}

static void test_bad_input(void **s) {
  (void)s;
  kvc_config_t *c = shape(4);
  const int32_t one[1] = {0};
  expect_ranks(c, 1, one); /* the default: one rank */
  const int32_t two[2] = {0, 1};
  ok(kvc_config_set_ranks(c, KVC_DEVICE_CPU, two, 2));
  expect_ranks(c, 2, two);
  const int32_t dup[3] = {4, 2, 4};
  fails(kvc_config_set_ranks(c, KVC_DEVICE_CPU, dup, 3), KVC_ERR_INVALID_ARGUMENT,
        "ordinals[0] and ordinals[2] are both 4");
  const int32_t neg[2] = {0, -1};
  fails(kvc_config_set_ranks(c, KVC_DEVICE_CPU, neg, 2), KVC_ERR_INVALID_ARGUMENT,
        "ordinals[1] must be >= 0, got -1");
  fails(kvc_config_set_ranks(c, KVC_DEVICE_CPU, two, 0), KVC_ERR_INVALID_ARGUMENT,
        "num_ranks must be in 1..64, got 0");
  fails(kvc_config_set_ranks(c, KVC_DEVICE_CPU, NULL, 2), KVC_ERR_INVALID_ARGUMENT, "ordinals");
  fails(kvc_config_set_ranks(c, (kvc_device_kind_t)9, two, 2), KVC_ERR_INVALID_ARGUMENT,
        "device kind");
  expect_ranks(c, 2, two); /* nothing changed */
  int32_t small[1];
  uint32_t need = 0;
  fails(kvc_config_get_ranks(c, small, 1, &need), KVC_ERR_BUFFER_TOO_SMALL, NULL);
  assert_int_equal(need, 2);
  kvc_config_destroy(c);

  /* Heads the ranks neither split nor replicate: refused at create. */
  c = shape(3);
  ok(kvc_config_set_ranks(c, KVC_DEVICE_CPU, two, 2));
  kvc_cache_t *cache = (kvc_cache_t *)0x1;
  fails(kvc_cache_create(c, &cache), KVC_ERR_INVALID_ARGUMENT,
        "layer 0 has 3 kv heads, which 2 ranks can neither split");
  kvc_config_destroy(c);
  const int32_t four[4] = {0, 1, 2, 3};
  c = shape(6);
  ok(kvc_config_set_ranks(c, KVC_DEVICE_CPU, four, 4));
  fails(kvc_cache_create(c, &cache), KVC_ERR_INVALID_ARGUMENT, "6 kv heads, which 4 ranks");
  /* set_device goes back to one rank. */
  ok(kvc_config_set_device(c, KVC_DEVICE_CPU, 0));
  expect_ranks(c, 1, one);
  ok(kvc_cache_create(c, &cache));
  kvc_cache_desc_t d = KVC_CACHE_DESC_INIT;
  ok(kvc_cache_describe(cache, &d));
  assert_int_equal(d.num_ranks, 1);
  assert_int_equal(d.max_head_replication, 1);
  kvc_cache_destroy(cache);
  kvc_config_destroy(c);

  /* What the ranks do not shard is refused, never ignored. */
  c = shape(4);
  ok(kvc_config_set_ranks(c, KVC_DEVICE_CPU, two, 2));
  uint32_t index = 0;
  ok(kvc_config_add_generic_state(c, 64, 0, &index));
  fails(kvc_cache_create(c, &cache), KVC_ERR_INVALID_ARGUMENT,
        "state resources (1) are not supported with 2 ranks");
  kvc_config_destroy(c);
  c = shape(4);
  ok(kvc_config_set_ranks(c, KVC_DEVICE_CPU, two, 2));
  ok(kvc_config_set_disk_cache(c, "/tmp/kvc-tp-unused", 1 << 20));
  fails(kvc_cache_create(c, &cache), KVC_ERR_INVALID_ARGUMENT,
        "a disk or remote cache is not supported with 2 ranks");
  kvc_stateful_t *sf = NULL;
  ok(kvc_config_set_disk_cache(c, NULL, 0));
  kvc_stateful_options_t so;
  kvc_stateful_options_init(&so);
  so.batch = 2;
  so.max_length = 16;
  fails(kvc_stateful_create(c, &so, &sf), KVC_ERR_UNSUPPORTED, "2 ranks");
  kvc_config_destroy(c);
}

/* A kernel names its rank; one out of range is refused, naming it. */
static void test_kernel_rank(void **s) {
  (void)s;
  tp_t o;
  tp_open(&o, 2, 4, 8 * T, 0, 0);
  int32_t p[3] = {1, 2, 3};
  ok(kvc_sequence_add(o.cache, 1, p, 3, NULL, NULL, NULL));
  int64_t slots[3] = {0, 1, 2};
  uint16_t kv[3 * 2 * DIM] = {0};
  kvc_store_args_t a;
  kvc_store_args_init(&a);
  a.num_tokens = 3;
  a.src_dtype = KVC_DTYPE_F16;
  a.key = kv;
  a.value = kv;
  a.slot_mapping = slots;
  a.rank = 2;
  fails(kvc_store_kv(o.cache, &a, NULL), KVC_ERR_INVALID_ARGUMENT,
        "rank must be < num_ranks (2), got 2");
  /* A caller's struct without the rank field means rank 0. */
  a.struct_size = (uint32_t)offsetof(kvc_store_args_t, rank);
  ok(kvc_store_kv(o.cache, &a, NULL));
  kvc_decode_args_t dargs;
  kvc_decode_args_init(&dargs);
  dargs.rank = 5;
  uint64_t bytes = 0;
  fails(kvc_decode_workspace_size(o.cache, &dargs, &bytes), KVC_ERR_INVALID_ARGUMENT,
        "rank must be < num_ranks (2), got 5");
  kvc_status_t async = KVC_ERR_INTERNAL;
  ok(kvc_cache_get_async_error(o.cache, NULL, &async));
  assert_int_equal(async, KVC_OK);
  kvc_cache_destroy(o.cache);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reuse_fork_2_ranks),
      cmocka_unit_test(test_reuse_fork_4_ranks),
      cmocka_unit_test(test_reuse_fork_4_ranks_replicated),
      cmocka_unit_test(test_reuse_fork_2_ranks_one_head),
      cmocka_unit_test(test_host_tier_2_ranks),
      cmocka_unit_test(test_host_tier_4_ranks),
      cmocka_unit_test(test_resize_2_ranks),
      cmocka_unit_test(test_resize_4_ranks),
      cmocka_unit_test(test_random_2_ranks),
      cmocka_unit_test(test_random_4_ranks),
      cmocka_unit_test(test_bad_input),
      cmocka_unit_test(test_kernel_rank),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
