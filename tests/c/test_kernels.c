/* C API kernels on a CPU cache: store K/V checked byte for byte against an
 * independent model of the block layout (every dtype, NHD and HND, slot -1,
 * kv_factor 1, fp8 quantization), batched block copies, decode attention on
 * hand-checkable inputs, and every argument error with its message. Black
 * box: only the public header. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <kvcache/kvcache.h>

#include "kvc_test_assert.h"

#define OK(call) assert_int_equal((call), KVC_OK)

typedef struct shape {
  kvc_dtype_t dtype;
  kvc_layout_t layout;
  uint32_t kv_factor;
  uint32_t layers;
  uint32_t kv_heads;
  uint32_t head_dim;
  uint32_t tokens_per_block;
  uint64_t max_tokens;
} shape_t;

static shape_t small_shape(kvc_dtype_t dtype, kvc_layout_t layout) {
  shape_t s = {dtype, layout, 2, 3, 2, 64, 16, 128};
  return s;
}

static kvc_cache_t *make_cache(shape_t s) {
  kvc_config_t *c = NULL;
  OK(kvc_config_create(&c));
  OK(kvc_config_set_num_layers(c, s.layers));
  OK(kvc_config_set_kv_heads(c, s.kv_heads));
  OK(kvc_config_set_head_dim(c, s.head_dim));
  OK(kvc_config_set_dtype(c, s.dtype));
  OK(kvc_config_set_layout(c, s.layout));
  OK(kvc_config_set_kv_factor(c, s.kv_factor));
  OK(kvc_config_set_tokens_per_block(c, s.tokens_per_block));
  OK(kvc_config_set_max_tokens(c, s.max_tokens));
  kvc_cache_t *cache = NULL;
  OK(kvc_cache_create(c, &cache));
  kvc_config_destroy(c);
  return cache;
}

static size_t elem_size(kvc_dtype_t d) {
  return d == KVC_DTYPE_F32 ? 4 : d == KVC_DTYPE_FP8_E4M3 ? 1 : 2;
}

static uint32_t rng_state = 12345u;
static uint32_t rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 17;
  rng_state ^= rng_state << 5;
  return rng_state;
}

static void fill_random(void *p, size_t n) {
  unsigned char *b = p;
  for (size_t i = 0; i < n; ++i) b[i] = (unsigned char)rnd();
}

static kvc_pool_desc_t pool_of(kvc_cache_t *cache, uint32_t pool) {
  kvc_pool_desc_t d;
  kvc_pool_desc_init(&d);
  OK(kvc_cache_describe_pool(cache, pool, &d));
  return d;
}

static kvc_layer_view_t view_of(kvc_cache_t *cache, uint32_t layer) {
  kvc_layer_view_t v;
  kvc_layer_view_init(&v);
  OK(kvc_cache_layer_view(cache, layer, &v));
  return v;
}

/* Offset of (block, kv, token, head) from the pool base, from the documented
 * [layer][kv][tokens][heads][dim] / [layer][kv][heads][tokens][dim] layout,
 * not from the view's strides (which this also checks). */
static size_t model_offset(shape_t s, uint32_t layer, uint64_t block, uint32_t kv, uint32_t token,
                           uint32_t head) {
  const size_t es = elem_size(s.dtype);
  const size_t row = (size_t)s.head_dim * es;
  const size_t slab = (size_t)s.tokens_per_block * s.kv_heads * row;
  const size_t block_bytes = slab * s.kv_factor * s.layers;
  size_t off = block * block_bytes + ((size_t)layer * s.kv_factor + kv) * slab;
  if (s.layout == KVC_LAYOUT_NHD)
    off += ((size_t)token * s.kv_heads + head) * row;
  else
    off += ((size_t)head * s.tokens_per_block + token) * row;
  return off;
}

/* Stores num_tokens random tokens into `layer` and checks the whole pool
 * against a model: the stored rows where their slots say, poison elsewhere. */
static void check_store(shape_t s, uint32_t layer) {
  kvc_cache_t *cache = make_cache(s);
  kvc_pool_desc_t pool = pool_of(cache, 0);
  const uint64_t slots = pool.num_blocks * s.tokens_per_block;
  unsigned char *expect = malloc(pool.bytes);
  memset(pool.base, 0xA5, pool.bytes);
  memset(expect, 0xA5, pool.bytes);

  const uint32_t n = 40;
  const size_t es = elem_size(s.dtype);
  const size_t token_bytes = (size_t)s.kv_heads * s.head_dim * es;
  unsigned char *key = malloc(n * token_bytes), *value = malloc(n * token_bytes);
  fill_random(key, n * token_bytes);
  fill_random(value, n * token_bytes);
  int64_t slot_mapping[40];
  for (uint32_t i = 0; i < n; ++i) {
    /* Distinct slots scattered over the pool, every 5th token skipped. */
    slot_mapping[i] = (i % 5 == 4) ? -1 : (int64_t)((i * 37u + 11u) % slots);
  }
  slot_mapping[0] = (int64_t)slots - 1; /* the very last slot */
  for (uint32_t i = 0; i < n; ++i) {
    if (slot_mapping[i] < 0) continue;
    const uint64_t block = (uint64_t)slot_mapping[i] / s.tokens_per_block;
    const uint32_t off = (uint32_t)((uint64_t)slot_mapping[i] % s.tokens_per_block);
    for (uint32_t kv = 0; kv < s.kv_factor; ++kv)
      for (uint32_t h = 0; h < s.kv_heads; ++h)
        memcpy(expect + model_offset(s, layer, block, kv, off, h),
               (kv == 0 ? key : value) + (size_t)i * token_bytes + (size_t)h * s.head_dim * es,
               s.head_dim * es);
  }

  kvc_store_args_t a = KVC_STORE_ARGS_INIT;
  a.layer = layer;
  a.num_tokens = n;
  a.src_dtype = s.dtype;
  a.key = key;
  a.value = s.kv_factor == 2 ? value : NULL;
  a.slot_mapping = slot_mapping;
  OK(kvc_store_kv(cache, &a, NULL));
  assert_memory_equal(pool.base, expect, pool.bytes);

  kvc_status_t async = -1;
  OK(kvc_cache_get_async_error(cache, NULL, &async));
  assert_int_equal(async, KVC_OK);
  free(key);
  free(value);
  free(expect);
  kvc_cache_destroy(cache);
}

static void test_store_every_dtype_and_layout(void **state) {
  (void)state;
  const kvc_dtype_t dtypes[] = {KVC_DTYPE_F32, KVC_DTYPE_F16, KVC_DTYPE_BF16, KVC_DTYPE_FP8_E4M3};
  const kvc_layout_t layouts[] = {KVC_LAYOUT_NHD, KVC_LAYOUT_HND};
  for (int d = 0; d < 4; ++d)
    for (int l = 0; l < 2; ++l)
      for (uint32_t layer = 0; layer < 3; layer += 2) check_store(small_shape(dtypes[d], layouts[l]), layer);
}

static void test_store_kv_factor_1_and_odd_shapes(void **state) {
  (void)state;
  shape_t s = small_shape(KVC_DTYPE_BF16, KVC_LAYOUT_HND);
  s.kv_factor = 1;
  check_store(s, 1);
  s = small_shape(KVC_DTYPE_F16, KVC_LAYOUT_NHD);
  s.kv_heads = 3;
  s.head_dim = 40;
  s.tokens_per_block = 4;
  check_store(s, 2);
}

static uint16_t f16_bits(float f) {
  /* Exact for the values used below (small powers of two and their sums). */
  union { float f; uint32_t u; } x = {f};
  const uint32_t sign = (x.u >> 16) & 0x8000u;
  const int32_t e = (int32_t)((x.u >> 23) & 0xff) - 127 + 15;
  return (uint16_t)(sign | ((uint32_t)e << 10) | ((x.u & 0x7fffffu) >> 13));
}

static void test_store_fp8_quantizes(void **state) {
  (void)state;
  shape_t s = small_shape(KVC_DTYPE_FP8_E4M3, KVC_LAYOUT_NHD);
  s.kv_heads = 1;
  kvc_cache_t *cache = make_cache(s);
  kvc_layer_view_t v = view_of(cache, 0);
  /* x / scale with scale 2 (K) and 0.5 (V). */
  float key[64], value[64];
  for (int d = 0; d < 64; ++d) key[d] = value[d] = 0.0f;
  key[0] = 2.0f;        /* 1.0 -> 0x38 */
  key[1] = -4.0f;       /* -2.0 -> 0xC0 */
  key[2] = 896.0f;      /* 448 -> 0x7E */
  key[3] = 5000.0f;     /* saturates to 448 -> 0x7E */
  key[4] = -5000.0f;    /* -448 -> 0xFE */
  key[5] = 0.00390625f; /* 2^-9 = smallest subnormal -> 0x01 */
  key[6] = 2.25f;       /* 1.125 -> 0x39 */
  key[7] = 2.125f;      /* 1.0625: a tie between 1.0 and 1.125, to even -> 0x38 */
  key[8] = 2.375f;      /* 1.1875: a tie between 1.125 and 1.25, to even -> 0x3A */
  value[0] = 0.5f;      /* 1.0 -> 0x38 */
  value[1] = 100.0f;    /* 200 -> between 192 and 208 exactly: to even 192 -> 0x74 */
  int64_t slot = 5;
  kvc_store_args_t a = KVC_STORE_ARGS_INIT;
  a.num_tokens = 1;
  a.src_dtype = KVC_DTYPE_F32;
  a.key = key;
  a.value = value;
  a.slot_mapping = &slot;
  a.k_scale = 2.0f;
  a.v_scale = 0.5f;
  OK(kvc_store_kv(cache, &a, NULL));
  const unsigned char *k = (const unsigned char *)v.base + 5 * v.token_stride;
  const unsigned char *val = k + v.kv_stride;
  const unsigned char want_k[9] = {0x38, 0xC0, 0x7E, 0x7E, 0xFE, 0x01, 0x39, 0x38, 0x3A};
  assert_memory_equal(k, want_k, 9);
  assert_int_equal(k[9], 0x00);
  assert_int_equal(val[0], 0x38);
  assert_int_equal(val[1], 0x74);

  /* f16 input takes the same path. */
  uint16_t kh[64], vh[64];
  for (int d = 0; d < 64; ++d) kh[d] = vh[d] = 0;
  kh[0] = f16_bits(-3.0f); /* -1.5 -> 0xBC */
  vh[0] = f16_bits(0.25f); /* 0.5 -> 0x30 */
  a.src_dtype = KVC_DTYPE_F16;
  a.key = kh;
  a.value = vh;
  OK(kvc_store_kv(cache, &a, NULL));
  assert_int_equal(k[0], 0xBC);
  assert_int_equal(val[0], 0x30);
  kvc_cache_destroy(cache);
}

static void test_store_errors(void **state) {
  (void)state;
  kvc_cache_t *cache = make_cache(small_shape(KVC_DTYPE_BF16, KVC_LAYOUT_NHD));
  kvc_pool_desc_t pool = pool_of(cache, 0);
  uint16_t key[2 * 2 * 64], value[2 * 2 * 64];
  fill_random(key, sizeof key);
  fill_random(value, sizeof value);
  int64_t slots[2] = {3, 4};
  kvc_store_args_t a;
  kvc_store_args_init(&a);
  assert_int_equal(a.struct_size, sizeof(kvc_store_args_t));
  assert_true(a.k_scale == 1.0f && a.v_scale == 1.0f);
  a.num_tokens = 2;
  a.src_dtype = KVC_DTYPE_BF16;
  a.key = key;
  a.value = value;
  a.slot_mapping = slots;

  assert_fails(kvc_store_kv(NULL, &a, NULL), KVC_ERR_INVALID_ARGUMENT, "cache must not be NULL");
  assert_fails(kvc_store_kv(cache, NULL, NULL), KVC_ERR_INVALID_ARGUMENT, "args must not be NULL");
  kvc_store_args_t b = a;
  b.struct_size = 0;
  assert_fails(kvc_store_kv(cache, &b, NULL), KVC_ERR_INVALID_ARGUMENT, "args->struct_size must be set");
  b = a;
  b.layer = 3;
  assert_fails(kvc_store_kv(cache, &b, NULL), KVC_ERR_INVALID_ARGUMENT, "layer must be < num_layers (3), got 3");
  b = a;
  b.src_dtype = KVC_DTYPE_F16;
  assert_fails(kvc_store_kv(cache, &b, NULL), KVC_ERR_INVALID_ARGUMENT,
               "src_dtype f16 cannot be stored in a bf16 cache");
  b.src_dtype = 0;
  assert_fails(kvc_store_kv(cache, &b, NULL), KVC_ERR_INVALID_ARGUMENT, "src_dtype unknown dtype 0");
  b = a;
  b.key = NULL;
  assert_fails(kvc_store_kv(cache, &b, NULL), KVC_ERR_INVALID_ARGUMENT, "key must not be NULL");
  b = a;
  b.value = NULL;
  assert_fails(kvc_store_kv(cache, &b, NULL), KVC_ERR_INVALID_ARGUMENT, "value must not be NULL");
  b = a;
  b.slot_mapping = NULL;
  assert_fails(kvc_store_kv(cache, &b, NULL), KVC_ERR_INVALID_ARGUMENT, "slot_mapping must not be NULL");

  /* A slot out of range fails the call before anything is written. */
  memset(pool.base, 0x5A, pool.bytes);
  int64_t bad[2] = {3, (int64_t)(pool.num_blocks * 16)};
  b = a;
  b.slot_mapping = bad;
  char want[128];
  snprintf(want, sizeof want, "slot_mapping[1] = %llu is outside [-1, %llu)",
           (unsigned long long)(pool.num_blocks * 16), (unsigned long long)(pool.num_blocks * 16));
  assert_fails(kvc_store_kv(cache, &b, NULL), KVC_ERR_INVALID_ARGUMENT, want);
  bad[1] = -2;
  assert_fails(kvc_store_kv(cache, &b, NULL), KVC_ERR_INVALID_ARGUMENT, "slot_mapping[1] = -2 is outside");
  for (uint64_t i = 0; i < pool.bytes; ++i)
    if (((unsigned char *)pool.base)[i] != 0x5A) fail_msg("byte %llu written by a failed call", (unsigned long long)i);

  /* Zero tokens is a no-op, even with NULL arrays. */
  b = a;
  b.num_tokens = 0;
  b.key = NULL;
  b.value = NULL;
  b.slot_mapping = NULL;
  OK(kvc_store_kv(cache, &b, NULL));

  /* A newer caller's struct with unknown non-zero bytes is refused. */
  struct {
    kvc_store_args_t a;
    uint64_t extra;
  } newer;
  memset(&newer, 0, sizeof newer);
  newer.a = a;
  newer.a.struct_size = sizeof newer;
  newer.extra = 1;
  assert_fails(kvc_store_kv(cache, &newer.a, NULL), KVC_ERR_INVALID_ARGUMENT, "built for a newer kvcache");
  newer.extra = 0;
  OK(kvc_store_kv(cache, &newer.a, NULL));
  kvc_cache_destroy(cache);

  /* kv_factor 1: value must be NULL. */
  shape_t s = small_shape(KVC_DTYPE_BF16, KVC_LAYOUT_NHD);
  s.kv_factor = 1;
  cache = make_cache(s);
  assert_fails(kvc_store_kv(cache, &a, NULL), KVC_ERR_INVALID_ARGUMENT,
               "value must be NULL for a cache with kv_factor 1");
  kvc_cache_destroy(cache);

  /* fp8: scales must be finite and > 0 when quantizing. */
  cache = make_cache(small_shape(KVC_DTYPE_FP8_E4M3, KVC_LAYOUT_NHD));
  b = a;
  b.k_scale = 0.0f;
  assert_fails(kvc_store_kv(cache, &b, NULL), KVC_ERR_INVALID_ARGUMENT, "k_scale must be finite and > 0");
  b = a;
  b.v_scale = (float)INFINITY;
  assert_fails(kvc_store_kv(cache, &b, NULL), KVC_ERR_INVALID_ARGUMENT, "v_scale must be finite and > 0");
  b = a;
  b.src_dtype = KVC_DTYPE_FP8_E4M3; /* already quantized: a byte copy, scales unused */
  b.k_scale = 0.0f;
  OK(kvc_store_kv(cache, &b, NULL));
  kvc_cache_destroy(cache);
}

static void check_copies(kvc_layout_t layout) {
  shape_t s = small_shape(KVC_DTYPE_F16, layout);
  kvc_cache_t *cache = make_cache(s);
  kvc_pool_desc_t pool = pool_of(cache, 0);
  fill_random(pool.base, pool.bytes);
  unsigned char *expect = malloc(pool.bytes);
  memcpy(expect, pool.base, pool.bytes);
  const int32_t src[4] = {1, 1, 5, 0};
  const int32_t dst[4] = {2, 3, 6, 7};
  const uint32_t num_tokens[4] = {16, 5, 1, 100};
  /* Model: every (layer, kv, head) row of the first n tokens. */
  for (int i = 0; i < 4; ++i) {
    const uint32_t n = num_tokens[i] < 16 ? num_tokens[i] : 16;
    for (uint32_t l = 0; l < s.layers; ++l)
      for (uint32_t kv = 0; kv < 2; ++kv)
        for (uint32_t t = 0; t < n; ++t)
          for (uint32_t h = 0; h < s.kv_heads; ++h)
            memcpy(expect + model_offset(s, l, (uint64_t)dst[i], kv, t, h),
                   expect + model_offset(s, l, (uint64_t)src[i], kv, t, h), s.head_dim * 2);
  }
  OK(kvc_copy_blocks(cache, 0, src, dst, num_tokens, 4, NULL));
  assert_memory_equal(pool.base, expect, pool.bytes);

  /* NULL num_tokens copies whole blocks. */
  const int32_t src2[1] = {2}, dst2[1] = {4};
  memcpy(expect + 4 * pool.block_bytes, expect + 2 * pool.block_bytes, pool.block_bytes);
  OK(kvc_copy_blocks(cache, 0, src2, dst2, NULL, 1, NULL));
  assert_memory_equal(pool.base, expect, pool.bytes);
  free(expect);
  kvc_cache_destroy(cache);
}

static void test_copy_blocks(void **state) {
  (void)state;
  check_copies(KVC_LAYOUT_NHD);
  check_copies(KVC_LAYOUT_HND);
}

static void test_copy_blocks_errors(void **state) {
  (void)state;
  kvc_cache_t *cache = make_cache(small_shape(KVC_DTYPE_BF16, KVC_LAYOUT_NHD));
  kvc_pool_desc_t pool = pool_of(cache, 0);
  const int32_t src[2] = {0, 1};
  const int32_t dst[2] = {2, 3};
  assert_fails(kvc_copy_blocks(NULL, 0, src, dst, NULL, 2, NULL), KVC_ERR_INVALID_ARGUMENT, "cache must not be NULL");
  assert_fails(kvc_copy_blocks(cache, 1, src, dst, NULL, 2, NULL), KVC_ERR_INVALID_ARGUMENT,
               "group must be < num_groups (1), got 1");
  assert_fails(kvc_copy_blocks(cache, 0, NULL, dst, NULL, 2, NULL), KVC_ERR_INVALID_ARGUMENT, "src must not be NULL");
  assert_fails(kvc_copy_blocks(cache, 0, src, NULL, NULL, 2, NULL), KVC_ERR_INVALID_ARGUMENT, "dst must not be NULL");
  OK(kvc_copy_blocks(cache, 0, NULL, NULL, NULL, 0, NULL));
  const int32_t neg[2] = {0, -1};
  assert_fails(kvc_copy_blocks(cache, 0, neg, dst, NULL, 2, NULL), KVC_ERR_INVALID_ARGUMENT, "src[1] = -1 is outside [0, ");
  int32_t big[2] = {2, (int32_t)pool.num_blocks};
  char want[96];
  snprintf(want, sizeof want, "dst[1] = %d is outside [0, %d)", (int)pool.num_blocks, (int)pool.num_blocks);
  assert_fails(kvc_copy_blocks(cache, 0, src, big, NULL, 2, NULL), KVC_ERR_INVALID_ARGUMENT, want);
  const int32_t twice[2] = {3, 3};
  assert_fails(kvc_copy_blocks(cache, 0, src, twice, NULL, 2, NULL), KVC_ERR_INVALID_ARGUMENT,
               "block 3 is the destination of more than one copy");
  const int32_t chain_src[2] = {0, 2};
  assert_fails(kvc_copy_blocks(cache, 0, chain_src, dst, NULL, 2, NULL), KVC_ERR_INVALID_ARGUMENT,
               "block 2 is both the source of copy 1 and the destination");
  kvc_cache_destroy(cache);
}

/* Decode on a CPU cache with f32 KV: hand-checkable outputs. */
typedef struct decode_fixture {
  kvc_cache_t *cache;
  shape_t shape;
} decode_fixture_t;

static void store_token(kvc_cache_t *cache, shape_t s, uint32_t layer, int64_t slot, const float *k,
                        const float *v) {
  kvc_store_args_t a = KVC_STORE_ARGS_INIT;
  a.layer = layer;
  a.num_tokens = 1;
  a.src_dtype = s.dtype;
  a.key = k;
  a.value = v;
  a.slot_mapping = &slot;
  OK(kvc_store_kv(cache, &a, NULL));
}

/* exp(x) for small x by its series: the tests link no libm. */
static double series_exp(double x) {
  double term = 1.0, sum = 1.0;
  for (int n = 1; n < 60; ++n) {
    term *= x / n;
    sum += term;
  }
  return sum;
}

static void test_decode_reference_values(void **state) {
  (void)state;
  shape_t s = small_shape(KVC_DTYPE_F32, KVC_LAYOUT_HND);
  s.kv_heads = 2;
  s.tokens_per_block = 4;
  kvc_cache_t *cache = make_cache(s);
  /* Sequence 0: 6 tokens in blocks {7, 2}; K of token t is e0 * t for kv
   * head 0 and 0 for kv head 1; V is (t + 1) for head 0 and 10(t + 1) for
   * head 1, on every dim. */
  const int32_t table[2 * 3] = {7, 2, -1, 5, -1, -1};
  float k[2 * 64], v[2 * 64];
  for (uint32_t t = 0; t < 6; ++t) {
    for (int d = 0; d < 64; ++d) {
      k[d] = d == 0 ? (float)t : 0.0f;
      k[64 + d] = 0.0f;
      v[d] = (float)(t + 1);
      v[64 + d] = 10.0f * (float)(t + 1);
    }
    store_token(cache, s, 1, (int64_t)table[t / 4] * 4 + t % 4, k, v);
  }
  /* Sequence 1: one token in block 5. */
  for (int d = 0; d < 128; ++d) {
    k[d] = 1.0f;
    v[d] = -3.0f;
  }
  store_token(cache, s, 1, 5 * 4, k, v);

  /* 4 query heads: heads 0, 1 read kv head 0; heads 2, 3 kv head 1. */
  float q[2 * 4 * 64], out[2 * 4 * 64];
  memset(q, 0, sizeof q);
  q[0 * 64] = 1.0f;             /* seq 0 head 0: scores t * scale */
  for (int i = 0; i < 2 * 4 * 64; ++i) out[i] = NAN;
  const int32_t seq_lens[2] = {6, 1};
  kvc_decode_args_t a;
  kvc_decode_args_init(&a);
  a.layer = 1;
  a.batch = 2;
  a.q_heads = 4;
  a.q_dtype = KVC_DTYPE_F32;
  a.query = q;
  a.out = out;
  a.seq_lens = seq_lens;
  a.block_table = table;
  a.table_stride = 3;
  a.max_seq_len = 8;
  a.softmax_scale = 1.0f;
  uint64_t ws = 1;
  OK(kvc_decode_workspace_size(cache, &a, &ws));
  assert_int_equal(ws, 0);
  OK(kvc_decode_attention(cache, &a, NULL));
  /* seq 0 head 0: softmax over scores 0..5 of V = t + 1. */
  double num = 0, den = 0;
  for (int t = 0; t < 6; ++t) {
    num += series_exp((double)t) * (t + 1);
    den += series_exp((double)t);
  }
  assert_float_equal(out[0], num / den, 1e-4);
  assert_float_equal(out[63], num / den, 1e-4);
  /* seq 0 head 1: zero query -> uniform mean of 1..6 = 3.5; heads 2, 3
   * (kv head 1) -> 35. */
  assert_float_equal(out[1 * 64 + 7], 3.5, 1e-5);
  assert_float_equal(out[2 * 64], 35.0, 1e-4);
  assert_float_equal(out[3 * 64 + 63], 35.0, 1e-4);
  /* seq 1: one token -> its V exactly. */
  for (int i = 4 * 64; i < 8 * 64; ++i) assert_true(out[i] == -3.0f);

  /* Window 2: seq 0 attends to tokens 4, 5 only; the table's first block
   * is not read, so -1 there is fine. */
  const int32_t table_w[2 * 3] = {-1, 2, -1, 5, -1, -1};
  a.block_table = table_w;
  a.window = 2;
  OK(kvc_decode_attention(cache, &a, NULL));
  const double w_out = (series_exp(4.0) * 5 + series_exp(5.0) * 6) / (series_exp(4.0) + series_exp(5.0));
  assert_float_equal(out[0], w_out, 1e-4);
  assert_float_equal(out[64], 5.5, 1e-5);

  /* The same through a CSR table. */
  const int32_t indices[3] = {7, 2, 5};
  const int32_t indptr[3] = {0, 2, 3};
  a.window = 0;
  a.table_format = KVC_TABLE_CSR;
  a.block_table = indices;
  a.indptr = indptr;
  a.table_stride = 0;
  for (int i = 0; i < 2 * 4 * 64; ++i) out[i] = NAN;
  OK(kvc_decode_attention(cache, &a, NULL));
  assert_float_equal(out[0], num / den, 1e-4);
  assert_float_equal(out[2 * 64], 35.0, 1e-4);
  assert_true(out[7 * 64 + 5] == -3.0f);

  /* Length 0 gives zeros. */
  const int32_t zero_lens[2] = {0, 1};
  a.seq_lens = zero_lens;
  OK(kvc_decode_attention(cache, &a, NULL));
  for (int i = 0; i < 4 * 64; ++i) assert_true(out[i] == 0.0f);
  kvc_cache_destroy(cache);
}

static void test_decode_errors(void **state) {
  (void)state;
  shape_t s = small_shape(KVC_DTYPE_BF16, KVC_LAYOUT_NHD);
  kvc_cache_t *cache = make_cache(s);
  kvc_pool_desc_t pool = pool_of(cache, 0);
  uint16_t q[2 * 4 * 64], out[2 * 4 * 64];
  memset(q, 0, sizeof q);
  const int32_t lens[2] = {20, 3};
  int32_t table[2 * 2] = {0, 1, 2, -1};
  kvc_decode_args_t a = KVC_DECODE_ARGS_INIT;
  a.batch = 2;
  a.q_heads = 4;
  a.q_dtype = KVC_DTYPE_BF16;
  a.query = q;
  a.out = out;
  a.seq_lens = lens;
  a.block_table = table;
  a.table_stride = 2;
  a.max_seq_len = 32;
  OK(kvc_decode_attention(cache, &a, NULL));

  kvc_decode_args_t b = a;
  assert_fails(kvc_decode_attention(NULL, &a, NULL), KVC_ERR_INVALID_ARGUMENT, "cache must not be NULL");
  assert_fails(kvc_decode_attention(cache, NULL, NULL), KVC_ERR_INVALID_ARGUMENT, "args must not be NULL");
  b.q_heads = 3;
  assert_fails(kvc_decode_attention(cache, &b, NULL), KVC_ERR_INVALID_ARGUMENT,
               "q_heads must be a positive multiple of the layer's kv_heads (2), got 3");
  b = a;
  b.q_dtype = KVC_DTYPE_F16;
  assert_fails(kvc_decode_attention(cache, &b, NULL), KVC_ERR_INVALID_ARGUMENT,
               "q_dtype f16 does not fit a bf16 cache");
  b = a;
  b.table_format = 7;
  assert_fails(kvc_decode_attention(cache, &b, NULL), KVC_ERR_INVALID_ARGUMENT,
               "table_format must be KVC_TABLE_PADDED (1) or KVC_TABLE_CSR (2), got 7");
  b = a;
  b.query = NULL;
  assert_fails(kvc_decode_attention(cache, &b, NULL), KVC_ERR_INVALID_ARGUMENT, "query must not be NULL");
  b = a;
  b.out = NULL;
  assert_fails(kvc_decode_attention(cache, &b, NULL), KVC_ERR_INVALID_ARGUMENT, "out must not be NULL");
  b = a;
  b.seq_lens = NULL;
  assert_fails(kvc_decode_attention(cache, &b, NULL), KVC_ERR_INVALID_ARGUMENT, "seq_lens must not be NULL");
  b = a;
  b.block_table = NULL;
  assert_fails(kvc_decode_attention(cache, &b, NULL), KVC_ERR_INVALID_ARGUMENT, "block_table must not be NULL");
  b = a;
  b.max_seq_len = 0;
  assert_fails(kvc_decode_attention(cache, &b, NULL), KVC_ERR_INVALID_ARGUMENT, "max_seq_len must be > 0");
  b = a;
  b.max_seq_len = 33;
  assert_fails(kvc_decode_attention(cache, &b, NULL), KVC_ERR_INVALID_ARGUMENT,
               "table_stride (2) is less than the 3 blocks that max_seq_len 33 spans at 16 tokens per block");
  b = a;
  b.max_seq_len = 10;
  assert_fails(kvc_decode_attention(cache, &b, NULL), KVC_ERR_INVALID_ARGUMENT,
               "seq_lens[0] = 20 is outside [0, max_seq_len 10]");
  b = a;
  table[1] = (int32_t)pool.num_blocks;
  char want[128];
  snprintf(want, sizeof want, "block table entry 1 of sequence 0 is %d, outside [0, %d)",
           (int)pool.num_blocks, (int)pool.num_blocks);
  assert_fails(kvc_decode_attention(cache, &b, NULL), KVC_ERR_INVALID_ARGUMENT, want);
  table[1] = 1;
  b = a;
  b.softmax_scale = (float)NAN;
  assert_fails(kvc_decode_attention(cache, &b, NULL), KVC_ERR_INVALID_ARGUMENT, "softmax_scale must be finite");
  b = a;
  b.indptr = lens;
  assert_fails(kvc_decode_attention(cache, &b, NULL), KVC_ERR_INVALID_ARGUMENT, "indptr must be NULL for KVC_TABLE_PADDED");

  /* CSR */
  const int32_t indices[3] = {0, 1, 2};
  int32_t indptr[3] = {0, 1, 3};
  b = a;
  b.table_format = KVC_TABLE_CSR;
  b.block_table = indices;
  b.indptr = NULL;
  b.table_stride = 0;
  assert_fails(kvc_decode_attention(cache, &b, NULL), KVC_ERR_INVALID_ARGUMENT, "indptr must not be NULL");
  b.indptr = indptr;
  assert_fails(kvc_decode_attention(cache, &b, NULL), KVC_ERR_INVALID_ARGUMENT,
               "indptr[0..] = [0, 1) holds fewer than the 2 blocks seq_lens[0] = 20 spans");
  indptr[1] = 2;
  OK(kvc_decode_attention(cache, &b, NULL));
  b.table_stride = 4;
  assert_fails(kvc_decode_attention(cache, &b, NULL), KVC_ERR_INVALID_ARGUMENT, "table_stride must be 0 for KVC_TABLE_CSR");
  indptr[0] = 1;
  b.table_stride = 0;
  assert_fails(kvc_decode_attention(cache, &b, NULL), KVC_ERR_INVALID_ARGUMENT, "indptr[0] must be 0, got 1");

  /* Workspace: a CPU cache needs none; a non-zero size with NULL is wrong. */
  b = a;
  b.workspace_bytes = 16;
  assert_fails(kvc_decode_attention(cache, &b, NULL), KVC_ERR_INVALID_ARGUMENT, "workspace is NULL but workspace_bytes is 16");
  uint64_t ws = 99;
  assert_fails(kvc_decode_workspace_size(cache, &a, NULL), KVC_ERR_INVALID_ARGUMENT, "bytes must not be NULL");
  OK(kvc_decode_workspace_size(cache, &a, &ws));
  assert_int_equal(ws, 0);
  kvc_cache_destroy(cache);

  /* Unsupported head dim. */
  s.head_dim = 96;
  cache = make_cache(s);
  assert_fails(kvc_decode_attention(cache, &a, NULL), KVC_ERR_UNSUPPORTED,
               "decode attention supports head_dim 64, 128 or 256; layer 0 has head_dim 96");
  kvc_cache_destroy(cache);

  /* fp8 cache: f16/bf16 queries, positive scales. */
  s = small_shape(KVC_DTYPE_FP8_E4M3, KVC_LAYOUT_NHD);
  cache = make_cache(s);
  OK(kvc_decode_attention(cache, &a, NULL));
  b = a;
  b.q_dtype = KVC_DTYPE_F32;
  assert_fails(kvc_decode_attention(cache, &b, NULL), KVC_ERR_INVALID_ARGUMENT,
               "q_dtype f32 does not fit a fp8_e4m3 cache");
  b = a;
  b.k_scale = -1.0f;
  assert_fails(kvc_decode_attention(cache, &b, NULL), KVC_ERR_INVALID_ARGUMENT, "k_scale must be finite and > 0");
  kvc_cache_destroy(cache);
}

static void test_async_error_on_cpu(void **state) {
  (void)state;
  kvc_cache_t *cache = make_cache(small_shape(KVC_DTYPE_F16, KVC_LAYOUT_NHD));
  kvc_status_t s = -1;
  assert_fails(kvc_cache_get_async_error(NULL, NULL, &s), KVC_ERR_INVALID_ARGUMENT, "cache must not be NULL");
  assert_fails(kvc_cache_get_async_error(cache, NULL, NULL), KVC_ERR_INVALID_ARGUMENT, "async_error must not be NULL");
  OK(kvc_cache_get_async_error(cache, NULL, &s));
  assert_int_equal(s, KVC_OK);
  kvc_cache_destroy(cache);
}

static void test_init_functions(void **state) {
  (void)state;
  kvc_store_args_init(NULL);
  kvc_decode_args_init(NULL);
  kvc_decode_args_t a;
  memset(&a, 0xff, sizeof a);
  kvc_decode_args_init(&a);
  const kvc_decode_args_t b = KVC_DECODE_ARGS_INIT;
  assert_int_equal(a.struct_size, sizeof(kvc_decode_args_t));
  assert_int_equal(a.table_format, KVC_TABLE_PADDED);
  assert_true(a.k_scale == 1.0f && a.v_scale == 1.0f && a.softmax_scale == 0.0f);
  assert_null(a.query);
  assert_memory_equal(&a.layer, &b.layer, offsetof(kvc_decode_args_t, query) - offsetof(kvc_decode_args_t, layer));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_store_every_dtype_and_layout),
      cmocka_unit_test(test_store_kv_factor_1_and_odd_shapes),
      cmocka_unit_test(test_store_fp8_quantizes),
      cmocka_unit_test(test_store_errors),
      cmocka_unit_test(test_copy_blocks),
      cmocka_unit_test(test_copy_blocks_errors),
      cmocka_unit_test(test_decode_reference_values),
      cmocka_unit_test(test_decode_errors),
      cmocka_unit_test(test_async_error_on_cpu),
      cmocka_unit_test(test_init_functions),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
