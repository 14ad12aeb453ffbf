/* What the kernel suites on a CPU cache share: a small model shape and the
 * cache made from it, and a pool's description. */
#ifndef KVC_TESTS_C_KERNEL_TEST_CACHE_H
#define KVC_TESTS_C_KERNEL_TEST_CACHE_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <kvcache/kvcache.h>

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

static inline shape_t small_shape(kvc_dtype_t dtype, kvc_layout_t layout) {
  shape_t s = {dtype, layout, 2, 3, 2, 64, 16, 128};
  return s;
}

static inline kvc_cache_t *make_cache(shape_t s) {
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

static inline kvc_pool_desc_t pool_of(kvc_cache_t *cache, uint32_t pool) {
  kvc_pool_desc_t d;
  kvc_pool_desc_init(&d);
  OK(kvc_cache_describe_pool(cache, pool, &d));
  return d;
}

#endif
