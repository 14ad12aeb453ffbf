/* A downstream program: built only against an installed kvcache, found with
 * pkg-config or find_package(kvcache). Creates a small cache and prints it. */
#include <kvcache/kvcache.h>
#include <stdio.h>

int main(void) {
  kvc_config_t *cfg = NULL;
  kvc_cache_t *cache = NULL;
  if (kvc_config_create(&cfg) != KVC_OK || kvc_config_set_num_layers(cfg, 4) != KVC_OK ||
      kvc_config_set_kv_heads(cfg, 2) != KVC_OK || kvc_config_set_head_dim(cfg, 64) != KVC_OK ||
      kvc_config_set_max_tokens(cfg, 256) != KVC_OK || kvc_cache_create(cfg, &cache) != KVC_OK) {
    fprintf(stderr, "consumer: %s\n", kvc_last_error_message());
    return 1;
  }
  kvc_config_destroy(cfg);
  kvc_cache_desc_t d = KVC_CACHE_DESC_INIT;
  if (kvc_cache_describe(cache, &d) != KVC_OK) return 1;
  printf("consumer: headers %s, library %s, %llu blocks, %llu tokens\n", KVC_VERSION_STRING,
         kvc_version_string(), (unsigned long long)d.num_blocks,
         (unsigned long long)d.token_capacity);
  kvc_cache_destroy(cache);
  return kvc_version() == KVC_VERSION_NUMBER ? 0 : 2;
}
