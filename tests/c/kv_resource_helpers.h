/* Helpers shared by the KV resource suites (test_kv_resources*.c). Include
 * after <cmocka.h>. */
#ifndef KVC_TEST_KV_RESOURCE_HELPERS_H
#define KVC_TEST_KV_RESOURCE_HELPERS_H

#include <kvcache/kvcache.h>

/* Adds a paged KV resource over `layers`; fails the test on an error.
 * Returns the resource's index. */
static inline uint32_t add_kv(kvc_config_t *c, const uint32_t *layers, uint32_t n,
                              uint32_t heads, uint32_t dim, kvc_dtype_t dtype, uint32_t kvf,
                              kvc_layout_t layout, uint32_t window) {
  kvc_kv_resource_t r;
  kvc_kv_resource_init(&r);
  r.layers = layers;
  r.num_layers = n;
  r.kv_heads = heads;
  r.head_dim = dim;
  r.dtype = dtype;
  r.kv_factor = kvf;
  r.layout = layout;
  r.window = window;
  uint32_t index = 99;
  assert_int_equal(kvc_config_add_kv_resource(c, &r, &index), KVC_OK);
  return index;
}

#endif
