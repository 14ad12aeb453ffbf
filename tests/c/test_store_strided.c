/* kvc_store_kv_strided on a CPU cache: K/V read through element strides
 * (a [batch][kv_heads][n][head_dim] view with padding, a transposed
 * projection, reversed tokens, broadcast heads) must leave the pool byte
 * for byte as kvc_store_kv leaves it from the contiguous copy of the same
 * values; every argument error names its argument and changes nothing.
 * Black box: only the public header. */
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
  uint32_t kv_heads;
  uint32_t head_dim;
} shape_t;

static kvc_cache_t *make_cache(shape_t s) {
  kvc_config_t *c = NULL;
  OK(kvc_config_create(&c));
  OK(kvc_config_set_num_layers(c, 2));
  OK(kvc_config_set_kv_heads(c, s.kv_heads));
  OK(kvc_config_set_head_dim(c, s.head_dim));
  OK(kvc_config_set_dtype(c, s.dtype));
  OK(kvc_config_set_layout(c, s.layout));
  OK(kvc_config_set_kv_factor(c, s.kv_factor));
  OK(kvc_config_set_tokens_per_block(c, 8));
  OK(kvc_config_set_max_tokens(c, 128));
  kvc_cache_t *cache = NULL;
  OK(kvc_cache_create(c, &cache));
  kvc_config_destroy(c);
  return cache;
}

static size_t elem_size(kvc_dtype_t d) {
  return d == KVC_DTYPE_F32 ? 4 : d == KVC_DTYPE_FP8_E4M3 ? 1 : 2;
}

static uint32_t rng_state = 777u;
static uint32_t rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 17;
  rng_state ^= rng_state << 5;
  return rng_state;
}

/* Random elements; for float sources small finite values (fp8 quantizes). */
static void fill(void *p, size_t n, kvc_dtype_t d) {
  unsigned char *b = p;
  for (size_t i = 0; i < n; ++i) {
    if (d == KVC_DTYPE_F16) {
      const uint16_t h = (uint16_t)(0x3800u | (rnd() & 0x83ffu)); /* |x| in [0.5, 1) */
      memcpy(b + 2 * i, &h, 2);
    } else if (d == KVC_DTYPE_BF16 || d == KVC_DTYPE_F32 || d == KVC_DTYPE_FP8_E4M3) {
      for (size_t j = 0; j < elem_size(d); ++j) b[elem_size(d) * i + j] = (unsigned char)rnd();
    }
  }
}

static kvc_pool_desc_t pool_of(kvc_cache_t *cache) {
  kvc_pool_desc_t d;
  kvc_pool_desc_init(&d);
  OK(kvc_cache_describe_pool(cache, 0, &d));
  return d;
}

/* The source of one test: `batch` sequences of `n` tokens, addressed by
 * element strides (seq, token, head) from an origin inside `buf`. */
typedef struct source {
  unsigned char *buf;
  int64_t origin;     /* element index of (0, 0, 0) */
  int64_t stride[3];  /* seq, token, head */
} source_t;

/* Gathers the source into contiguous [batch * n][heads][dim]. */
static void gather(const source_t *src, shape_t s, size_t es, uint32_t batch, uint32_t n,
                   unsigned char *out) {
  for (uint32_t b = 0; b < batch; ++b)
    for (uint32_t t = 0; t < n; ++t)
      for (uint32_t h = 0; h < s.kv_heads; ++h) {
        const int64_t e = src->origin + b * src->stride[0] + t * src->stride[1] + h * src->stride[2];
        memcpy(out + (((size_t)(b * n + t) * s.kv_heads + h) * s.head_dim) * es,
               src->buf + e * (int64_t)es, s.head_dim * es);
      }
}

/* Stores through strides into one cache and the gathered copy through
 * kvc_store_kv into another; the pools must be equal byte for byte. */
static void check_strided(shape_t s, kvc_dtype_t src_dtype, uint32_t batch, uint32_t n,
                          const source_t *key, const source_t *value, uint32_t seq_len_arg) {
  kvc_cache_t *strided = make_cache(s), *plain = make_cache(s);
  kvc_pool_desc_t ps = pool_of(strided), pp = pool_of(plain);
  memset(ps.base, 0xA5, ps.bytes);
  memset(pp.base, 0xA5, pp.bytes);
  const uint32_t total = batch * n;
  const uint64_t slots = ps.num_blocks * 8;
  int64_t *slot_mapping = malloc(total * sizeof(int64_t));
  for (uint32_t i = 0; i < total; ++i)
    slot_mapping[i] = (i % 6 == 5) ? -1 : (int64_t)((i * 29u + 3u) % slots);

  const size_t es = elem_size(src_dtype);
  const size_t bytes = (size_t)total * s.kv_heads * s.head_dim * es;
  unsigned char *ck = malloc(bytes), *cv = malloc(bytes);
  gather(key, s, es, batch, n, ck);
  if (value != NULL) gather(value, s, es, batch, n, cv);

  kvc_store_args_t a = KVC_STORE_ARGS_INIT;
  a.layer = 1;
  a.num_tokens = total;
  a.src_dtype = src_dtype;
  a.k_scale = 0.5f;
  a.v_scale = 2.0f;
  a.slot_mapping = slot_mapping;
  a.key = ck;
  a.value = value != NULL ? cv : NULL;
  OK(kvc_store_kv(plain, &a, NULL));

  kvc_store_strides_t st;
  kvc_store_strides_init(&st);
  st.seq_len = seq_len_arg;
  st.key_seq_stride = key->stride[0];
  st.key_token_stride = key->stride[1];
  st.key_head_stride = key->stride[2];
  if (value != NULL) {
    st.value_seq_stride = value->stride[0];
    st.value_token_stride = value->stride[1];
    st.value_head_stride = value->stride[2];
  }
  a.key = key->buf + key->origin * (int64_t)es;
  a.value = value != NULL ? value->buf + value->origin * (int64_t)es : NULL;
  OK(kvc_store_kv_strided(strided, &a, &st, NULL));
  assert_memory_equal(ps.base, pp.base, ps.bytes);

  free(ck);
  free(cv);
  free(slot_mapping);
  kvc_cache_destroy(strided);
  kvc_cache_destroy(plain);
}

/* [batch][heads][n_alloc][dim] buffers viewed as [batch][heads][n][dim]
 * starting at token 2 (a slice of a longer buffer, as a model's cache
 * tensor sliced to this step's tokens). */
static void check_bhnd(shape_t s, kvc_dtype_t src_dtype) {
  const uint32_t batch = 3, n = 5, n_alloc = 9;
  const size_t es = elem_size(src_dtype);
  const size_t elems = (size_t)batch * s.kv_heads * n_alloc * s.head_dim;
  source_t k = {malloc(elems * es), 2 * (int64_t)s.head_dim,
                {(int64_t)s.kv_heads * n_alloc * s.head_dim, s.head_dim, (int64_t)n_alloc * s.head_dim}};
  source_t v = k;
  v.buf = malloc(elems * es);
  fill(k.buf, elems, src_dtype);
  fill(v.buf, elems, src_dtype);
  check_strided(s, src_dtype, batch, n, &k, s.kv_factor == 2 ? &v : NULL, n);
  free(k.buf);
  free(v.buf);
}

static void test_batch_heads_tokens_dim_view(void **state) {
  (void)state;
  const kvc_dtype_t dtypes[] = {KVC_DTYPE_F32, KVC_DTYPE_F16, KVC_DTYPE_BF16, KVC_DTYPE_FP8_E4M3};
  const kvc_layout_t layouts[] = {KVC_LAYOUT_NHD, KVC_LAYOUT_HND};
  for (int d = 0; d < 4; ++d)
    for (int l = 0; l < 2; ++l) {
      shape_t s = {dtypes[d], layouts[l], 2, 2, 64};
      check_bhnd(s, dtypes[d]);
    }
  /* fp8 quantized from f16 and bf16 on the way; kv_factor 1; odd dims. */
  shape_t q = {KVC_DTYPE_FP8_E4M3, KVC_LAYOUT_NHD, 2, 3, 40};
  check_bhnd(q, KVC_DTYPE_F16);
  q.layout = KVC_LAYOUT_HND;
  check_bhnd(q, KVC_DTYPE_BF16);
  shape_t one = {KVC_DTYPE_BF16, KVC_LAYOUT_HND, 1, 2, 64};
  check_bhnd(one, KVC_DTYPE_BF16);
}

/* A transposed projection ([n][heads][dim] rows of a wider fused QKV
 * buffer), reversed tokens (a negative stride) and one head read for every
 * kv head (a zero stride), in one sequence (seq_len 0). */
static void test_other_strides(void **state) {
  (void)state;
  shape_t s = {KVC_DTYPE_BF16, KVC_LAYOUT_NHD, 2, 2, 64};
  const uint32_t n = 7, row = 6 * 64; /* q (4 heads) + k + v... as a fused row */
  unsigned char *buf = malloc((size_t)n * row * 2);
  fill(buf, (size_t)n * row, KVC_DTYPE_BF16);
  source_t k = {buf, 0, {0, row, 64}};
  source_t v = {buf, 2 * 64, {0, row, 64}};
  check_strided(s, KVC_DTYPE_BF16, 1, n, &k, &v, 0);
  source_t rk = {buf, (int64_t)(n - 1) * row, {0, -(int64_t)row, 64}};
  source_t bv = {buf, 64, {0, row, 0}};
  check_strided(s, KVC_DTYPE_BF16, 1, n, &rk, &bv, 0);
  free(buf);
}

static void test_errors_change_nothing(void **state) {
  (void)state;
  shape_t s = {KVC_DTYPE_BF16, KVC_LAYOUT_NHD, 2, 2, 64};
  kvc_cache_t *cache = make_cache(s);
  kvc_pool_desc_t pool = pool_of(cache);
  memset(pool.base, 0x5A, pool.bytes);
  uint16_t key[4 * 2 * 64] = {0}, value[4 * 2 * 64] = {0};
  int64_t slots[4] = {1, 2, 3, 4};
  kvc_store_args_t a = KVC_STORE_ARGS_INIT;
  a.num_tokens = 4;
  a.src_dtype = KVC_DTYPE_BF16;
  a.key = key;
  a.value = value;
  a.slot_mapping = slots;
  kvc_store_strides_t st = KVC_STORE_STRIDES_INIT;
  assert_int_equal(st.struct_size, sizeof(kvc_store_strides_t));
  kvc_store_strides_t init;
  memset(&init, 0xff, sizeof init);
  kvc_store_strides_init(&init);
  assert_memory_equal(&init, &st, sizeof st);
  kvc_store_strides_init(NULL);
  st.seq_len = 4;
  st.key_token_stride = st.value_token_stride = 128;
  st.key_head_stride = st.value_head_stride = 64;

  assert_fails(kvc_store_kv_strided(NULL, &a, &st, NULL), KVC_ERR_INVALID_ARGUMENT, "cache must not be NULL");
  assert_fails(kvc_store_kv_strided(cache, NULL, &st, NULL), KVC_ERR_INVALID_ARGUMENT, "args must not be NULL");
  assert_fails(kvc_store_kv_strided(cache, &a, NULL, NULL), KVC_ERR_INVALID_ARGUMENT, "strides must not be NULL");
  kvc_store_strides_t b = st;
  b.struct_size = 0;
  assert_fails(kvc_store_kv_strided(cache, &a, &b, NULL), KVC_ERR_INVALID_ARGUMENT,
               "strides->struct_size must be set");
  b = st;
  b.seq_len = 3;
  assert_fails(kvc_store_kv_strided(cache, &a, &b, NULL), KVC_ERR_INVALID_ARGUMENT,
               "num_tokens (4) must be a multiple of strides->seq_len (3)");
  kvc_store_args_t c = a;
  c.src_dtype = KVC_DTYPE_F16;
  assert_fails(kvc_store_kv_strided(cache, &c, &st, NULL), KVC_ERR_INVALID_ARGUMENT,
               "src_dtype f16 cannot be stored in a bf16 cache");
  int64_t bad[4] = {1, 2, 3, (int64_t)(pool.num_blocks * 8)};
  c = a;
  c.slot_mapping = bad;
  assert_fails(kvc_store_kv_strided(cache, &c, &st, NULL), KVC_ERR_INVALID_ARGUMENT,
               "slot_mapping[3] =");
  for (uint64_t i = 0; i < pool.bytes; ++i)
    if (((unsigned char *)pool.base)[i] != 0x5A) fail_msg("byte %llu written by a failed call", (unsigned long long)i);
  /* Zero tokens: a no-op with any seq_len. */
  c = a;
  c.num_tokens = 0;
  OK(kvc_store_kv_strided(cache, &c, &st, NULL));
  OK(kvc_store_kv_strided(cache, &a, &st, NULL));
  kvc_cache_destroy(cache);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_batch_heads_tokens_dim_view),
      cmocka_unit_test(test_other_strides),
      cmocka_unit_test(test_errors_change_nothing),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
