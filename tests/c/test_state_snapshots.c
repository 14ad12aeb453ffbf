/* C API of state snapshots (state.h, issue 21 items 4 and 5): reuse
 * restores exactly the published snapshot bytes; the reuse length is the
 * least of the attention groups' match and the deepest snapshot; evicting
 * a snapshot (a full pool, or its node's eviction) shortens the reuse;
 * rewind only to a published snapshot, which it restores; bad input with
 * precise messages and nothing changed. The randomized run is in
 * test_state_snapshots_random.c. Black box: only the public header. */
#include "state_snapshots_fixture.h"

static void reuse_restores_published_bytes(void** state) {
  (void)state;
  kvc_cache_t* cache = hybrid(0);
  int32_t a[20];
  for (int t = 0; t < 20; ++t) a[t] = 100 + t;
  assert_int_equal(add(cache, 1, a, 12), 0);
  prefill(cache, 1, 0, 12, 4); /* snapshots at 4, 8, 12 */
  kvc_snapshot_stats_t s = stats(cache);
  assert_int_equal(s.published, 3);
  assert_int_equal(s.slots_used, 3);
  assert_int_equal(s.bytes_per_snapshot, 256 + 384 + 100);
  ok(kvc_sequence_remove(cache, 1));

  /* 12 tokens again: the last token is recomputed, so 8 are reused. */
  assert_int_equal(add(cache, 2, a, 12), 8);
  assert_true(holds(cache, 2, 8));
  /* A longer prompt reuses 12, a prompt diverging in block 1 reuses 4. */
  assert_int_equal(add(cache, 3, a, 20), 12);
  assert_true(holds(cache, 3, 12));
  int32_t b[12];
  memcpy(b, a, sizeof b);
  b[6] = -1;
  assert_int_equal(add(cache, 4, b, 12), 4);
  assert_true(holds(cache, 4, 4));
  s = stats(cache);
  assert_int_equal(s.hits, 3);
  assert_int_equal(s.hit_tokens, 8 + 12 + 4);
  kvc_cache_stats_t cs = KVC_CACHE_STATS_INIT;
  ok(kvc_cache_get_stats(cache, &cs));
  assert_int_equal(cs.reused_blocks, 2 + 3 + 1); /* what was really reused */
  /* A fresh sequence's slots are not touched when nothing is reused. */
  int32_t c[6] = {7, 7, 7, 7, 7, 7};
  ok(kvc_sequence_add(cache, 5, c, 6, NULL, NULL, &cs.reused_blocks));
  assert_int_equal(cs.reused_blocks, 0);
  assert_int_equal(stats(cache).hits, 3);
  ok(kvc_cache_check(cache));
  kvc_cache_destroy(cache);
}

static void reuse_is_the_least_of_blocks_and_snapshots(void** state) {
  (void)state;
  kvc_cache_t* cache = hybrid(0);
  int32_t a[24];
  for (int t = 0; t < 24; ++t) a[t] = 300 + t;
  assert_int_equal(add(cache, 1, a, 16), 0);
  prefill(cache, 1, 0, 16, 2); /* commits all 16; publishes at 4, 8, 12, 16 */
  ok(kvc_sequence_remove(cache, 1));
  /* Publish only at 4 and 12 on a second prompt sharing nothing with it. */
  int32_t p[24];
  for (int t = 0; t < 24; ++t) p[t] = 900 + t;
  assert_int_equal(add(cache, 2, p, 16), 0);
  fill(cache, 2, 4);
  ok(kvc_sequence_commit(cache, 2, 4));
  ok(kvc_sequence_publish_state(cache, 2, 4, NULL));
  fill(cache, 2, 12);
  ok(kvc_sequence_commit(cache, 2, 16));
  ok(kvc_sequence_publish_state(cache, 2, 12, NULL));
  ok(kvc_sequence_remove(cache, 2));
  /* Blocks match 16 (20 tokens): the deepest snapshot is at 12. */
  assert_int_equal(add(cache, 3, p, 20), 12);
  assert_true(holds(cache, 3, 12));
  /* Blocks match 2 (10 shared tokens): snapshots at 4 and 12, so 4. */
  int32_t q[16];
  memcpy(q, p, sizeof q);
  q[10] = -5;
  assert_int_equal(add(cache, 4, q, 16), 4);
  assert_true(holds(cache, 4, 4));
  kvc_cache_destroy(cache);

  /* With a windowed group as well: the snapshot cut and the window rule. */
  cache = create(hybrid_config(1 << 20, 8, 0, 1));
  assert_int_equal(add(cache, 1, a, 16), 0);
  prefill(cache, 1, 0, 16, 4);
  ok(kvc_sequence_remove(cache, 1));
  assert_int_equal(add(cache, 2, a, 14), 12);
  assert_true(holds(cache, 2, 12));
  kvc_cache_destroy(cache);
}

static void evicted_snapshot_shortens_reuse(void** state) {
  (void)state;
  /* A pool of 2 snapshots: a third publish evicts the least recently used
   * (equal priorities). */
  kvc_cache_t* cache = hybrid(2);
  int32_t a[16], b[16];
  for (int t = 0; t < 16; ++t) {
    a[t] = 10 + t;
    b[t] = 500 + t;
  }
  assert_int_equal(add(cache, 1, a, 12), 0);
  fill(cache, 1, 8);
  ok(kvc_sequence_commit(cache, 1, 12));
  ok(kvc_sequence_publish_state(cache, 1, 8, NULL));
  fill(cache, 1, 4);
  ok(kvc_sequence_publish_state(cache, 1, 4, NULL)); /* the state is the caller's word */
  assert_int_equal(add(cache, 2, b, 12), 0);
  fill(cache, 2, 77);
  ok(kvc_sequence_commit(cache, 2, 8));
  ok(kvc_sequence_publish_state(cache, 2, 8, NULL)); /* evicts a's snapshot at 8 */
  kvc_snapshot_stats_t s = stats(cache);
  assert_int_equal(s.evicted, 1);
  assert_int_equal(s.slots_used, 2);
  ok(kvc_cache_check(cache));
  assert_int_equal(add(cache, 3, a, 12), 4);
  assert_true(holds(cache, 3, 4));
  /* The node kept its blocks: the tree still has them. */
  kvc_cache_stats_t cs = KVC_CACHE_STATS_INIT;
  ok(kvc_cache_get_stats(cache, &cs));
  assert_true(cs.tree_nodes >= 5);
  /* Republishing at 8 (from sequence 3, after computing to there). */
  fill(cache, 3, 8);
  ok(kvc_sequence_commit(cache, 3, 8));
  ok(kvc_sequence_publish_state(cache, 3, 8, NULL));
  ok(kvc_sequence_remove(cache, 1));
  ok(kvc_sequence_remove(cache, 2));
  ok(kvc_sequence_remove(cache, 3));
  assert_int_equal(add(cache, 4, a, 12), 8);
  assert_true(holds(cache, 4, 8));
  ok(kvc_sequence_remove(cache, 4));
  /* Dropping the blocks drops the snapshots. */
  ok(kvc_cache_reset_reuse(cache));
  s = stats(cache);
  assert_int_equal(s.slots_used, 0);
  assert_int_equal(s.dropped, 2);
  assert_int_equal(add(cache, 5, a, 12), 0);
  kvc_cache_destroy(cache);
}

static void block_eviction_drops_snapshot(void** state) {
  (void)state;
  /* 8 blocks of 128 bytes after 2 slots and 4 snapshots of 1024 bytes (the
   * generic state's 100 bytes and the conv's 384 round up to 256). */
  kvc_cache_t* cache = create(hybrid_config(6 * 1024 + 8 * 128, 2, 4, 0));
  kvc_cache_desc_t d = KVC_CACHE_DESC_INIT;
  ok(kvc_cache_describe(cache, &d));
  assert_int_equal(d.num_blocks, 8);
  int32_t a[16], b[32];
  for (int t = 0; t < 16; ++t) a[t] = 10 + t;
  for (int t = 0; t < 32; ++t) b[t] = 700 + t;
  assert_int_equal(add(cache, 1, a, 8), 0);
  prefill(cache, 1, 0, 8, 4);
  ok(kvc_sequence_remove(cache, 1));
  assert_int_equal(stats(cache).slots_used, 2);
  /* 8 blocks for another prompt evict a's cached blocks and snapshots. */
  assert_int_equal(add(cache, 2, b, 32), 0);
  kvc_snapshot_stats_t s = stats(cache);
  assert_int_equal(s.dropped, 2);
  assert_int_equal(s.slots_used, 0);
  ok(kvc_sequence_remove(cache, 2));
  assert_int_equal(add(cache, 3, a, 8), 0);
  kvc_cache_destroy(cache);
}

static void rewind_to_a_snapshot(void** state) {
  (void)state;
  kvc_cache_t* cache = hybrid(0);
  int32_t a[16];
  for (int t = 0; t < 16; ++t) a[t] = 40 + t;
  assert_int_equal(add(cache, 1, a, 8), 0);
  fill(cache, 1, 8);
  ok(kvc_sequence_commit(cache, 1, 8));
  ok(kvc_sequence_publish_state(cache, 1, 8, NULL));
  /* Three draft tokens run and change the state; two are rejected, but
   * the state goes back only to 8: rewind 3, then extend by the accepted. */
  ok(kvc_sequence_extend(cache, 1, a + 8, 3, NULL));
  fill(cache, 1, 11);
  assert_fails(kvc_sequence_rewind(cache, 1, 2), KVC_ERR_INVALID_STATE,
               "cannot rewind sequence 1 by 2 tokens (from 11 to 9): its state resources go back "
               "only to a published state snapshot, and position 9 is not a positive multiple "
               "of tokens_per_block (4)");
  kvc_sequence_desc_t sd = KVC_SEQUENCE_DESC_INIT;
  ok(kvc_sequence_describe(cache, 1, &sd));
  assert_int_equal(sd.num_tokens, 11);
  assert_true(holds(cache, 1, 11));
  ok(kvc_sequence_rewind(cache, 1, 3));
  assert_true(holds(cache, 1, 8));
  ok(kvc_sequence_describe(cache, 1, &sd));
  assert_int_equal(sd.num_tokens, 8);
  assert_int_equal(stats(cache).restores, 1);
  ok(kvc_cache_check(cache));
  /* To 4: committed and published, but no snapshot there. */
  assert_fails(kvc_sequence_rewind(cache, 1, 4), KVC_ERR_INVALID_STATE,
               "and no state snapshot is cached at position 4");
  /* Past the committed tokens: the draft block is not published. */
  ok(kvc_sequence_extend(cache, 1, a + 8, 5, NULL));
  assert_fails(kvc_sequence_rewind(cache, 1, 1), KVC_ERR_INVALID_STATE,
               "position 12 is past the 8 committed tokens of sequence 1");
  /* A rewind to 0 is refused: position 0 has no node. */
  assert_fails(kvc_sequence_rewind(cache, 1, 13), KVC_ERR_INVALID_STATE,
               "position 0 is not a positive multiple");
  assert_fails(kvc_sequence_rewind(cache, 1, 14), KVC_ERR_INVALID_ARGUMENT, "has only 13");
  ok(kvc_sequence_rewind(cache, 1, 0));
  ok(kvc_cache_check(cache));
  kvc_cache_destroy(cache);
}

/* Host snapshots (state.h, offloaded to the host tier). The config's slot
 * of every resource is S = 256 + 512 + 256 = 1024 bytes, so 8192 host bytes
 * give 8192 / 4 / S = 2 host snapshot slots and 6144 bytes of host pools. */
static kvc_cache_t* hybrid_host(uint32_t snapshots, uint32_t min_priority) {
  kvc_config_t* c = hybrid_config(1 << 20, 8, snapshots, 0);
  ok(kvc_config_set_host_cache_bytes(c, 8192));
  ok(kvc_config_set_secondary_offload_min_priority(c, min_priority));
  return create(c);
}

/* Adds `id` with the 5 tokens of `p` at `priority`, writes the pattern of
 * `seed`, commits 4 and publishes there, and removes it. */
static void publish_at_4(kvc_cache_t* cache, uint64_t id, const int32_t* p, uint32_t seed,
                         uint32_t priority) {
  kvc_sequence_options_t o = KVC_SEQUENCE_OPTIONS_INIT;
  o.prompt_priority = priority;
  uint64_t cached = 0;
  ok(kvc_sequence_add(cache, id, p, 5, &o, NULL, &cached));
  assert_int_equal(cached, 0);
  fill(cache, id, seed);
  ok(kvc_sequence_commit(cache, id, 4));
  ok(kvc_sequence_publish_state(cache, id, 4, NULL));
  ok(kvc_sequence_remove(cache, id));
  ok(kvc_cache_check(cache));
}

static void host_offload_round_trip(void** state) {
  (void)state;
  kvc_cache_t* cache = hybrid_host(2, 35);
  kvc_snapshot_stats_t s = stats(cache);
  assert_int_equal(s.host_num_slots, 2);
  assert_int_equal(s.host_bytes, 2 * 1024);
  assert_int_equal(s.host_slots_used, 0);
  kvc_cache_desc_t d = KVC_CACHE_DESC_INIT;
  ok(kvc_cache_describe(cache, &d));
  assert_int_equal(d.host_cache_bytes, 8192 - 2 * 1024); /* the host block pools */
  int32_t p[5][5];
  for (int k = 0; k < 5; ++k)
    for (int t = 0; t < 5; ++t) p[k][t] = 1000 * (k + 1) + t;
  publish_at_4(cache, 1, p[0], 1, 35);
  publish_at_4(cache, 2, p[1], 2, 35);
  /* The device pool is full: 0's snapshot (the least recently used) moves
   * to the host pool. */
  publish_at_4(cache, 3, p[2], 3, 35);
  s = stats(cache);
  assert_int_equal(s.published, 3);
  assert_int_equal(s.offloaded, 1);
  assert_int_equal(s.evicted, 0);
  assert_int_equal(s.slots_used, 2);
  assert_int_equal(s.host_slots_used, 1);
  /* Reusing it restores exactly the published bytes; it stays in the host. */
  assert_int_equal(add(cache, 10, p[0], 5), 4);
  assert_true(holds(cache, 10, 1));
  s = stats(cache);
  assert_int_equal(s.onboarded, 1);
  assert_int_equal(s.hits, 1);
  assert_int_equal(s.host_slots_used, 1);
  ok(kvc_sequence_remove(cache, 10));
  /* 1 goes to the host too; then 2, and the host pool is full: its least
   * recently used snapshot (1, published before 0 was reused) is evicted. */
  publish_at_4(cache, 4, p[3], 4, 35);
  assert_int_equal(stats(cache).host_slots_used, 2);
  publish_at_4(cache, 5, p[4], 5, 35);
  s = stats(cache);
  assert_int_equal(s.offloaded, 3);
  assert_int_equal(s.host_evicted, 1);
  assert_int_equal(s.evicted, 0);
  assert_int_equal(s.host_slots_used, 2);
  assert_int_equal(add(cache, 11, p[1], 5), 0); /* its blocks stay: no snapshot */
  ok(kvc_sequence_remove(cache, 11));
  assert_int_equal(add(cache, 12, p[0], 5), 4);
  assert_true(holds(cache, 12, 1));
  assert_int_equal(add(cache, 13, p[2], 5), 4);
  assert_true(holds(cache, 13, 3));
  assert_int_equal(stats(cache).onboarded, 3);
  ok(kvc_sequence_remove(cache, 12));
  ok(kvc_sequence_remove(cache, 13));
  /* A publish at a host snapshot's node puts the new bytes in the device
   * pool (its host slot freed; the device pool's victim, 3, offloaded). */
  assert_int_equal(add(cache, 14, p[0], 5), 4);
  fill(cache, 14, 77);
  ok(kvc_sequence_publish_state(cache, 14, 4, NULL));
  ok(kvc_cache_check(cache));
  s = stats(cache);
  assert_int_equal(s.offloaded, 4);
  assert_int_equal(s.slots_used, 2);
  assert_int_equal(s.host_slots_used, 2);
  ok(kvc_sequence_remove(cache, 14));
  assert_int_equal(add(cache, 15, p[0], 5), 4);
  assert_true(holds(cache, 15, 77));
  assert_int_equal(stats(cache).onboarded, 4); /* from the device pool */
  /* A rewind to a host snapshot restores it too. */
  assert_int_equal(add(cache, 16, p[3], 5), 4);
  assert_true(holds(cache, 16, 4));
  fill(cache, 16, 0xdead);
  ok(kvc_sequence_rewind(cache, 16, 1));
  assert_true(holds(cache, 16, 4));
  s = stats(cache);
  assert_int_equal(s.restores, 1);
  assert_int_equal(s.onboarded, 6);
  ok(kvc_cache_check(cache));
  /* Evicting the nodes from every tier drops the snapshots of both pools. */
  ok(kvc_sequence_remove(cache, 15));
  ok(kvc_sequence_remove(cache, 16));
  ok(kvc_cache_reset_reuse(cache));
  s = stats(cache);
  assert_int_equal(s.slots_used, 0);
  assert_int_equal(s.host_slots_used, 0);
  assert_int_equal(s.dropped, 4);
  assert_int_equal(add(cache, 17, p[3], 5), 0);
  kvc_cache_destroy(cache);
}

static void below_offload_priority_is_dropped(void** state) {
  (void)state;
  /* Offload priority 50: a victim at 35 is dropped, one at 80 offloaded. */
  kvc_cache_t* cache = hybrid_host(1, 50);
  int32_t p[3][5];
  for (int k = 0; k < 3; ++k)
    for (int t = 0; t < 5; ++t) p[k][t] = 2000 * (k + 1) + t;
  publish_at_4(cache, 1, p[0], 1, 35);
  publish_at_4(cache, 2, p[1], 2, 80); /* evicts 0's: below the offload priority */
  kvc_snapshot_stats_t s = stats(cache);
  assert_int_equal(s.evicted, 1);
  assert_int_equal(s.offloaded, 0);
  assert_int_equal(s.host_slots_used, 0);
  publish_at_4(cache, 3, p[2], 3, 35); /* 1's (priority 80) goes to the host */
  s = stats(cache);
  assert_int_equal(s.evicted, 1);
  assert_int_equal(s.offloaded, 1);
  assert_int_equal(s.host_slots_used, 1);
  assert_int_equal(add(cache, 10, p[0], 5), 0);
  assert_int_equal(add(cache, 11, p[1], 5), 4);
  assert_true(holds(cache, 11, 2));
  assert_int_equal(add(cache, 12, p[2], 5), 4);
  assert_true(holds(cache, 12, 3));
  kvc_cache_destroy(cache);
  /* Without device snapshots there are no host snapshots: the host bytes
   * all go to the host pools. */
  kvc_config_t* c = hybrid_config(1 << 20, 8, KVC_STATE_SNAPSHOTS_NONE, 0);
  ok(kvc_config_set_host_cache_bytes(c, 8192));
  cache = create(c);
  s = stats(cache);
  assert_int_equal(s.host_num_slots, 0);
  assert_int_equal(s.host_bytes, 0);
  kvc_cache_desc_t d = KVC_CACHE_DESC_INIT;
  ok(kvc_cache_describe(cache, &d));
  assert_int_equal(d.host_cache_bytes, 8192);
  kvc_cache_destroy(cache);
}

static void bad_input(void** state) {
  (void)state;
  kvc_cache_t* cache = hybrid(0);
  int32_t a[12];
  for (int t = 0; t < 12; ++t) a[t] = t;
  add(cache, 1, a, 10);
  ok(kvc_sequence_commit(cache, 1, 6));
  const kvc_snapshot_stats_t before = stats(cache);
  assert_fails(kvc_sequence_publish_state(cache, 1, 0, NULL), KVC_ERR_INVALID_ARGUMENT,
               "cannot publish the state of sequence 1 at position 0: position 0 is not a "
               "positive multiple of tokens_per_block (4)");
  assert_fails(kvc_sequence_publish_state(cache, 1, 6, NULL), KVC_ERR_INVALID_ARGUMENT,
               "position 6 is not a positive multiple of tokens_per_block (4)");
  assert_fails(kvc_sequence_publish_state(cache, 1, 8, NULL), KVC_ERR_INVALID_ARGUMENT,
               "position 8 is past the 6 committed tokens of sequence 1");
  assert_fails(kvc_sequence_publish_state(cache, 9, 4, NULL), KVC_ERR_NOT_FOUND, "9");
  assert_fails(kvc_sequence_publish_state(NULL, 1, 4, NULL), KVC_ERR_INVALID_ARGUMENT, "cache");
  const kvc_snapshot_stats_t after = stats(cache);
  assert_memory_equal(&before, &after, sizeof before);
  ok(kvc_sequence_publish_state(cache, 1, 4, NULL));
  assert_fails(kvc_cache_get_snapshot_stats(cache, NULL), KVC_ERR_INVALID_ARGUMENT, "out");
  kvc_cache_destroy(cache);

  /* Block reuse off: nothing is published. */
  kvc_config_t* c = hybrid_config(1 << 20, 4, 0, 0);
  ok(kvc_config_set_block_reuse(c, false));
  cache = create(c);
  add(cache, 1, a, 10);
  ok(kvc_sequence_commit(cache, 1, 8));
  assert_fails(kvc_sequence_publish_state(cache, 1, 4, NULL), KVC_ERR_INVALID_STATE,
               "block reuse is off for this cache");
  kvc_cache_destroy(cache);

  /* No snapshot slots. */
  cache = create(hybrid_config(1 << 20, 4, KVC_STATE_SNAPSHOTS_NONE, 0));
  assert_int_equal(stats(cache).num_slots, 0);
  assert_int_equal(stats(cache).bytes, 0);
  add(cache, 1, a, 10);
  ok(kvc_sequence_commit(cache, 1, 8));
  assert_fails(kvc_sequence_publish_state(cache, 1, 4, NULL), KVC_ERR_INVALID_STATE,
               "the cache has 0 state snapshot slots (kvc_config_set_max_state_snapshots)");
  kvc_cache_destroy(cache);

  /* A cache without state resources. */
  ok(kvc_config_create(&c));
  ok(kvc_config_set_num_layers(c, 1));
  ok(kvc_config_set_kv_heads(c, 1));
  ok(kvc_config_set_head_dim(c, 8));
  ok(kvc_config_set_tokens_per_block(c, 4));
  ok(kvc_config_set_primary_bytes(c, 1 << 20));
  cache = create(c);
  add(cache, 1, a, 10);
  ok(kvc_sequence_commit(cache, 1, 8));
  assert_fails(kvc_sequence_publish_state(cache, 1, 4, NULL), KVC_ERR_INVALID_ARGUMENT,
               "the cache has no state resources: there is no state of sequence 1 to publish");
  assert_int_equal(stats(cache).num_slots, 0);
  kvc_cache_destroy(cache);

  /* The setting. */
  ok(kvc_config_create(&c));
  uint32_t v = 1;
  ok(kvc_config_get_max_state_snapshots(c, &v));
  assert_int_equal(v, 0);
  assert_fails(kvc_config_set_max_state_snapshots(c, (1u << 20) + 1), KVC_ERR_INVALID_ARGUMENT,
               "max_state_snapshots must be at most 1048576 or KVC_STATE_SNAPSHOTS_NONE, got "
               "1048577");
  ok(kvc_config_get_max_state_snapshots(c, &v));
  assert_int_equal(v, 0);
  ok(kvc_config_set_max_state_snapshots(c, KVC_STATE_SNAPSHOTS_NONE));
  ok(kvc_config_get_max_state_snapshots(c, &v));
  assert_int_equal(v, KVC_STATE_SNAPSHOTS_NONE);
  assert_fails(kvc_config_get_max_state_snapshots(c, NULL), KVC_ERR_INVALID_ARGUMENT, "out");
  kvc_config_destroy(c);
  /* More snapshots than the budget holds. */
  c = hybrid_config(4 * 1024 + 128, 2, 3, 0);
  assert_fails(kvc_config_validate(c), KVC_ERR_INVALID_ARGUMENT,
               "max_state_snapshots 3 need 3 * 1024 bytes");
  ok(kvc_config_set_max_state_snapshots(c, 2));
  ok(kvc_config_validate(c));
  kvc_config_destroy(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(reuse_restores_published_bytes),
      cmocka_unit_test(reuse_is_the_least_of_blocks_and_snapshots),
      cmocka_unit_test(evicted_snapshot_shortens_reuse),
      cmocka_unit_test(block_eviction_drops_snapshot),
      cmocka_unit_test(rewind_to_a_snapshot),
      cmocka_unit_test(host_offload_round_trip),
      cmocka_unit_test(below_offload_priority_is_dropped),
      cmocka_unit_test(bad_input),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
