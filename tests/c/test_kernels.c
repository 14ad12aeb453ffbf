/* C API kernels on a CPU cache: store K/V checked byte for byte against an
 * independent model of the block layout (every dtype, NHD and HND, slot -1,
 * kv_factor 1, fp8 quantization), batched block copies, and every argument
 * error with its message. Decode attention: test_decode_cpu.c. Black box:
 * only the public header. */
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

#include "kernel_test_cache.h"
#include "kvc_test_assert.h"

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
      cmocka_unit_test(test_async_error_on_cpu),
      cmocka_unit_test(test_init_functions),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
