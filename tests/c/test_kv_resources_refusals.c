/* C API of the paged KV resources (kv_resource.h): what is refused. The
 * global shape setters and KV resources exclude each other; bad input to
 * kvc_config_add_kv_resource (each field, overlapping and missing layers)
 * is refused with a precise message and nothing changed; a cache whose KV
 * resources differ in geometry refuses several ranks, a disk cache, block
 * export and the stateful mode, where one of a single geometry takes them.
 * Black box: only the public header. */
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

static void global_setters_and_resources_exclusive(void **state) {
  (void)state;
  kvc_config_t *c = NULL;
  ok(kvc_config_create(&c));
  ok(kvc_config_set_head_dim(c, 64));
  kvc_kv_resource_t r = KVC_KV_RESOURCE_INIT;
  const uint32_t layers[2] = {0, 1};
  r.layers = layers;
  r.num_layers = 2;
  r.kv_heads = 2;
  r.head_dim = 64;
  uint32_t index = 77;
  assert_fails(kvc_config_add_kv_resource(c, &r, &index), KVC_ERR_INVALID_STATE,
               "kvc_config_set_head_dim");
  assert_int_equal(index, 77);
  kvc_config_destroy(c);

  ok(kvc_config_create(&c));
  ok(kvc_config_add_kv_resource(c, &r, &index));
  assert_int_equal(index, 0);
  assert_fails(kvc_config_set_num_layers(c, 4), KVC_ERR_INVALID_STATE,
               "kvc_config_set_num_layers is refused: the config has 1 KV resources");
  assert_fails(kvc_config_set_dtype(c, KVC_DTYPE_F16), KVC_ERR_INVALID_STATE, "set_dtype");
  assert_fails(kvc_config_set_kv_heads(c, 4), KVC_ERR_INVALID_STATE, "set_kv_heads");
  const uint32_t w[1] = {8};
  assert_fails(kvc_config_set_attention_windows(c, w, 1), KVC_ERR_INVALID_STATE, "windows");
  kvc_dtype_t dt = 0;
  ok(kvc_config_get_dtype(c, &dt));
  assert_int_equal(dt, KVC_DTYPE_BF16);
  uint32_t v = 0;
  ok(kvc_config_get_num_layers(c, &v));
  assert_int_equal(v, 2);
  ok(kvc_config_validate(c));
  kvc_config_destroy(c);
}

static void bad_input(void **state) {
  (void)state;
  kvc_config_t *c = NULL;
  ok(kvc_config_create(&c));
  const uint32_t layers[3] = {0, 2, 2}, dec[2] = {3, 1}, big[1] = {70000};
  kvc_kv_resource_t r = KVC_KV_RESOURCE_INIT;
  r.layers = layers;
  r.num_layers = 2;
  r.kv_heads = 2;
  r.head_dim = 64;
  uint32_t index = 77;
  assert_fails(kvc_config_add_kv_resource(NULL, &r, &index), KVC_ERR_INVALID_ARGUMENT, "config");
  assert_fails(kvc_config_add_kv_resource(c, NULL, &index), KVC_ERR_INVALID_ARGUMENT, "desc");
  assert_fails(kvc_config_add_kv_resource(c, &r, NULL), KVC_ERR_INVALID_ARGUMENT, "index");
  kvc_kv_resource_t x = r;
  x.struct_size = 0;
  assert_fails(kvc_config_add_kv_resource(c, &x, &index), KVC_ERR_INVALID_ARGUMENT, "struct_size");
  x = r;
  x.num_layers = 0;
  assert_fails(kvc_config_add_kv_resource(c, &x, &index), KVC_ERR_INVALID_ARGUMENT,
               "desc->num_layers must be > 0, got 0");
  x = r;
  x.layers = NULL;
  assert_fails(kvc_config_add_kv_resource(c, &x, &index), KVC_ERR_INVALID_ARGUMENT, "desc->layers");
  x = r;
  x.kv_heads = 0;
  assert_fails(kvc_config_add_kv_resource(c, &x, &index), KVC_ERR_INVALID_ARGUMENT,
               "desc->kv_heads must be in 1..4096, got 0");
  x = r;
  x.head_dim = 0;
  assert_fails(kvc_config_add_kv_resource(c, &x, &index), KVC_ERR_INVALID_ARGUMENT,
               "desc->head_dim must be > 0, got 0");
  x = r;
  x.dtype = 9;
  assert_fails(kvc_config_add_kv_resource(c, &x, &index), KVC_ERR_INVALID_ARGUMENT, "got 9");
  x = r;
  x.kv_factor = 3;
  assert_fails(kvc_config_add_kv_resource(c, &x, &index), KVC_ERR_INVALID_ARGUMENT,
               "kv_factor must be 1 or 2, got 3");
  x = r;
  x.layout = 0;
  assert_fails(kvc_config_add_kv_resource(c, &x, &index), KVC_ERR_INVALID_ARGUMENT, "layout");
  x = r;
  x.window = (1u << 30) + 1;
  assert_fails(kvc_config_add_kv_resource(c, &x, &index), KVC_ERR_INVALID_ARGUMENT,
               "desc->window must be <= 2^30 tokens (0 = full attention), got 1073741825");
  x = r;
  x.num_layers = 3;
  assert_fails(kvc_config_add_kv_resource(c, &x, &index), KVC_ERR_INVALID_ARGUMENT,
               "layers[1] is 2, layers[2] is 2");
  x = r;
  x.layers = dec;
  assert_fails(kvc_config_add_kv_resource(c, &x, &index), KVC_ERR_INVALID_ARGUMENT, "ascending");
  x = r;
  x.layers = big;
  x.num_layers = 1;
  assert_fails(kvc_config_add_kv_resource(c, &x, &index), KVC_ERR_INVALID_ARGUMENT, "70000");
  assert_int_equal(index, 77);
  /* Nothing changed: the config still has no attention shape. */
  uint32_t v = 9;
  ok(kvc_config_get_num_layers(c, &v));
  assert_int_equal(v, 0);
  ok(kvc_config_add_kv_resource(c, &r, &index));  /* layers 0 and 2 */
  assert_int_equal(index, 0);
  const uint32_t overlap[2] = {1, 2};
  x = r;
  x.layers = overlap;
  assert_fails(kvc_config_add_kv_resource(c, &x, &index), KVC_ERR_INVALID_ARGUMENT,
               "desc->layers[1] is layer 2, which KV resource 0 already has");
  ok(kvc_config_get_num_layers(c, &v));
  assert_int_equal(v, 3);
  /* Layer 1 is in no resource. */
  assert_fails(kvc_config_validate(c), KVC_ERR_INVALID_ARGUMENT, "layer 1 is in no KV resource");
  kvc_cache_t *cache = NULL;
  assert_fails(kvc_cache_create(c, &cache), KVC_ERR_INVALID_ARGUMENT, "layer 1 is in no KV resource");
  const uint32_t one[1] = {1};
  x = r;
  x.layers = one;
  x.num_layers = 1;
  x.dtype = KVC_DTYPE_F16;
  ok(kvc_config_add_kv_resource(c, &x, &index));
  assert_int_equal(index, 1);
  ok(kvc_config_validate(c));
  kvc_config_destroy(c);
}

/* What mixed geometries do not support yet is refused; one class is not. */
static void mixed_refusals(void **state) {
  (void)state;
  const uint32_t l0[1] = {0}, l1[1] = {1};
  for (int mixed = 0; mixed < 2; ++mixed) {
    kvc_config_t *c = NULL;
    ok(kvc_config_create(&c));
    add_kv(c, l0, 1, 2, 64, KVC_DTYPE_BF16, 2, KVC_LAYOUT_NHD, 0);
    add_kv(c, l1, 1, 2, 64, mixed ? KVC_DTYPE_F16 : KVC_DTYPE_BF16, 2, KVC_LAYOUT_NHD, 0);
    ok(kvc_config_set_max_tokens(c, 64));
    const int32_t ords[2] = {0, 1};
    ok(kvc_config_set_ranks(c, KVC_DEVICE_CPU, ords, 2));
    if (mixed)
      assert_fails(kvc_config_validate(c), KVC_ERR_INVALID_ARGUMENT,
                   "KV resources of different geometries (head_dim, dtype, kv_factor, layout) are "
                   "not supported with 2 ranks");
    else
      ok(kvc_config_validate(c));
    ok(kvc_config_set_ranks(c, KVC_DEVICE_CPU, ords, 1));
    ok(kvc_config_set_disk_cache(c, "/tmp/kvc-kv-resources-never-created", 1 << 20));
    if (mixed)
      assert_fails(kvc_config_validate(c), KVC_ERR_INVALID_ARGUMENT,
                   "a disk or remote cache is not supported with KV resources of different");
    ok(kvc_config_set_disk_cache(c, NULL, 0));
    kvc_cache_t *cache = NULL;
    ok(kvc_cache_create(c, &cache));
    int32_t tokens[32];
    for (int i = 0; i < 32; ++i) tokens[i] = i + 1;
    ok(kvc_sequence_add(cache, 1, tokens, 32, NULL, NULL, NULL));
    ok(kvc_sequence_commit(cache, 1, 32));
    kvc_export_t *ex = NULL;
    const kvc_status_t st = kvc_cache_export_sequence(cache, 1, 32, &ex);
    if (st != (mixed ? KVC_ERR_UNSUPPORTED : KVC_OK)) fail_msg("%s", kvc_last_error_message());
    if (mixed) {
      assert_int_equal(st, KVC_ERR_UNSUPPORTED);
      assert_non_null(strstr(kvc_last_error_message(), "block export from a cache with KV resources"));
    } else {
      ok(st);
      kvc_export_release(ex);
    }
    kvc_cache_destroy(cache);
    kvc_stateful_t *sf = NULL;
    kvc_stateful_options_t so = KVC_STATEFUL_OPTIONS_INIT;
    so.batch = 1;
    const kvc_status_t ss = kvc_stateful_create(c, &so, &sf);
    if (mixed) {
      if (ss != KVC_ERR_UNSUPPORTED) fail_msg("%s", kvc_last_error_message());
      assert_non_null(strstr(kvc_last_error_message(), "stateful mode has one geometry"));
    } else if (ss == KVC_OK) {
      kvc_stateful_destroy(sf);
    }
    kvc_config_destroy(c);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(global_setters_and_resources_exclusive),
      cmocka_unit_test(bad_input),
      cmocka_unit_test(mixed_refusals),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
