/* Helpers shared by the transfer suites (test_transfer*.c). Include after
 * <cmocka.h>. */
#ifndef KVC_TEST_TRANSFER_HELPERS_H
#define KVC_TEST_TRANSFER_HELPERS_H

#include <kvcache/kvcache.h>

static inline kvc_cache_stats_t stats_of(const kvc_cache_t *cache) {
  kvc_cache_stats_t s = KVC_CACHE_STATS_INIT;
  assert_int_equal(kvc_cache_get_stats(cache, &s), KVC_OK);
  return s;
}

/* A refused or aborted call changed no block and no counter. */
static inline void assert_same_blocks(const kvc_cache_t *cache, const kvc_cache_stats_t *before) {
  const kvc_cache_stats_t now = stats_of(cache);
  assert_int_equal(now.free_blocks, before->free_blocks);
  assert_int_equal(now.cached_blocks, before->cached_blocks);
  assert_int_equal(now.in_use_blocks, before->in_use_blocks);
  assert_int_equal(now.num_sequences, before->num_sequences);
  assert_int_equal(now.tree_nodes, before->tree_nodes);
  assert_int_equal(now.reused_blocks, before->reused_blocks);
  assert_int_equal(now.missed_blocks, before->missed_blocks);
  assert_int_equal(now.evicted_blocks, before->evicted_blocks);
  assert_int_equal(kvc_cache_check(cache), KVC_OK);
}

#endif
