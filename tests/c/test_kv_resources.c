/* C API of the paged KV resources (kv_resource.h): describe for Jamba-like
 * and Nemotron-H-like configs (managed together or local, and why), a
 * mixed-geometry cache (bf16, f32 with kv_factor 1 and HND, fp8 layers)
 * whose bytes survive store, reuse, copy on partial reuse, fork, offload and
 * onboard, and kvc_copy_blocks bit for bit, each read back through the
 * layer's own view; decode on a mixed cache (bf16 dim 128 + fp8 dim 64)
 * against the same layer in a single-geometry cache. The refusals and bad
 * input are in test_kv_resources_refusals.c. Black box: only the public
 * header. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <kvcache/kvcache.h>

#include "kv_resource_helpers.h"
#include "kvc_test_assert.h"

#define ok(call) assert_int_equal((call), KVC_OK)
#define T 4
#define MAXT 64

static kvc_kv_resource_desc_t kv_desc(const kvc_cache_t *cache, uint32_t i) {
  kvc_kv_resource_desc_t d = KVC_KV_RESOURCE_DESC_INIT;
  ok(kvc_cache_describe_kv_resource(cache, i, &d));
  return d;
}

static kvc_cache_t *create(kvc_config_t *c) {
  kvc_cache_t *cache = NULL;
  ok(kvc_cache_create(c, &cache));
  kvc_config_destroy(c);
  return cache;
}

/* Jamba-like: one attention layer in 8 (8 kv heads of 128, bf16) over 4
 * periods, one of them a sliding-window variant with 4 kv heads; the Mamba
 * layers are state resources. Every KV resource matches resource 0 on
 * (head_dim, dtype, kv_factor, layout): all managed, kv heads and window
 * differing only make another group. */
static void jamba_like_describe(void **state) {
  (void)state;
  kvc_config_t *c = NULL;
  ok(kvc_config_create(&c));
  const uint32_t full[3] = {0, 1, 3}, win[1] = {2};
  assert_int_equal(add_kv(c, full, 3, 8, 128, KVC_DTYPE_BF16, 2, KVC_LAYOUT_NHD, 0), 0);
  assert_int_equal(add_kv(c, win, 1, 4, 128, KVC_DTYPE_BF16, 2, KVC_LAYOUT_NHD, 64), 1);
  for (int l = 0; l < 28; ++l) {
    uint32_t i;
    ok(kvc_config_add_ssm_state(c, 1, 8192, 16, KVC_DTYPE_F32, &i));
    ok(kvc_config_add_conv_state(c, 8192, 4, KVC_DTYPE_BF16, &i));
  }
  ok(kvc_config_set_max_state_slots(c, 2));
  ok(kvc_config_set_primary_bytes(c, 256ull << 20));
  uint32_t v = 0;
  ok(kvc_config_get_num_layers(c, &v));
  assert_int_equal(v, 4);
  ok(kvc_config_get_kv_heads(c, 2, &v));
  assert_int_equal(v, 4);
  ok(kvc_config_get_attention_window(c, 2, &v));
  assert_int_equal(v, 64);
  kvc_cache_t *cache = create(c);
  kvc_cache_desc_t d = KVC_CACHE_DESC_INIT;
  ok(kvc_cache_describe(cache, &d));
  assert_int_equal(d.num_kv_resources, 2);
  assert_int_equal(d.num_resources, 56);
  assert_int_equal(d.num_groups, 2);
  for (uint32_t i = 0; i < 2; ++i) {
    kvc_kv_resource_desc_t x = kv_desc(cache, i);
    assert_int_equal(x.managed, 1);
    assert_int_equal(x.reason, KVC_RESOURCE_REASON_MANAGED);
    assert_int_equal(x.managed_with, 0);
    assert_non_null(strstr(x.reason_text, "managed"));
    assert_int_equal(x.group, i);
  }
  assert_int_equal(kv_desc(cache, 0).num_layers, 3);
  assert_int_equal(kv_desc(cache, 1).window, 64);
  assert_int_equal(kv_desc(cache, 0).block_bytes, 3ull * 2 * 16 * 8 * 128 * 2);
  assert_int_equal(kv_desc(cache, 1).block_bytes, 1ull * 2 * 16 * 4 * 128 * 2);
  assert_fails(kvc_cache_describe_kv_resource(cache, 2, &(kvc_kv_resource_desc_t)KVC_KV_RESOURCE_DESC_INIT),
               KVC_ERR_INVALID_ARGUMENT, "index must be < num_kv_resources (2), got 2");
  ok(kvc_cache_check(cache));
  kvc_cache_destroy(cache);
}

/* Nemotron-H-like: attention layers of 8 kv heads of 128 in bf16, two of
 * them kept in fp8, one a head_dim-64 MLA-like layer with kv_factor 1, one
 * in HND: every local one is named with its reason; the fp8 pair is
 * managed among itself (managed_with its first). */
static void nemotron_h_like_describe(void **state) {
  (void)state;
  kvc_config_t *c = NULL;
  ok(kvc_config_create(&c));
  const uint32_t a[2] = {0, 3}, b[2] = {1, 5}, e[1] = {2}, f[1] = {4}, g[1] = {6};
  add_kv(c, a, 2, 8, 128, KVC_DTYPE_BF16, 2, KVC_LAYOUT_NHD, 0);
  add_kv(c, b, 1, 8, 128, KVC_DTYPE_FP8_E4M3, 2, KVC_LAYOUT_NHD, 0);
  add_kv(c, e, 1, 1, 64, KVC_DTYPE_BF16, 1, KVC_LAYOUT_NHD, 0);
  add_kv(c, f, 1, 8, 128, KVC_DTYPE_BF16, 2, KVC_LAYOUT_HND, 0);
  add_kv(c, &b[1], 1, 4, 128, KVC_DTYPE_FP8_E4M3, 2, KVC_LAYOUT_NHD, 0);
  add_kv(c, g, 1, 8, 128, KVC_DTYPE_BF16, 1, KVC_LAYOUT_NHD, 0);
  uint32_t i;
  ok(kvc_config_add_ssm_state(c, 128, 64, 128, KVC_DTYPE_BF16, &i));
  ok(kvc_config_add_conv_state(c, 128 * 64 + 2 * 8 * 128, 4, KVC_DTYPE_BF16, &i));
  ok(kvc_config_set_max_state_slots(c, 2));
  ok(kvc_config_set_primary_bytes(c, 64ull << 20));
  kvc_cache_t *cache = create(c);
  kvc_cache_desc_t d = KVC_CACHE_DESC_INIT;
  ok(kvc_cache_describe(cache, &d));
  assert_int_equal(d.num_kv_resources, 6);
  assert_int_equal(d.num_layers, 7);
  assert_int_equal(d.num_groups, 6);
  assert_int_equal(d.dtype, KVC_DTYPE_BF16);
  static const uint32_t managed[6] = {1, 0, 0, 0, 0, 0};
  static const uint32_t reason[6] = {
      KVC_RESOURCE_REASON_MANAGED, KVC_RESOURCE_REASON_KV_DTYPE_DIFFERS,
      KVC_RESOURCE_REASON_KV_HEAD_DIM_DIFFERS, KVC_RESOURCE_REASON_KV_LAYOUT_DIFFERS,
      KVC_RESOURCE_REASON_KV_DTYPE_DIFFERS, KVC_RESOURCE_REASON_KV_FACTOR_DIFFERS};
  static const uint32_t with[6] = {0, 1, 2, 3, 1, 5};
  uint32_t pools[6];
  for (uint32_t r = 0; r < 6; ++r) {
    kvc_kv_resource_desc_t x = kv_desc(cache, r);
    assert_int_equal(x.managed, managed[r]);
    assert_int_equal(x.reason, reason[r]);
    assert_int_equal(x.managed_with, with[r]);
    assert_non_null(x.reason_text);
    pools[r] = x.pool;
  }
  assert_non_null(strstr(kv_desc(cache, 1).reason_text, "dtype"));
  assert_non_null(strstr(kv_desc(cache, 2).reason_text, "head_dim"));
  /* Local classes never share a pool with another class. */
  for (uint32_t r = 0; r < 6; ++r)
    for (uint32_t s = 0; s < 6; ++s)
      if (with[r] != with[s]) assert_int_not_equal(pools[r], pools[s]);
  /* The layer views carry each layer's own geometry. */
  kvc_layer_view_t v;
  kvc_layer_view_init(&v);
  ok(kvc_cache_layer_view(cache, 5, &v));
  assert_int_equal(v.dtype, KVC_DTYPE_FP8_E4M3);
  assert_int_equal(v.kv_heads, 4);
  assert_int_equal(v.elem_size, 1);
  ok(kvc_cache_layer_view(cache, 2, &v));
  assert_int_equal(v.head_dim, 64);
  assert_int_equal(v.kv_factor, 1);
  ok(kvc_cache_layer_view(cache, 4, &v));
  assert_int_equal(v.layout, KVC_LAYOUT_HND);
  assert_int_equal(v.head_stride, (uint64_t)16 * 128 * 2);
  ok(kvc_cache_check(cache));
  kvc_cache_destroy(cache);
}

/* ---- Content oracle over a mixed cache -------------------------------- */

#define LAYERS 4

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
  } else if (dtype == KVC_DTYPE_FP8_E4M3) {
    p[0] = (unsigned char)(0x30u | (bits & 0x0Fu) | (bits & 0x80u));
  } else {
    const uint16_t v = (uint16_t)(0x3F80u | (bits & 0x7Fu));
    memcpy(p, &v, 2);
  }
}

typedef struct oracle {
  kvc_cache_t *cache;
  kvc_layer_view_t views[LAYERS];
  uint32_t num_groups;
} oracle_t;

/* Layers 0 and 2: 2 heads of 8, bf16, NHD (resource 0). Layer 1: 1 head of
 * 4, f32, kv_factor 1, HND (local: head_dim). Layer 3: 4 heads of 8, fp8
 * (local: dtype). */
static void oracle_open_ceiling(oracle_t *o, uint64_t max_tokens, uint64_t host_bytes,
                                uint64_t max_primary_bytes) {
  kvc_config_t *c = NULL;
  ok(kvc_config_create(&c));
  const uint32_t l02[2] = {0, 2}, l1[1] = {1}, l3[1] = {3};
  add_kv(c, l02, 2, 2, 8, KVC_DTYPE_BF16, 2, KVC_LAYOUT_NHD, 0);
  add_kv(c, l1, 1, 1, 4, KVC_DTYPE_F32, 1, KVC_LAYOUT_HND, 0);
  add_kv(c, l3, 1, 4, 8, KVC_DTYPE_FP8_E4M3, 2, KVC_LAYOUT_NHD, 0);
  ok(kvc_config_set_tokens_per_block(c, T));
  ok(kvc_config_set_max_tokens(c, max_tokens));
  ok(kvc_config_set_host_cache_bytes(c, host_bytes));
  ok(kvc_config_set_max_primary_bytes(c, max_primary_bytes));
  o->cache = create(c);
  kvc_cache_desc_t d = KVC_CACHE_DESC_INIT;
  ok(kvc_cache_describe(o->cache, &d));
  o->num_groups = d.num_groups;
  assert_int_equal(d.num_groups, 3);
  assert_int_equal(d.num_pools, 3);
  for (uint32_t l = 0; l < LAYERS; ++l) {
    kvc_layer_view_init(&o->views[l]);
    ok(kvc_cache_layer_view(o->cache, l, &o->views[l]));
  }
  for (uint32_t p = 0; p < d.num_pools; ++p) {
    kvc_pool_desc_t pool = KVC_POOL_DESC_INIT;
    ok(kvc_cache_describe_pool(o->cache, p, &pool));
    memset(pool.base, 0xA5, (size_t)pool.bytes);
  }
}

static void oracle_open(oracle_t *o, uint64_t max_tokens, uint64_t host_bytes) {
  oracle_open_ceiling(o, max_tokens, host_bytes, 0);
}

static unsigned char *elem_at(const oracle_t *o, uint32_t layer, int64_t block, uint32_t kv,
                              uint32_t row, uint32_t h, uint32_t d) {
  const kvc_layer_view_t *v = &o->views[layer];
  return (unsigned char *)v->base + (uint64_t)block * v->block_stride + kv * v->kv_stride +
         row * v->token_stride + h * v->head_stride + d * v->elem_size;
}

static size_t write_new_tokens(oracle_t *o, uint64_t id, const int32_t *all) {
  size_t written = 0;
  kvc_sequence_desc_t sd = KVC_SEQUENCE_DESC_INIT;
  ok(kvc_sequence_describe(o->cache, id, &sd));
  for (uint32_t g = 0; g < o->num_groups; ++g) {
    int64_t slots[MAXT];
    size_t n = 0;
    int32_t added = 0;
    ok(kvc_batch_slot_mapping(o->cache, g, &id, 1, slots, MAXT, &n, &added));
    const uint64_t first = sd.num_tokens - n;
    for (uint32_t l = 0; l < LAYERS; ++l) {
      const kvc_layer_view_t *v = &o->views[l];
      if (v->group != g) continue;
      const size_t es = v->elem_size, row = (size_t)v->kv_heads * v->head_dim * es;
      unsigned char *key = malloc(n * row + 1), *val = malloc(n * row + 1);
      for (size_t i = 0; i < n; ++i)
        for (uint32_t h = 0; h < v->kv_heads; ++h)
          for (uint32_t d = 0; d < v->head_dim; ++d) {
            const uint64_t pos = first + i;
            const size_t at = i * row + ((size_t)h * v->head_dim + d) * es;
            put_elem(key + at, v->dtype, mix(all[pos], pos, l, 0, h, d));
            put_elem(val + at, v->dtype, mix(all[pos], pos, l, 1, h, d));
          }
      kvc_store_args_t a;
      kvc_store_args_init(&a);
      a.layer = l;
      a.num_tokens = (uint32_t)n;
      a.src_dtype = v->dtype;
      a.key = key;
      a.value = v->kv_factor == 2 ? val : NULL;
      a.slot_mapping = slots;
      ok(kvc_store_kv(o->cache, &a, NULL));
      free(key);
      free(val);
    }
    if (g == 0)
      for (size_t i = 0; i < n; ++i) written += slots[i] >= 0;
  }
  return written;
}

/* Every token of `id` holds its derived bytes in every layer, each read
 * with the layer's own geometry (blocks of the layer's group). */
static void check_blocks(const oracle_t *o, uint32_t layer, const int32_t *blocks, uint64_t n,
                         const int32_t *tokens) {
  const kvc_layer_view_t *v = &o->views[layer];
  for (uint64_t pos = 0; pos < n; ++pos)
    for (uint32_t kv = 0; kv < v->kv_factor; ++kv)
      for (uint32_t h = 0; h < v->kv_heads; ++h)
        for (uint32_t d = 0; d < v->head_dim; ++d) {
          unsigned char want[4];
          put_elem(want, v->dtype, mix(tokens[pos], pos, layer, kv, h, d));
          const unsigned char *have = elem_at(o, layer, blocks[pos / T], kv, (uint32_t)(pos % T), h, d);
          if (memcmp(want, have, v->elem_size) != 0)
            fail_msg("token %llu layer %u kv %u head %u dim %u differs", (unsigned long long)pos,
                     layer, kv, h, d);
        }
}

static void check_sequence(const oracle_t *o, uint64_t id, const int32_t *tokens) {
  kvc_sequence_desc_t sd = KVC_SEQUENCE_DESC_INIT;
  ok(kvc_sequence_describe(o->cache, id, &sd));
  for (uint32_t l = 0; l < LAYERS; ++l) {
    int32_t blocks[MAXT];
    size_t nb = 0;
    ok(kvc_sequence_block_ids(o->cache, id, o->views[l].group, blocks, MAXT, &nb));
    check_blocks(o, l, blocks, sd.num_tokens, tokens);
  }
}

static void mixed_reuse_fork(void **state) {
  (void)state;
  oracle_t o;
  oracle_open(&o, 32 * T, 0);
  int32_t p1[10];
  for (int i = 0; i < 10; ++i) p1[i] = 1000 + i;
  uint64_t cached = 99;
  ok(kvc_sequence_add(o.cache, 1, p1, 10, NULL, NULL, &cached));
  assert_int_equal(cached, 0);
  assert_int_equal(write_new_tokens(&o, 1, p1), 10);
  ok(kvc_sequence_commit(o.cache, 1, 10));
  check_sequence(&o, 1, p1);
  ok(kvc_sequence_remove(o.cache, 1));
  /* Reuse of block 0 and 2 rows of block 1 (copied) in every group. */
  int32_t p2[9] = {1000, 1001, 1002, 1003, 1004, 1005, 7, 8, 9};
  ok(kvc_sequence_add(o.cache, 2, p2, 9, NULL, NULL, &cached));
  assert_int_equal(cached, 6);
  assert_int_equal(write_new_tokens(&o, 2, p2), 3);
  ok(kvc_sequence_commit(o.cache, 2, 9));
  check_sequence(&o, 2, p2);
  ok(kvc_sequence_add(o.cache, 3, p1, 10, NULL, NULL, &cached));
  assert_int_equal(cached, 9);
  assert_int_equal(write_new_tokens(&o, 3, p1), 1);
  check_sequence(&o, 3, p1);
  ok(kvc_sequence_remove(o.cache, 3));
  /* Fork, then each writes its own next token. */
  ok(kvc_sequence_fork(o.cache, 2, 4));
  int32_t p4[10], p2b[10];
  memcpy(p4, p2, sizeof(p2));
  memcpy(p2b, p2, sizeof(p2));
  p4[9] = 4242;
  p2b[9] = 77;
  ok(kvc_sequence_extend(o.cache, 4, &p4[9], 1, NULL));
  assert_int_equal(write_new_tokens(&o, 4, p4), 1);
  ok(kvc_sequence_extend(o.cache, 2, &p2b[9], 1, NULL));
  assert_int_equal(write_new_tokens(&o, 2, p2b), 1);
  check_sequence(&o, 4, p4);
  check_sequence(&o, 2, p2b);
  ok(kvc_cache_check(o.cache));

  /* kvc_copy_blocks in every group: the whole block, then 1 row. */
  for (uint32_t g = 0; g < o.num_groups; ++g) {
    int32_t blocks[MAXT];
    size_t nb = 0;
    ok(kvc_sequence_block_ids(o.cache, 4, g, blocks, MAXT, &nb));
    kvc_group_desc_t gd = KVC_GROUP_DESC_INIT;
    ok(kvc_cache_describe_group(o.cache, g, &gd));
    kvc_pool_desc_t pd = KVC_POOL_DESC_INIT;
    ok(kvc_cache_describe_pool(o.cache, gd.pool, &pd));
    assert_int_equal(pd.block_bytes, gd.block_bytes);
    static const kvc_dtype_t gdt[3] = {KVC_DTYPE_BF16, KVC_DTYPE_F32, KVC_DTYPE_FP8_E4M3};
    static const uint32_t gkf[3] = {2, 1, 2}, glo[3] = {KVC_LAYOUT_NHD, KVC_LAYOUT_HND, KVC_LAYOUT_NHD};
    assert_int_equal(gd.dtype, gdt[g]);
    assert_int_equal(gd.kv_factor, gkf[g]);
    assert_int_equal(gd.layout, glo[g]);
    const int32_t src = blocks[0], dst = (int32_t)pd.num_blocks - 1, dst1 = (int32_t)pd.num_blocks - 2;
    const uint32_t one = 1;
    ok(kvc_copy_blocks(o.cache, g, &src, &dst, NULL, 1, NULL));
    unsigned char *base = pd.base;
    memset(base + (uint64_t)dst1 * pd.block_bytes, 0xA5, pd.block_bytes);
    ok(kvc_copy_blocks(o.cache, g, &src, &dst1, &one, 1, NULL));
    assert_memory_equal(base + (uint64_t)dst * pd.block_bytes, base + (uint64_t)src * pd.block_bytes,
                        pd.block_bytes);
    for (uint32_t l = 0; l < LAYERS; ++l) {
      if (o.views[l].group != g) continue;
      const int32_t copied[1] = {dst}, row0[1] = {dst1};
      check_blocks(&o, l, copied, T, p4);
      check_blocks(&o, l, row0, 1, p4);
      /* Row 1 of the partial copy was not written. */
      assert_int_equal(*elem_at(&o, l, dst1, 0, 1, 0, 0), 0xA5);
    }
  }
  kvc_cache_destroy(o.cache);
}

static kvc_cache_stats_t stats_of(const kvc_cache_t *cache) {
  kvc_cache_stats_t s = KVC_CACHE_STATS_INIT;
  ok(kvc_cache_get_stats(cache, &s));
  return s;
}

/* Offload to the host tier and onboard back, every group's bytes intact. */
static void mixed_host_tier_round_trip(void **state) {
  (void)state;
  /* One block of every group: 2 layers bf16 (2*2*4*2*8*2) + f32 HND kv 1
   * (1*4*1*4*4) + fp8 (2*4*4*8*1). */
  const uint64_t set_bytes = 512 + 64 + 256;
  oracle_t o;
  oracle_open(&o, 4 * T, 4 * set_bytes + 100);
  kvc_cache_desc_t d = KVC_CACHE_DESC_INIT;
  ok(kvc_cache_describe(o.cache, &d));
  assert_int_equal(d.host_cache_bytes, 4 * set_bytes);
  int32_t p1[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  uint64_t cached = 99;
  ok(kvc_sequence_add(o.cache, 1, p1, 9, NULL, NULL, &cached));
  write_new_tokens(&o, 1, p1);
  ok(kvc_sequence_commit(o.cache, 1, 9));
  ok(kvc_sequence_remove(o.cache, 1));
  int32_t p2[13];
  for (int i = 0; i < 13; ++i) p2[i] = 500 + i;
  ok(kvc_sequence_add(o.cache, 2, p2, 13, NULL, NULL, &cached));
  write_new_tokens(&o, 2, p2);
  check_sequence(&o, 2, p2);
  kvc_cache_stats_t s = stats_of(o.cache);
  assert_int_equal(s.offloaded_blocks, 3);
  assert_int_equal(s.offloaded_bytes, 3 * set_bytes);
  ok(kvc_sequence_remove(o.cache, 2));
  ok(kvc_sequence_add(o.cache, 3, p1, 9, NULL, NULL, &cached));
  assert_int_equal(cached, 8);
  write_new_tokens(&o, 3, p1);
  check_sequence(&o, 3, p1);
  s = stats_of(o.cache);
  assert_int_equal(s.onboarded_blocks, 2);
  assert_int_equal(s.onboarded_bytes, 2 * set_bytes);
  ok(kvc_cache_check(o.cache));
  kvc_cache_destroy(o.cache);
}

/* Resize a mixed cache up and down again (every pool of its own block
 * bytes): the live sequence's bytes intact in every group. */
static void mixed_resize(void **state) {
  (void)state;
  const uint64_t set_bytes = 512 + 64 + 256;
  oracle_t o;
  oracle_open_ceiling(&o, 16 * T, 0, 64 * set_bytes);
  int32_t p[13];
  for (int i = 0; i < 13; ++i) p[i] = 300 + i;
  ok(kvc_sequence_add(o.cache, 1, p, 13, NULL, NULL, NULL));
  write_new_tokens(&o, 1, p);
  ok(kvc_sequence_commit(o.cache, 1, 13));
  ok(kvc_cache_resize(o.cache, 48 * set_bytes));
  kvc_cache_desc_t d = KVC_CACHE_DESC_INIT;
  ok(kvc_cache_describe(o.cache, &d));
  assert_int_equal(d.token_capacity, 48 * T);
  for (uint32_t l = 0; l < LAYERS; ++l) ok(kvc_cache_layer_view(o.cache, l, &o.views[l]));
  check_sequence(&o, 1, p);
  /* Another sequence through the grown pools, then gone (its blocks stay
   * cached past the new end: the shrink evicts them). */
  int32_t q[40];
  for (int i = 0; i < 40; ++i) q[i] = 900 + i;
  ok(kvc_sequence_add(o.cache, 2, q, 40, NULL, NULL, NULL));
  write_new_tokens(&o, 2, q);
  check_sequence(&o, 2, q);
  ok(kvc_sequence_commit(o.cache, 2, 40));
  ok(kvc_sequence_remove(o.cache, 2));
  if (kvc_cache_resize(o.cache, 8 * set_bytes) != KVC_OK) fail_msg("%s", kvc_last_error_message());
  ok(kvc_cache_describe(o.cache, &d));
  assert_int_equal(d.token_capacity, 8 * T);
  for (uint32_t l = 0; l < LAYERS; ++l) ok(kvc_cache_layer_view(o.cache, l, &o.views[l]));
  check_sequence(&o, 1, p);
  ok(kvc_cache_check(o.cache));
  kvc_cache_destroy(o.cache);
}

/* ---- Kernels on a mixed cache ------------------------------------------ */

static float bf16_to_f32(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* Stores the same K/V into layer `layer` of `cache`, then decodes `q`. */
static void store_and_decode(kvc_cache_t *cache, uint32_t layer, uint32_t heads, uint32_t dim,
                             uint32_t n, uint16_t *out, uint16_t *pout) {
  uint32_t group = 0;
  kvc_layer_view_t v;
  kvc_layer_view_init(&v);
  ok(kvc_cache_layer_view(cache, layer, &v));
  group = v.group;
  int32_t tokens[40];
  for (uint32_t i = 0; i < n; ++i) tokens[i] = (int32_t)(10 + i);
  ok(kvc_sequence_add(cache, 1, tokens, n, NULL, NULL, NULL));
  int64_t slots[40];
  size_t ns = 0;
  ok(kvc_batch_slot_mapping(cache, group, &(uint64_t){1}, 1, slots, 40, &ns, NULL));
  assert_int_equal(ns, n);
  const size_t elems = (size_t)n * heads * dim;
  uint16_t *k = malloc(elems * 2), *val = malloc(elems * 2);
  for (size_t i = 0; i < elems; ++i) {
    k[i] = (uint16_t)(0x3C00u + (mix((int32_t)i, 0, 0, 0, 0, 0) & 0x7Fu)) ^ (uint16_t)((i & 1) << 15);
    val[i] = (uint16_t)(0x3C00u + (mix((int32_t)i, 1, 0, 0, 0, 0) & 0x7Fu));
  }
  kvc_store_args_t a;
  kvc_store_args_init(&a);
  a.layer = layer;
  a.num_tokens = n;
  a.src_dtype = KVC_DTYPE_BF16;  /* quantized to fp8 with scales 1 on an fp8 layer */
  a.key = k;
  a.value = val;
  a.slot_mapping = slots;
  ok(kvc_store_kv(cache, &a, NULL));
  int32_t blocks[40];
  size_t nb = 0;
  ok(kvc_sequence_block_ids(cache, 1, group, blocks, 40, &nb));
  const uint32_t qh = heads * 2;
  uint16_t *q = malloc((size_t)qh * dim * 2);
  for (size_t i = 0; i < (size_t)qh * dim; ++i) q[i] = (uint16_t)(0x3C00u + (i * 37 % 127));
  kvc_decode_args_t da;
  kvc_decode_args_init(&da);
  da.layer = layer;
  da.batch = 1;
  da.q_heads = qh;
  da.q_dtype = KVC_DTYPE_BF16;
  da.query = q;
  da.out = out;
  const int32_t len = (int32_t)n;
  da.seq_lens = &len;
  da.block_table = blocks;
  da.table_stride = (uint32_t)nb;
  da.max_seq_len = n;
  ok(kvc_decode_attention(cache, &da, NULL));
  /* Prefill of the last 5 rows (queries: the first 5 query rows repeated). */
  const uint32_t nq = 5;
  uint16_t *pq = malloc((size_t)nq * qh * dim * 2);
  for (uint32_t r = 0; r < nq; ++r)
    for (size_t i = 0; i < (size_t)qh * dim; ++i)
      pq[r * qh * dim + i] = (uint16_t)(q[i] ^ (r << 3));
  const int32_t qo[2] = {0, (int32_t)nq};
  kvc_prefill_args_t pa;
  kvc_prefill_args_init(&pa);
  pa.layer = layer;
  pa.batch = 1;
  pa.total_q = nq;
  pa.q_heads = qh;
  pa.q_dtype = KVC_DTYPE_BF16;
  pa.query = pq;
  pa.out = pout;
  pa.qo_indptr = qo;
  pa.kv_lens = &len;
  pa.block_table = blocks;
  pa.table_stride = (uint32_t)nb;
  pa.max_kv_len = n;
  ok(kvc_prefill_attention(cache, &pa, NULL));
  free(pq);
  /* Finite output. */
  for (size_t i = 0; i < (size_t)qh * dim; ++i) {
    const float f = bf16_to_f32(out[i]);
    assert_true(f == f);
  }
  free(q);
  free(k);
  free(val);
}

/* Store, decode and prefill on a mixed cache (bf16 dim 128, fp8 dim 64)
 * equal the same on a single-geometry cache of the layer's geometry (the
 * kernels' reference tests are in test_kernels.c and test_decode_cpu.c),
 * bit for bit. */
static void mixed_decode_matches_single(void **state) {
  (void)state;
  const uint32_t n = 37;
  uint16_t mixed[2][2 * 2 * 128], single[2][2 * 2 * 128];
  static uint16_t pmixed[2][5 * 2 * 2 * 128], psingle[2][5 * 2 * 2 * 128];
  for (int layer = 0; layer < 2; ++layer) {
    const uint32_t heads = layer == 0 ? 2 : 1, dim = layer == 0 ? 128 : 64;
    const kvc_dtype_t dtype = layer == 0 ? KVC_DTYPE_BF16 : KVC_DTYPE_FP8_E4M3;
    kvc_config_t *c = NULL;
    ok(kvc_config_create(&c));
    const uint32_t l0[1] = {0}, l1[1] = {1};
    add_kv(c, l0, 1, 2, 128, KVC_DTYPE_BF16, 2, KVC_LAYOUT_NHD, 0);
    add_kv(c, l1, 1, 1, 64, KVC_DTYPE_FP8_E4M3, 2, KVC_LAYOUT_NHD, 0);
    ok(kvc_config_set_max_tokens(c, 256));
    kvc_cache_t *cache = create(c);
    memset(mixed[layer], 0, sizeof(mixed[layer]));
    store_and_decode(cache, (uint32_t)layer, heads, dim, n, mixed[layer], pmixed[layer]);
    ok(kvc_cache_check(cache));
    kvc_cache_destroy(cache);

    ok(kvc_config_create(&c));
    ok(kvc_config_set_num_layers(c, 1));
    ok(kvc_config_set_kv_heads(c, heads));
    ok(kvc_config_set_head_dim(c, dim));
    ok(kvc_config_set_dtype(c, dtype));
    ok(kvc_config_set_max_tokens(c, 256));
    cache = create(c);
    memset(single[layer], 0, sizeof(single[layer]));
    store_and_decode(cache, 0, heads, dim, n, single[layer], psingle[layer]);
    kvc_cache_destroy(cache);
    assert_memory_equal(mixed[layer], single[layer], (size_t)heads * 2 * dim * 2);
    assert_memory_equal(pmixed[layer], psingle[layer], (size_t)5 * heads * 2 * dim * 2);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(jamba_like_describe),
      cmocka_unit_test(nemotron_h_like_describe),
      cmocka_unit_test(mixed_reuse_fork),
      cmocka_unit_test(mixed_host_tier_round_trip),
      cmocka_unit_test(mixed_resize),
      cmocka_unit_test(mixed_decode_matches_single),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
