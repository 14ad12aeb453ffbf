/* C API foundation: versions, features, status strings, the config object
 * and every validation error with its message, cache create/describe/destroy,
 * NULL handling. Black box: only the public header. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <kvcache/kvcache.h>

#include "kvc_test_assert.h"


static kvc_config_t *llama8b(void) {
  kvc_config_t *c = NULL;
  assert_int_equal(kvc_config_create(&c), KVC_OK);
  assert_int_equal(kvc_config_set_num_layers(c, 32), KVC_OK);
  assert_int_equal(kvc_config_set_kv_heads(c, 8), KVC_OK);
  assert_int_equal(kvc_config_set_head_dim(c, 128), KVC_OK);
  assert_int_equal(kvc_config_set_dtype(c, KVC_DTYPE_BF16), KVC_OK);
  assert_int_equal(kvc_config_set_tokens_per_block(c, 16), KVC_OK);
  assert_int_equal(kvc_config_set_primary_bytes(c, 2ull << 30), KVC_OK);
  return c;
}

static void test_versions(void **state) {
  (void)state;
  assert_int_equal(kvc_version(), KVC_VERSION_NUMBER);
  assert_string_equal(kvc_version_string(), KVC_VERSION_STRING);
  assert_int_equal(kvc_abi_version(), KVC_ABI_VERSION);
  assert_int_equal(KVC_VERSION_NUMBER,
                   KVC_VERSION_MAJOR * 10000 + KVC_VERSION_MINOR * 100 + KVC_VERSION_PATCH);
  const uint64_t f = kvc_features();
  /* A device can only be present when the backend is compiled. */
  if (f & KVC_FEATURE_CUDA_DEVICE) assert_true(f & KVC_FEATURE_CUDA_COMPILED);
  assert_int_equal(
      f & ~(uint64_t)(KVC_FEATURE_CUDA_COMPILED | KVC_FEATURE_CUDA_DEVICE | KVC_FEATURE_REDIS), 0);
}

static void test_status_strings(void **state) {
  (void)state;
  assert_string_equal(kvc_status_string(KVC_OK), "KVC_OK");
  assert_string_equal(kvc_status_string(KVC_ERR_INVALID_ARGUMENT), "KVC_ERR_INVALID_ARGUMENT");
  assert_string_equal(kvc_status_string(KVC_ERR_NOT_FOUND), "KVC_ERR_NOT_FOUND");
  assert_string_equal(kvc_status_string(KVC_ERR_ALREADY_EXISTS), "KVC_ERR_ALREADY_EXISTS");
  assert_string_equal(kvc_status_string(KVC_ERR_OUT_OF_BLOCKS), "KVC_ERR_OUT_OF_BLOCKS");
  assert_string_equal(kvc_status_string(KVC_ERR_BUFFER_TOO_SMALL), "KVC_ERR_BUFFER_TOO_SMALL");
  assert_string_equal(kvc_status_string(KVC_ERR_UNSUPPORTED), "KVC_ERR_UNSUPPORTED");
  assert_string_equal(kvc_status_string(KVC_ERR_DEVICE), "KVC_ERR_DEVICE");
  assert_string_equal(kvc_status_string(KVC_ERR_OUT_OF_MEMORY), "KVC_ERR_OUT_OF_MEMORY");
  assert_string_equal(kvc_status_string(KVC_ERR_INVALID_STATE), "KVC_ERR_INVALID_STATE");
  assert_string_equal(kvc_status_string(KVC_ERR_INTERNAL), "KVC_ERR_INTERNAL");
  assert_string_equal(kvc_status_string(12345), "KVC_ERR_UNKNOWN");
  assert_non_null(kvc_last_error_message());
}

static void test_config_defaults(void **state) {
  (void)state;
  kvc_config_t *c = NULL;
  assert_int_equal(kvc_config_create(&c), KVC_OK);
  uint32_t u = 99;
  uint64_t u64 = 99;
  double d = 0;
  bool b = false;
  kvc_device_kind_t kind = 0;
  int32_t ord = -1;
  assert_int_equal(kvc_config_get_num_layers(c, &u), KVC_OK);
  assert_int_equal(u, 0);
  assert_int_equal(kvc_config_get_dtype(c, &u), KVC_OK);
  assert_int_equal(u, KVC_DTYPE_BF16);
  assert_int_equal(kvc_config_get_kv_factor(c, &u), KVC_OK);
  assert_int_equal(u, 2);
  assert_int_equal(kvc_config_get_layout(c, &u), KVC_OK);
  assert_int_equal(u, KVC_LAYOUT_NHD);
  assert_int_equal(kvc_config_get_tokens_per_block(c, &u), KVC_OK);
  assert_int_equal(u, 16);
  assert_int_equal(kvc_config_get_free_gpu_memory_fraction(c, &d), KVC_OK);
  assert_true(d == 0.9);
  assert_int_equal(kvc_config_get_host_cache_bytes(c, &u64), KVC_OK);
  assert_int_equal(u64, 0);
  assert_int_equal(kvc_config_get_secondary_offload_min_priority(c, &u), KVC_OK);
  assert_int_equal(u, 35);
  assert_int_equal(kvc_config_get_block_reuse(c, &b), KVC_OK);
  assert_true(b);
  assert_int_equal(kvc_config_get_partial_reuse(c, &b), KVC_OK);
  assert_true(b);
  assert_int_equal(kvc_config_get_copy_on_partial_reuse(c, &b), KVC_OK);
  assert_true(b);
  assert_int_equal(kvc_config_get_device(c, &kind, &ord), KVC_OK);
  assert_int_equal(kind, KVC_DEVICE_CPU);
  assert_int_equal(ord, 0);
  assert_int_equal(kvc_config_get_attention_window(c, 7, &u), KVC_OK);
  assert_int_equal(u, 0);
  kvc_config_destroy(c);
}

static void test_config_roundtrip_and_clone(void **state) {
  (void)state;
  kvc_config_t *c = llama8b();
  const uint32_t windows[] = {0, 256};
  assert_int_equal(kvc_config_set_attention_windows(c, windows, 2), KVC_OK);
  assert_int_equal(kvc_config_set_max_tokens(c, 4096), KVC_OK);
  assert_int_equal(kvc_config_set_host_cache_bytes(c, 1u << 20), KVC_OK);
  assert_int_equal(kvc_config_set_block_reuse(c, false), KVC_OK);
  kvc_config_t *copy = NULL;
  assert_int_equal(kvc_config_clone(c, &copy), KVC_OK);
  kvc_config_destroy(c); /* the clone is independent */
  uint32_t u = 0;
  uint64_t u64 = 0;
  bool b = true;
  assert_int_equal(kvc_config_get_attention_window(copy, 3, &u), KVC_OK);
  assert_int_equal(u, 256);
  assert_int_equal(kvc_config_get_attention_window(copy, 4, &u), KVC_OK);
  assert_int_equal(u, 0);
  assert_int_equal(kvc_config_get_kv_heads(copy, 31, &u), KVC_OK);
  assert_int_equal(u, 8);
  assert_int_equal(kvc_config_get_max_tokens(copy, &u64), KVC_OK);
  assert_int_equal(u64, 4096);
  assert_int_equal(kvc_config_get_block_reuse(copy, &b), KVC_OK);
  assert_false(b);
  assert_int_equal(kvc_config_validate(copy), KVC_OK);
  kvc_config_destroy(copy);
}

static void test_setter_validation_messages(void **state) {
  (void)state;
  kvc_config_t *c = llama8b();
  assert_fails(kvc_config_set_tokens_per_block(c, 12), KVC_ERR_INVALID_ARGUMENT,
               "tokens_per_block must be a power of two > 1");
  assert_fails(kvc_config_set_tokens_per_block(c, 12), KVC_ERR_INVALID_ARGUMENT, "got 12");
  assert_fails(kvc_config_set_tokens_per_block(c, 1), KVC_ERR_INVALID_ARGUMENT, "got 1");
  assert_fails(kvc_config_set_tokens_per_block(c, 0), KVC_ERR_INVALID_ARGUMENT, "got 0");
  assert_fails(kvc_config_set_num_layers(c, 0), KVC_ERR_INVALID_ARGUMENT,
               "num_layers must be in 1..");
  assert_fails(kvc_config_set_kv_heads(c, 0), KVC_ERR_INVALID_ARGUMENT, "kv_heads must be in 1..");
  assert_fails(kvc_config_set_head_dim(c, 0), KVC_ERR_INVALID_ARGUMENT, "head_dim must be in 1..");
  assert_fails(kvc_config_set_dtype(c, 9), KVC_ERR_INVALID_ARGUMENT, "dtype must be one of");
  assert_fails(kvc_config_set_dtype(c, 0), KVC_ERR_INVALID_ARGUMENT, "got 0");
  assert_fails(kvc_config_set_layout(c, 7), KVC_ERR_INVALID_ARGUMENT,
               "layout must be KVC_LAYOUT_NHD (1) or KVC_LAYOUT_HND (2), got 7");
  assert_fails(kvc_config_set_kv_factor(c, 3), KVC_ERR_INVALID_ARGUMENT,
               "kv_factor must be 1 or 2, got 3");
  assert_fails(kvc_config_set_free_gpu_memory_fraction(c, 0.0), KVC_ERR_INVALID_ARGUMENT,
               "free_gpu_memory_fraction must be in (0, 1]");
  assert_fails(kvc_config_set_free_gpu_memory_fraction(c, 1.5), KVC_ERR_INVALID_ARGUMENT,
               "got 1.5");
  assert_int_equal(kvc_config_set_free_gpu_memory_fraction(c, 1.0), KVC_OK);
  assert_fails(kvc_config_set_secondary_offload_min_priority(c, 101), KVC_ERR_INVALID_ARGUMENT,
               "secondary_offload_min_priority must be in 0..100, got 101");
  assert_fails(kvc_config_set_device(c, KVC_DEVICE_CPU, 1), KVC_ERR_INVALID_ARGUMENT,
               "device ordinal must be 0 for KVC_DEVICE_CPU, got 1");
  assert_fails(kvc_config_set_device(c, KVC_DEVICE_CUDA, -1), KVC_ERR_INVALID_ARGUMENT,
               "got -1");
  assert_fails(kvc_config_set_device(c, 5, 0), KVC_ERR_INVALID_ARGUMENT, "device kind must be");
  const uint32_t heads[] = {8, 0, 8};
  assert_fails(kvc_config_set_kv_heads_per_layer(c, heads, 3), KVC_ERR_INVALID_ARGUMENT,
               "kv_heads[1] must be in 1..");
  assert_fails(kvc_config_set_kv_heads_per_layer(c, NULL, 3), KVC_ERR_INVALID_ARGUMENT,
               "kv_heads must not be NULL");
  assert_fails(kvc_config_set_attention_windows(c, NULL, 2), KVC_ERR_INVALID_ARGUMENT,
               "windows must not be NULL");

  /* Nothing changed by the failed setters. */
  uint32_t u = 0;
  assert_int_equal(kvc_config_get_tokens_per_block(c, &u), KVC_OK);
  assert_int_equal(u, 16);
  assert_int_equal(kvc_config_get_kv_heads(c, 1, &u), KVC_OK);
  assert_int_equal(u, 8);
  assert_int_equal(kvc_config_get_dtype(c, &u), KVC_OK);
  assert_int_equal(u, KVC_DTYPE_BF16);
  assert_int_equal(kvc_config_validate(c), KVC_OK);
  kvc_config_destroy(c);
}

static void test_validate_messages(void **state) {
  (void)state;
  kvc_config_t *c = NULL;
  assert_int_equal(kvc_config_create(&c), KVC_OK);
  assert_fails(kvc_config_validate(c), KVC_ERR_INVALID_ARGUMENT, "num_layers must be set");
  assert_int_equal(kvc_config_set_num_layers(c, 4), KVC_OK);
  assert_fails(kvc_config_validate(c), KVC_ERR_INVALID_ARGUMENT, "kv_heads must be set");
  const uint32_t heads[] = {8, 4, 8};
  assert_int_equal(kvc_config_set_kv_heads_per_layer(c, heads, 3), KVC_OK);
  assert_fails(kvc_config_validate(c), KVC_ERR_INVALID_ARGUMENT,
               "kv_heads per layer has 3 entries but num_layers is 4");
  assert_int_equal(kvc_config_set_kv_heads(c, 8), KVC_OK);
  assert_fails(kvc_config_validate(c), KVC_ERR_INVALID_ARGUMENT, "head_dim must be set");
  assert_int_equal(kvc_config_set_head_dim(c, 128), KVC_OK);
  const uint32_t windows[] = {0, 1, 2, 3, 4};
  assert_int_equal(kvc_config_set_attention_windows(c, windows, 5), KVC_OK);
  assert_fails(kvc_config_validate(c), KVC_ERR_INVALID_ARGUMENT,
               "attention window list has 5 entries but num_layers is 4");
  assert_int_equal(kvc_config_set_attention_windows(c, NULL, 0), KVC_OK);
  /* No bound at all: a CPU cache takes 1 GiB. */
  assert_int_equal(kvc_config_validate(c), KVC_OK);
  /* One block of 4 layers * 2 * 16 tokens * 8 heads * 128 dims * 2 bytes. */
  assert_int_equal(kvc_config_set_primary_bytes(c, 262143), KVC_OK);
  assert_fails(kvc_config_validate(c), KVC_ERR_INVALID_ARGUMENT,
               "memory budget of 262143 bytes (limited by primary_bytes) is too small for one "
               "block of every layer group, which needs 262144 bytes");
  kvc_cache_t *cache = (kvc_cache_t *)0x1;
  assert_fails(kvc_cache_create(c, &cache), KVC_ERR_INVALID_ARGUMENT, "too small for one block");
  assert_ptr_equal(cache, (kvc_cache_t *)0x1); /* untouched on failure */
  assert_int_equal(kvc_config_set_primary_bytes(c, 262144), KVC_OK);
  assert_int_equal(kvc_config_validate(c), KVC_OK);
  kvc_config_destroy(c);
}

static void test_null_handling(void **state) {
  (void)state;
  assert_fails(kvc_config_create(NULL), KVC_ERR_INVALID_ARGUMENT, "out must not be NULL");
  assert_fails(kvc_config_validate(NULL), KVC_ERR_INVALID_ARGUMENT, "config must not be NULL");
  assert_fails(kvc_config_set_num_layers(NULL, 1), KVC_ERR_INVALID_ARGUMENT,
               "config must not be NULL");
  uint32_t u;
  assert_fails(kvc_config_get_num_layers(NULL, &u), KVC_ERR_INVALID_ARGUMENT,
               "config must not be NULL");
  kvc_config_t *c = llama8b();
  assert_fails(kvc_config_get_num_layers(c, NULL), KVC_ERR_INVALID_ARGUMENT,
               "out must not be NULL");
  assert_fails(kvc_cache_create(NULL, NULL), KVC_ERR_INVALID_ARGUMENT, "config must not be NULL");
  assert_fails(kvc_cache_create(c, NULL), KVC_ERR_INVALID_ARGUMENT, "out must not be NULL");
  kvc_cache_desc_t d = KVC_CACHE_DESC_INIT;
  assert_fails(kvc_cache_describe(NULL, &d), KVC_ERR_INVALID_ARGUMENT, "cache must not be NULL");
  kvc_layer_view_t v = KVC_LAYER_VIEW_INIT;
  assert_fails(kvc_cache_layer_view(NULL, 0, &v), KVC_ERR_INVALID_ARGUMENT,
               "cache must not be NULL");
  kvc_config_destroy(NULL);
  kvc_cache_destroy(NULL);
  kvc_config_destroy(c);
}

static void test_describe_llama8b(void **state) {
  (void)state;
  kvc_config_t *c = llama8b();
  kvc_cache_t *cache = NULL;
  assert_int_equal(kvc_cache_create(c, &cache), KVC_OK);
  kvc_config_destroy(c); /* the cache keeps its own copy */

  kvc_cache_desc_t d;
  kvc_cache_desc_init(&d);
  assert_int_equal(d.struct_size, sizeof(kvc_cache_desc_t));
  assert_int_equal(kvc_cache_describe(cache, &d), KVC_OK);
  const uint64_t block_bytes = 32ull * 2 * 16 * 8 * 128 * 2; /* 2 MiB */
  assert_int_equal(d.device_kind, KVC_DEVICE_CPU);
  assert_int_equal(d.num_layers, 32);
  assert_int_equal(d.num_groups, 1);
  assert_int_equal(d.num_pools, 1);
  assert_int_equal(d.tokens_per_block, 16);
  assert_int_equal(d.kv_factor, 2);
  assert_int_equal(d.dtype, KVC_DTYPE_BF16);
  assert_int_equal(d.layout, KVC_LAYOUT_NHD);
  assert_int_equal(d.num_blocks, (2ull << 30) / block_bytes);
  assert_int_equal(d.num_blocks, 1024);
  assert_int_equal(d.token_capacity, 1024 * 16);
  assert_int_equal(d.primary_bytes, 2ull << 30);
  assert_int_equal(d.device_free_bytes, 0);

  kvc_group_desc_t g = KVC_GROUP_DESC_INIT;
  assert_int_equal(kvc_cache_describe_group(cache, 0, &g), KVC_OK);
  assert_int_equal(g.window, 0);
  assert_int_equal(g.kv_heads, 8);
  assert_int_equal(g.head_dim, 128);
  assert_int_equal(g.num_layers, 32);
  assert_int_equal(g.block_bytes, block_bytes);
  assert_int_equal(g.bytes_per_token, 32 * 2 * 8 * 128 * 2);
  assert_fails(kvc_cache_describe_group(cache, 1, &g), KVC_ERR_INVALID_ARGUMENT,
               "group must be < num_groups (1), got 1");

  kvc_pool_desc_t p = KVC_POOL_DESC_INIT;
  assert_int_equal(kvc_cache_describe_pool(cache, 0, &p), KVC_OK);
  assert_int_equal(p.num_blocks, 1024);
  assert_int_equal(p.block_bytes, block_bytes);
  assert_int_equal(p.bytes, 2ull << 30);
  assert_non_null(p.base);
  assert_fails(kvc_cache_describe_pool(cache, 3, &p), KVC_ERR_INVALID_ARGUMENT,
               "pool must be < num_pools (1), got 3");

  kvc_layer_view_t v = KVC_LAYER_VIEW_INIT;
  assert_int_equal(kvc_cache_layer_view(cache, 5, &v), KVC_OK);
  assert_ptr_equal(v.base, (char *)p.base + 5 * (2 * 16 * 8 * 128 * 2));
  assert_int_equal(v.block_stride, block_bytes);
  assert_int_equal(v.kv_stride, 16 * 8 * 128 * 2);
  assert_int_equal(v.token_stride, 8 * 128 * 2);
  assert_int_equal(v.head_stride, 128 * 2);
  assert_int_equal(v.elem_size, 2);
  assert_int_equal(v.num_blocks, 1024);
  assert_fails(kvc_cache_layer_view(cache, 32, &v), KVC_ERR_INVALID_ARGUMENT,
               "layer must be < num_layers (32), got 32");
  /* The pool memory is writable host memory on the CPU backend. */
  memset(p.base, 0xAB, (size_t)block_bytes);
  kvc_cache_destroy(cache);
}

/* An older caller passes a smaller struct: only its bytes are written. */
static void test_describe_older_struct(void **state) {
  (void)state;
  kvc_config_t *c = llama8b();
  kvc_cache_t *cache = NULL;
  assert_int_equal(kvc_cache_create(c, &cache), KVC_OK);
  kvc_config_destroy(c);
  unsigned char buf[sizeof(kvc_cache_desc_t) + 16];
  memset(buf, 0xEE, sizeof buf);
  kvc_cache_desc_t *d = (kvc_cache_desc_t *)(void *)buf;
  d->struct_size = (uint32_t)offsetof(kvc_cache_desc_t, num_layers);
  assert_int_equal(kvc_cache_describe(cache, d), KVC_OK);
  assert_int_equal(d->device_kind, KVC_DEVICE_CPU);
  assert_int_equal(buf[offsetof(kvc_cache_desc_t, num_layers)], 0xEE);
  /* A newer caller passes a larger struct: the unknown tail is zeroed. */
  d->struct_size = (uint32_t)sizeof buf;
  assert_int_equal(kvc_cache_describe(cache, d), KVC_OK);
  assert_int_equal(d->num_layers, 32);
  for (size_t i = sizeof(kvc_cache_desc_t); i < sizeof buf; ++i) assert_int_equal(buf[i], 0);
  d->struct_size = 0;
  assert_fails(kvc_cache_describe(cache, d), KVC_ERR_INVALID_ARGUMENT,
               "out->struct_size must be set");
  kvc_cache_destroy(cache);
}

static void test_groups_and_pools(void **state) {
  (void)state;
  kvc_config_t *c = NULL;
  assert_int_equal(kvc_config_create(&c), KVC_OK);
  assert_int_equal(kvc_config_set_num_layers(c, 4), KVC_OK);
  const uint32_t heads[] = {8, 8, 4, 4};
  assert_int_equal(kvc_config_set_kv_heads_per_layer(c, heads, 4), KVC_OK);
  const uint32_t windows[] = {0, 512};
  assert_int_equal(kvc_config_set_attention_windows(c, windows, 2), KVC_OK);
  assert_int_equal(kvc_config_set_head_dim(c, 64), KVC_OK);
  assert_int_equal(kvc_config_set_dtype(c, KVC_DTYPE_F16), KVC_OK);
  assert_int_equal(kvc_config_set_max_tokens(c, 1000), KVC_OK);
  kvc_cache_t *cache = NULL;
  assert_int_equal(kvc_cache_create(c, &cache), KVC_OK);
  kvc_config_destroy(c);
  kvc_cache_desc_t d = KVC_CACHE_DESC_INIT;
  assert_int_equal(kvc_cache_describe(cache, &d), KVC_OK);
  /* (full,8), (512,8), (full,4), (512,4): four groups; equal block bytes
   * pair up into two pools. */
  assert_int_equal(d.num_groups, 4);
  assert_int_equal(d.num_pools, 2);
  assert_int_equal(d.token_capacity, 63 * 16); /* ceil(1000/16) blocks per group */
  kvc_group_desc_t g = KVC_GROUP_DESC_INIT;
  assert_int_equal(kvc_cache_describe_group(cache, 1, &g), KVC_OK);
  assert_int_equal(g.window, 512);
  assert_int_equal(g.kv_heads, 8);
  assert_int_equal(g.pool, 0);
  assert_int_equal(kvc_cache_describe_group(cache, 3, &g), KVC_OK);
  assert_int_equal(g.window, 512);
  assert_int_equal(g.kv_heads, 4);
  assert_int_equal(g.pool, 1);
  kvc_pool_desc_t p = KVC_POOL_DESC_INIT;
  assert_int_equal(kvc_cache_describe_pool(cache, 0, &p), KVC_OK);
  assert_int_equal(p.num_groups, 2);
  /* Block bytes 64 KiB and 32 KiB: the budget of 63 blocks of every group
   * (63 * 192 KiB) is 189 pages of 64 KiB that either pool may carve, so
   * pool 0 addresses 189 blocks and pool 1 378. */
  assert_int_equal(p.num_blocks, 189);
  assert_int_equal(kvc_cache_describe_pool(cache, 1, &p), KVC_OK);
  assert_int_equal(p.num_blocks, 378);
  kvc_cache_destroy(cache);
}

static void test_cuda_request(void **state) {
  (void)state;
  kvc_config_t *c = llama8b();
  assert_int_equal(kvc_config_set_device(c, KVC_DEVICE_CUDA, 0), KVC_OK);
  assert_int_equal(kvc_config_set_primary_bytes(c, 64ull << 20), KVC_OK);
  kvc_cache_t *cache = NULL;
  const kvc_status_t s = kvc_cache_create(c, &cache);
  if (kvc_features() & KVC_FEATURE_CUDA_DEVICE) {
    assert_int_equal(s, KVC_OK);
    kvc_cache_desc_t d = KVC_CACHE_DESC_INIT;
    assert_int_equal(kvc_cache_describe(cache, &d), KVC_OK);
    assert_int_equal(d.device_kind, KVC_DEVICE_CUDA);
    assert_int_equal(d.primary_bytes, 32 * (2ull << 20));
    assert_true(d.device_total_bytes > 0);
    kvc_cache_destroy(cache);
  } else {
    /* No GPU here (or no CUDA backend): a clear device error. */
    assert_int_equal(s, KVC_ERR_DEVICE);
    assert_null(cache);
    assert_true(strstr(kvc_last_error_message(), "cuda:0 requested") != NULL);
    print_message("no CUDA device: %s\n", kvc_last_error_message());
  }
  /* An ordinal past the devices present is a device error either way. */
  assert_int_equal(kvc_config_set_device(c, KVC_DEVICE_CUDA, 999), KVC_OK);
  assert_fails(kvc_cache_create(c, &cache), KVC_ERR_DEVICE, "cuda:999 requested");
  kvc_config_destroy(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_versions),
      cmocka_unit_test(test_status_strings),
      cmocka_unit_test(test_config_defaults),
      cmocka_unit_test(test_config_roundtrip_and_clone),
      cmocka_unit_test(test_setter_validation_messages),
      cmocka_unit_test(test_validate_messages),
      cmocka_unit_test(test_null_handling),
      cmocka_unit_test(test_describe_llama8b),
      cmocka_unit_test(test_describe_older_struct),
      cmocka_unit_test(test_groups_and_pools),
      cmocka_unit_test(test_cuda_request),
  };
  return cmocka_run_group_tests_name("foundation", tests, NULL, NULL);
}
