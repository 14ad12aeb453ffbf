/* The other process of test_remote_tier's cross-process test: a cache of
 * its own on the same redis-server computes a prompt (tokens 100..112),
 * evicts it to the remote tier and waits until it is written.
 *   remote_tier_peer URL       exit 0 when the prompt's 3 blocks are stored */
#include <stdio.h>
#include <stdlib.h>

#include "remote_tier_common.h"

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: remote_tier_peer URL\n");
    return 2;
  }
  kvc_config_t *c = rt_config(argv[1], 4);
  kvc_cache_t *cache = NULL;
  if (c == NULL || kvc_cache_create(c, &cache) != KVC_OK) {
    fprintf(stderr, "create: %s\n", kvc_last_error_message());
    return 1;
  }
  kvc_config_destroy(c);
  int32_t a[13], b[16];
  for (int i = 0; i < 13; ++i) a[i] = 100 + i;
  for (int i = 0; i < 16; ++i) b[i] = 900 + i;
  if (rt_cache_prompt(cache, 1, a, 13, NULL) != 0) return 1;
  if (rt_cache_prompt(cache, 2, b, 16, NULL) != 0) return 1; /* a -> Redis */
  kvc_tier_stats_t s = KVC_TIER_STATS_INIT;
  if (kvc_cache_flush_tiers(cache) != KVC_OK ||
      kvc_cache_get_tier_stats(cache, KVC_TIER_REMOTE, &s) != KVC_OK) {
    fprintf(stderr, "stats: %s\n", kvc_last_error_message());
    return 1;
  }
  if (s.stored_blocks != 7) { /* written through at commit: a's 3 and b's 4 */
    fprintf(stderr, "stored %llu blocks, expected 7\n", (unsigned long long)s.stored_blocks);
    return 1;
  }
  kvc_cache_destroy(cache);
  return 0;
}
