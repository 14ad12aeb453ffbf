/* An old client: compiled against the committed snapshot of the baseline
 * headers (tests/abi/baseline/include), run against the freshly built
 * library. It crosses every transparent struct three ways: at the size the
 * baseline knew, at an older smaller size (only the known prefix is written
 * or read; the rest is defaulted), and at a larger size from a "newer"
 * client (an output struct's unknown tail is zeroed). */
#include <kvcache/kvcache.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;
static int checks = 0;

#define EXPECT(cond)                                                           \
  do {                                                                         \
    ++checks;                                                                  \
    if (!(cond)) {                                                             \
      ++failures;                                                              \
      fprintf(stderr, "%s:%d: expected %s (last error: %s)\n", __FILE__, __LINE__, #cond, \
              kvc_last_error_message());                                       \
    }                                                                          \
  } while (0)

/* Calls `describe` on a buffer holding struct_size = size, filled with 0xEE
 * beforehand, and checks that nothing past `size` bytes was touched when
 * size < full, and that the tail past `full` is zeroed when size > full. */
typedef kvc_status_t (*describe_fn)(const kvc_cache_t *, uint32_t, void *);

static unsigned char buf[1024];

static void cross(const char *name, const kvc_cache_t *cache, describe_fn fn, uint32_t index,
                  size_t full, size_t older) {
  /* Older, smaller struct: only its prefix is written. */
  memset(buf, 0xEE, sizeof buf);
  *(uint32_t *)(void *)buf = (uint32_t)older;
  EXPECT(fn(cache, index, buf) == KVC_OK);
  EXPECT(*(uint32_t *)(void *)buf == older);
  for (size_t i = older; i < full + 16; ++i) {
    if (buf[i] != 0xEE) {
      fprintf(stderr, "%s: byte %zu past the old size %zu was written\n", name, i, older);
      EXPECT(0);
      break;
    }
  }
  /* Newer, larger struct: the unknown tail comes back zeroed. */
  memset(buf, 0xEE, sizeof buf);
  *(uint32_t *)(void *)buf = (uint32_t)(full + 32);
  EXPECT(fn(cache, index, buf) == KVC_OK);
  for (size_t i = full; i < full + 32; ++i) EXPECT(buf[i] == 0);
  /* No size at all is an error that names the field. */
  *(uint32_t *)(void *)buf = 0;
  EXPECT(fn(cache, index, buf) == KVC_ERR_INVALID_ARGUMENT);
  EXPECT(strstr(kvc_last_error_message(), "struct_size") != NULL);
  printf("  %-18s baseline size %3zu, older size %3zu, newer size %3zu: ok\n", name, full, older,
         full + 32);
}

static kvc_status_t describe(const kvc_cache_t *c, uint32_t i, void *out) {
  (void)i;
  return kvc_cache_describe(c, (kvc_cache_desc_t *)out);
}
static kvc_status_t group(const kvc_cache_t *c, uint32_t i, void *out) {
  return kvc_cache_describe_group(c, i, (kvc_group_desc_t *)out);
}
static kvc_status_t pool(const kvc_cache_t *c, uint32_t i, void *out) {
  return kvc_cache_describe_pool(c, i, (kvc_pool_desc_t *)out);
}
static kvc_status_t view(const kvc_cache_t *c, uint32_t i, void *out) {
  return kvc_cache_layer_view(c, i, (kvc_layer_view_t *)out);
}

int main(void) {
  printf("old client built against kvcache %s headers, running on library %s\n",
         KVC_VERSION_STRING, kvc_version_string());
  EXPECT(kvc_abi_version() == KVC_ABI_VERSION);
  EXPECT(kvc_version() >= KVC_VERSION_NUMBER);

  kvc_config_t *cfg = NULL;
  EXPECT(kvc_config_create(&cfg) == KVC_OK);
  EXPECT(kvc_config_set_num_layers(cfg, 4) == KVC_OK);
  EXPECT(kvc_config_set_kv_heads(cfg, 2) == KVC_OK);
  EXPECT(kvc_config_set_head_dim(cfg, 64) == KVC_OK);
  EXPECT(kvc_config_set_max_tokens(cfg, 512) == KVC_OK);
  kvc_cache_t *cache = NULL;
  EXPECT(kvc_cache_create(cfg, &cache) == KVC_OK);
  kvc_config_destroy(cfg);
  if (cache == NULL) return 1;

  /* Full-size round trip gives the values this client expects. */
  kvc_cache_desc_t d = KVC_CACHE_DESC_INIT;
  EXPECT(kvc_cache_describe(cache, &d) == KVC_OK);
  EXPECT(d.num_layers == 4 && d.num_groups == 1 && d.num_blocks == 32 && d.token_capacity == 512);
  kvc_layer_view_t v = KVC_LAYER_VIEW_INIT;
  EXPECT(kvc_cache_layer_view(cache, 1, &v) == KVC_OK);
  EXPECT(v.head_dim == 64 && v.kv_heads == 2 && v.token_stride == 2 * 64 * 2);

  cross("kvc_cache_desc_t", cache, describe, 0, sizeof(kvc_cache_desc_t),
        offsetof(kvc_cache_desc_t, num_layers));
  cross("kvc_group_desc_t", cache, group, 0, sizeof(kvc_group_desc_t),
        offsetof(kvc_group_desc_t, num_layers));
  cross("kvc_pool_desc_t", cache, pool, 0, sizeof(kvc_pool_desc_t),
        offsetof(kvc_pool_desc_t, num_blocks));
  cross("kvc_layer_view_t", cache, view, 1, sizeof(kvc_layer_view_t),
        offsetof(kvc_layer_view_t, base));

  kvc_cache_destroy(cache);
  printf("%d passed, %d failed\n", checks - failures, failures);
  return failures == 0 ? 0 : 1;
}
