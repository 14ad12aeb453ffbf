/* Helpers shared by the state snapshot suites (test_state_snapshots.c and
 * test_state_snapshots_random.c): a hybrid cache of one attention layer and
 * three state resources, slot patterns, probe-checked adds and chunked
 * prefills. Black box: only the public header. */
#ifndef KVC_TEST_STATE_SNAPSHOTS_FIXTURE_H
#define KVC_TEST_STATE_SNAPSHOTS_FIXTURE_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
/* cmocka needs the headers above first. */
#include <cmocka.h>

#include <kvcache/kvcache.h>

#include "kvc_test_assert.h"

#define ok(call) assert_int_equal((call), KVC_OK)

enum { NRES = 3, T = 4 };

/* One attention layer (1 head of 8, bf16, 4 tokens per block: 128-byte
 * blocks) or two with `windowed` (layer 1 sees 4 tokens), and three state
 * resources: SSM 2x4x8 f32 (256 bytes), conv 24x4 f32 (384), generic 100. */
static inline kvc_config_t* hybrid_config(uint64_t bytes, uint32_t slots, uint32_t snapshots,
                                   int windowed) {
  kvc_config_t* c = NULL;
  ok(kvc_config_create(&c));
  ok(kvc_config_set_num_layers(c, windowed ? 2 : 1));
  ok(kvc_config_set_kv_heads(c, 1));
  ok(kvc_config_set_head_dim(c, 8));
  ok(kvc_config_set_tokens_per_block(c, T));
  ok(kvc_config_set_primary_bytes(c, bytes));
  if (windowed) {
    const uint32_t w[2] = {0, 4};
    ok(kvc_config_set_attention_windows(c, w, 2));
  }
  uint32_t i = 0;
  ok(kvc_config_add_ssm_state(c, 2, 4, 8, KVC_DTYPE_F32, &i));
  ok(kvc_config_add_conv_state(c, 24, 4, KVC_DTYPE_F32, &i));
  ok(kvc_config_add_generic_state(c, 100, 0, &i));
  ok(kvc_config_set_max_state_slots(c, slots));
  ok(kvc_config_set_max_state_snapshots(c, snapshots));
  return c;
}

static inline kvc_cache_t* create(kvc_config_t* c) {
  kvc_cache_t* cache = NULL;
  ok(kvc_cache_create(c, &cache));
  kvc_config_destroy(c);
  return cache;
}

static inline kvc_cache_t* hybrid(uint32_t snapshots) {
  return create(hybrid_config(1 << 20, 8, snapshots, 0));
}

/* Resource r's slot bytes of sequence id. */
static inline unsigned char* slot_bytes(kvc_cache_t* cache, uint64_t id, uint32_t r, uint64_t* size) {
  int32_t slots[NRES];
  ok(kvc_batch_state_slots(cache, &id, 1, KVC_STATE_ALL, slots));
  kvc_resource_desc_t d = KVC_RESOURCE_DESC_INIT;
  ok(kvc_cache_describe_resource(cache, r, &d));
  *size = d.slot_bytes;
  return (unsigned char*)d.base + (uint64_t)slots[r] * d.slot_stride;
}

/* Writes the pattern of `seed` into every slot of sequence id. */
static inline void fill(kvc_cache_t* cache, uint64_t id, uint32_t seed) {
  for (uint32_t r = 0; r < NRES; ++r) {
    uint64_t n = 0;
    unsigned char* p = slot_bytes(cache, id, r, &n);
    for (uint64_t b = 0; b < n; ++b) p[b] = (unsigned char)(seed * 131 + b * 7 + r * 31 + 1);
  }
}

/* Whether sequence id's slots hold the pattern of `seed`, bit for bit. */
static inline int holds(kvc_cache_t* cache, uint64_t id, uint32_t seed) {
  for (uint32_t r = 0; r < NRES; ++r) {
    uint64_t n = 0;
    const unsigned char* p = slot_bytes(cache, id, r, &n);
    for (uint64_t b = 0; b < n; ++b)
      if (p[b] != (unsigned char)(seed * 131 + b * 7 + r * 31 + 1)) return 0;
  }
  return 1;
}

static inline kvc_snapshot_stats_t stats(const kvc_cache_t* cache) {
  kvc_snapshot_stats_t s = KVC_SNAPSHOT_STATS_INIT;
  ok(kvc_cache_get_snapshot_stats(cache, &s));
  return s;
}

static inline uint64_t add(kvc_cache_t* cache, uint64_t id, const int32_t* tokens, size_t n) {
  uint64_t cached = 99, probed = 98;
  ok(kvc_cache_probe(cache, tokens, n, NULL, &probed));
  ok(kvc_sequence_add(cache, id, tokens, n, NULL, NULL, &cached));
  assert_int_equal(cached, probed);
  ok(kvc_cache_check(cache));
  return cached;
}

/* Computes a prompt in chunks of `chunk` tokens: after each, commits and
 * publishes the state (the pattern of the position) where the chunk ends on
 * a block boundary. */
static inline void prefill(kvc_cache_t* cache, uint64_t id, size_t from, size_t n, size_t chunk) {
  for (size_t end = from + chunk; end <= n; end += chunk) {
    fill(cache, id, (uint32_t)end);
    ok(kvc_sequence_commit(cache, id, end));
    if (end % T == 0) ok(kvc_sequence_publish_state(cache, id, end, NULL));
    ok(kvc_cache_check(cache));
  }
}

#endif
