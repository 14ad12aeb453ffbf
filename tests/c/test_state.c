/* C API of the state resources (state.h): describe for a Jamba-like and a
 * Nemotron-H-like config, the managed/local rule (n_groups met and not),
 * slot accounting through add/fork/remove/refusal (nothing changed on a
 * refusal), fork copying the state bit for bit, the batch slot call, the
 * budget split, no prefix reuse and no rewind without a state snapshot
 * (test_state_snapshots.c has them with snapshots), the unpaged
 * length bound, bad input, and a randomized run with the invariant check.
 * Black box: only the public header. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <kvcache/kvcache.h>

#include "kvc_test_assert.h"

#define ok(call) assert_int_equal((call), KVC_OK)

/* Attention layers through today's setters: `layers` layers of `heads`
 * heads of `dim`, bf16, 16 tokens per block, `bytes` of budget. */
static kvc_config_t *attention(uint32_t layers, uint32_t heads, uint32_t dim, uint64_t bytes) {
  kvc_config_t *c = NULL;
  ok(kvc_config_create(&c));
  ok(kvc_config_set_num_layers(c, layers));
  ok(kvc_config_set_kv_heads(c, heads));
  ok(kvc_config_set_head_dim(c, dim));
  ok(kvc_config_set_primary_bytes(c, bytes));
  return c;
}

static kvc_cache_t *create(kvc_config_t *c) {
  kvc_cache_t *cache = NULL;
  ok(kvc_cache_create(c, &cache));
  kvc_config_destroy(c);
  return cache;
}

static kvc_resource_desc_t resource(const kvc_cache_t *cache, uint32_t r) {
  kvc_resource_desc_t d = KVC_RESOURCE_DESC_INIT;
  ok(kvc_cache_describe_resource(cache, r, &d));
  return d;
}

/* Jamba v0.1 dimensions (its public config: hidden 4096, Mamba-1 with
 * d_inner 8192 = expand 2 x 4096, d_state 16, d_conv 4; attention with 8 KV
 * heads of 128, one layer in 8) on one period of 8 layers: 1 attention
 * layer, 7 Mamba layers. Mamba-1 as SSM (1 head of 8192, d_state 16) and
 * conv (8192, 4): n_groups 0. */
static void jamba_like_describe(void **state) {
  (void)state;
  kvc_config_t *c = attention(1, 8, 128, 256ull << 20);
  for (uint32_t l = 0; l < 7; ++l) {
    uint32_t ssm = 0, conv = 0;
    ok(kvc_config_add_ssm_state(c, 1, 8192, 16, KVC_DTYPE_F32, &ssm));
    ok(kvc_config_add_conv_state(c, 8192, 4, KVC_DTYPE_BF16, &conv));
    assert_int_equal(ssm, 2 * l);
    assert_int_equal(conv, 2 * l + 1);
  }
  ok(kvc_config_set_max_state_slots(c, 4));
  kvc_cache_t *cache = create(c);
  kvc_cache_desc_t d = KVC_CACHE_DESC_INIT;
  ok(kvc_cache_describe(cache, &d));
  assert_int_equal(d.num_resources, 14);
  assert_int_equal(d.num_state_slots, 4);
  const uint64_t slot = 8192ull * 16 * 4 + 8192ull * 4 * 2;
  assert_int_equal(d.state_bytes, 7 * 4 * slot);
  assert_true(d.primary_bytes <= (256ull << 20) - d.state_bytes);
  for (uint32_t r = 0; r < 14; ++r) {
    kvc_resource_desc_t x = resource(cache, r);
    assert_int_equal(x.managed, 1);
    assert_int_equal(x.reason, KVC_RESOURCE_REASON_MANAGED);
    assert_int_equal(x.num_slots, 4);
    assert_int_equal(x.slots_used, 0);
    assert_non_null(x.base);
    if (r % 2 == 0) {
      assert_int_equal(x.kind, KVC_RESOURCE_SSM);
      assert_int_equal(x.slot_bytes, 8192ull * 16 * 4);
      assert_int_equal(x.stride0, 8192ull * 16 * 4);
      assert_int_equal(x.stride1, 16 * 4);
      assert_int_equal(x.stride2, 4);
    } else {
      assert_int_equal(x.kind, KVC_RESOURCE_CONV);
      assert_int_equal(x.n_groups, 0);
      assert_int_equal(x.slot_bytes, 8192ull * 4 * 2);
      assert_int_equal(x.stride0, 4 * 2);
      assert_int_equal(x.stride1, 2);
      assert_non_null(strstr(x.reason_text, "n_groups 0"));
    }
    assert_int_equal(x.slot_stride, x.slot_bytes);
  }
  kvc_cache_destroy(cache);
}

/* Nemotron-H-8B dimensions (its public config: 128 Mamba-2 heads of 64,
 * ssm_state_size 128, n_groups 8, conv_kernel 4; attention with 8 KV heads
 * of 128): conv_dim = 64 * 128 + 2 * 8 * 128 = 10240. Two Mamba layers and
 * one attention layer, then a conv that fails the constraint and an SSM of
 * another shape: both local, with the reason. */
static void nemotron_h_like_describe(void **state) {
  (void)state;
  kvc_config_t *c = attention(1, 8, 128, 128ull << 20);
  uint32_t i = 0;
  for (int l = 0; l < 2; ++l) {
    ok(kvc_config_add_ssm_state(c, 128, 64, 128, KVC_DTYPE_F32, &i));
    ok(kvc_config_add_conv_state(c, 10240, 4, KVC_DTYPE_BF16, &i));
  }
  ok(kvc_config_add_conv_state(c, 10241, 4, KVC_DTYPE_BF16, &i));
  assert_int_equal(i, 4);
  ok(kvc_config_add_ssm_state(c, 64, 64, 128, KVC_DTYPE_F32, &i));
  ok(kvc_config_add_conv_state(c, 8192 + 2 * 128, 4, KVC_DTYPE_BF16, &i));  /* n_groups 1, other shape */
  uint32_t n = 0;
  ok(kvc_config_get_num_resources(c, &n));
  assert_int_equal(n, 7);
  ok(kvc_config_set_max_state_slots(c, 2));
  kvc_cache_t *cache = create(c);
  kvc_resource_desc_t conv = resource(cache, 1);
  assert_int_equal(conv.managed, 1);
  assert_int_equal(conv.n_groups, 8);
  assert_int_equal(conv.conv_dim, 10240);
  assert_int_equal(conv.d_conv, 4);
  kvc_resource_desc_t ssm = resource(cache, 2);
  assert_int_equal(ssm.kind, KVC_RESOURCE_SSM);
  assert_int_equal(ssm.managed, 1);
  assert_int_equal(ssm.slot_bytes, 128ull * 64 * 128 * 4);
  kvc_resource_desc_t bad = resource(cache, 4);
  assert_int_equal(bad.managed, 0);
  assert_int_equal(bad.reason, KVC_RESOURCE_REASON_N_GROUPS);
  assert_int_equal(bad.n_groups, 0);
  assert_non_null(strstr(bad.reason_text, "conv_dim 10241"));
  assert_non_null(strstr(bad.reason_text, "no integer n_groups"));
  kvc_resource_desc_t other = resource(cache, 5);
  assert_int_equal(other.managed, 0);
  assert_int_equal(other.reason, KVC_RESOURCE_REASON_SSM_SHAPE_DIFFERS);
  kvc_resource_desc_t shape = resource(cache, 6);
  assert_int_equal(shape.managed, 0);
  assert_int_equal(shape.reason, KVC_RESOURCE_REASON_CONV_SHAPE_DIFFERS);
  assert_int_equal(shape.n_groups, 1);
  kvc_resource_desc_t out = KVC_RESOURCE_DESC_INIT;
  assert_fails(kvc_cache_describe_resource(cache, 7, &out), KVC_ERR_INVALID_ARGUMENT,
               "< the cache's 7 state resources, got 7");
  kvc_cache_destroy(cache);
}

static void conv_without_ssm_is_local(void **state) {
  (void)state;
  kvc_config_t *c = attention(1, 1, 8, 1 << 20);
  uint32_t i = 0;
  ok(kvc_config_add_conv_state(c, 64, 4, KVC_DTYPE_F32, &i));
  kvc_cache_t *cache = create(c);
  kvc_resource_desc_t d = resource(cache, 0);
  assert_int_equal(d.managed, 0);
  assert_int_equal(d.reason, KVC_RESOURCE_REASON_NO_SSM);
  kvc_cache_destroy(cache);
}

/* A small hybrid: SSM 2x4x8 f32 (256 B), conv 16x4 f32 (n_groups 1:
 * 16 = 2 * 4 + 2 * 1 * 4), a local conv (17x4), generic 100 B aligned 512,
 * unpaged 16 B x 32 tokens; `slots` slots. */
static kvc_cache_t *small_hybrid(uint32_t slots) {
  kvc_config_t *c = attention(1, 1, 8, 1 << 20);
  ok(kvc_config_set_tokens_per_block(c, 4));
  uint32_t i = 0;
  ok(kvc_config_add_ssm_state(c, 2, 4, 8, KVC_DTYPE_F32, &i));
  ok(kvc_config_add_conv_state(c, 24, 4, KVC_DTYPE_F32, &i));
  ok(kvc_config_add_conv_state(c, 17, 4, KVC_DTYPE_F32, &i));
  ok(kvc_config_add_generic_state(c, 100, 512, &i));
  ok(kvc_config_add_unpaged_resource(c, 16, 32, &i));
  ok(kvc_config_set_max_state_slots(c, slots));
  return create(c);
}

enum { NRES = 5 };

static void add(kvc_cache_t *cache, uint64_t id, size_t n) {
  int32_t tokens[32];
  for (size_t t = 0; t < n; ++t) tokens[t] = (int32_t)(t + 1);
  uint64_t cached = 99;
  ok(kvc_sequence_add(cache, id, tokens, n, NULL, NULL, &cached));
  assert_int_equal(cached, 0);
}

static void slot_accounting(void **state) {
  (void)state;
  kvc_cache_t *cache = small_hybrid(3);
  assert_int_equal(resource(cache, 1).managed, 1);
  assert_int_equal(resource(cache, 1).n_groups, 1);
  assert_int_equal(resource(cache, 2).managed, 0);
  assert_int_equal(resource(cache, 3).alignment, 512);
  assert_int_equal(resource(cache, 3).slot_stride, 512);
  assert_int_equal((uintptr_t)resource(cache, 3).base % 512, 0);
  add(cache, 1, 5);
  add(cache, 2, 5);
  ok(kvc_sequence_fork(cache, 1, 3));
  for (uint32_t r = 0; r < NRES; ++r) assert_int_equal(resource(cache, r).slots_used, 3);
  int32_t slots[3 * NRES];
  const uint64_t ids[3] = {3, 1, 2};
  ok(kvc_batch_state_slots(cache, ids, 3, 0, slots));
  assert_int_equal(slots[0], 2);
  assert_int_equal(slots[1], 0);
  assert_int_equal(slots[2], 1);
  ok(kvc_batch_state_slots(cache, ids, 3, KVC_STATE_ALL, slots));
  for (int s = 0; s < 3; ++s)
    for (int r = 0; r < NRES; ++r) assert_int_equal(slots[s * NRES + r], slots[s * NRES]);

  /* Refusals: nothing changed. */
  kvc_cache_stats_t before = KVC_CACHE_STATS_INIT, after = KVC_CACHE_STATS_INIT;
  ok(kvc_cache_get_stats(cache, &before));
  int32_t tokens[4] = {1, 2, 3, 4};
  uint64_t cached = 0;
  assert_fails(kvc_sequence_add(cache, 4, tokens, 4, NULL, NULL, &cached), KVC_ERR_OUT_OF_BLOCKS,
               "cannot add sequence 4: no free state slot: resource 0 (ssm, managed) has all 3");
  assert_fails(kvc_sequence_fork(cache, 1, 4), KVC_ERR_OUT_OF_BLOCKS,
               "cannot fork sequence 1 into 4: no free state slot");
  /* The add's own checks come first. */
  assert_fails(kvc_sequence_add(cache, 1, tokens, 4, NULL, NULL, &cached),
               KVC_ERR_ALREADY_EXISTS, "sequence 1 already exists");
  assert_fails(kvc_sequence_fork(cache, 9, 4), KVC_ERR_NOT_FOUND, "9");
  ok(kvc_cache_get_stats(cache, &after));
  assert_memory_equal(&before, &after, sizeof before);
  for (uint32_t r = 0; r < NRES; ++r) assert_int_equal(resource(cache, r).slots_used, 3);
  ok(kvc_cache_check(cache));

  ok(kvc_sequence_remove(cache, 2));
  for (uint32_t r = 0; r < NRES; ++r) assert_int_equal(resource(cache, r).slots_used, 2);
  add(cache, 4, 4);
  const uint64_t four = 4;
  ok(kvc_batch_state_slots(cache, &four, 1, 2, slots));
  assert_int_equal(slots[0], 1);  /* the slot sequence 2 freed */
  assert_fails(kvc_batch_state_slots(cache, &four, 1, NRES, slots), KVC_ERR_INVALID_ARGUMENT,
               "resource must be < the cache's 5 state resources or KVC_STATE_ALL, got 5");
  const uint64_t gone[2] = {4, 2};
  slots[0] = -7;
  assert_fails(kvc_batch_state_slots(cache, gone, 2, 0, slots), KVC_ERR_NOT_FOUND,
               "ids[1]: sequence 2 does not exist");
  assert_int_equal(slots[0], -7);
  ok(kvc_cache_check(cache));
  kvc_cache_destroy(cache);
}

static void fork_copies_state_bit_for_bit(void **state) {
  (void)state;
  kvc_cache_t *cache = small_hybrid(4);
  add(cache, 1, 6);
  add(cache, 2, 6);
  const uint64_t one = 1;
  int32_t s1[NRES], s3[NRES];
  ok(kvc_batch_state_slots(cache, &one, 1, KVC_STATE_ALL, s1));
  for (uint32_t r = 0; r < NRES; ++r) {
    kvc_resource_desc_t d = resource(cache, r);
    unsigned char *p = (unsigned char *)d.base + (uint64_t)s1[r] * d.slot_stride;
    for (uint64_t b = 0; b < d.slot_bytes; ++b) p[b] = (unsigned char)(b * 7 + r * 31 + 1);
  }
  ok(kvc_sequence_fork(cache, 1, 3));
  const uint64_t three = 3;
  ok(kvc_batch_state_slots(cache, &three, 1, KVC_STATE_ALL, s3));
  for (uint32_t r = 0; r < NRES; ++r) {
    kvc_resource_desc_t d = resource(cache, r);
    assert_int_not_equal(s1[r], s3[r]);
    const unsigned char *a = (const unsigned char *)d.base + (uint64_t)s1[r] * d.slot_stride;
    const unsigned char *b = (const unsigned char *)d.base + (uint64_t)s3[r] * d.slot_stride;
    assert_memory_equal(a, b, d.slot_bytes);
  }
  ok(kvc_cache_check(cache));
  kvc_cache_destroy(cache);
}

static void budget_split(void **state) {
  (void)state;
  /* One layer, 1 head of 8, bf16, 16 tokens: 512-byte blocks. SSM 1x1x64
   * f32: 256-byte slots. Budget 64 KiB: planned slots
   * min(256, (65536 - 512) / 256 / 2) = 127; planned snapshots
   * min(127, (65536 - 127 * 256 - 512) / 256 / 4) = 31. */
  kvc_config_t *c = attention(1, 1, 8, 65536);
  uint32_t i = 0;
  ok(kvc_config_add_ssm_state(c, 1, 1, 64, KVC_DTYPE_F32, &i));
  kvc_cache_t *cache = create(c);
  kvc_cache_desc_t d = KVC_CACHE_DESC_INIT;
  ok(kvc_cache_describe(cache, &d));
  assert_int_equal(d.num_state_slots, 127);
  assert_int_equal(d.state_bytes, 127 * 256);
  assert_int_equal(d.num_blocks, (65536 - 158 * 256) / 512);
  kvc_snapshot_stats_t st = KVC_SNAPSHOT_STATS_INIT;
  ok(kvc_cache_get_snapshot_stats(cache, &st));
  assert_int_equal(st.num_slots, 31);
  assert_int_equal(st.bytes, 31 * 256);
  assert_int_equal(st.bytes_per_snapshot, 256);
  kvc_cache_destroy(cache);

  /* The cap of 256 planned slots. */
  c = attention(1, 1, 8, 1 << 20);
  ok(kvc_config_add_ssm_state(c, 1, 1, 64, KVC_DTYPE_F32, &i));
  cache = create(c);
  ok(kvc_cache_describe(cache, &d));
  assert_int_equal(d.num_state_slots, 256);
  kvc_cache_destroy(cache);

  /* Too small for one block plus one slot; too many explicit slots. */
  c = attention(1, 1, 8, 512 + 255);
  ok(kvc_config_add_ssm_state(c, 1, 1, 64, KVC_DTYPE_F32, &i));
  assert_fails(kvc_config_validate(c), KVC_ERR_INVALID_ARGUMENT,
               "memory budget of 767 bytes (limited by primary_bytes) is too small for one block "
               "of every layer group (512 bytes) plus one slot of every state resource (256 bytes)");
  kvc_cache_t *none = NULL;
  assert_fails(kvc_cache_create(c, &none), KVC_ERR_INVALID_ARGUMENT, "is too small");
  assert_null(none);
  ok(kvc_config_set_primary_bytes(c, 512 + 3 * 256));
  ok(kvc_config_set_max_state_slots(c, 4));
  assert_fails(kvc_config_validate(c), KVC_ERR_INVALID_ARGUMENT,
               "max_state_slots 4 need 4 * 256 bytes");
  ok(kvc_config_set_max_state_slots(c, 3));
  ok(kvc_config_validate(c));
  cache = create(c);
  ok(kvc_cache_describe(cache, &d));
  assert_int_equal(d.num_state_slots, 3);
  assert_int_equal(d.num_blocks, 1);
  assert_fails(kvc_cache_resize(cache, 4096), KVC_ERR_UNSUPPORTED, "state resources");
  kvc_resize_inputs_t in = KVC_RESIZE_INPUTS_INIT;
  in.free_bytes = 1 << 20;
  kvc_resize_plan_t plan = KVC_RESIZE_PLAN_INIT;
  uint64_t pools[4];
  assert_fails(kvc_cache_plan_resize(cache, &in, &plan, pools, 4), KVC_ERR_UNSUPPORTED,
               "kvc_cache_plan_resize is not supported on a cache with state resources (1)");
  kvc_cache_destroy(cache);
}

static void no_reuse_no_rewind_without_snapshot(void **state) {
  (void)state;
  kvc_cache_t *cache = small_hybrid(4);
  int32_t tokens[12];
  for (int t = 0; t < 12; ++t) tokens[t] = 100 + t;
  uint64_t cached = 0;
  ok(kvc_sequence_add(cache, 1, tokens, 12, NULL, NULL, &cached));
  ok(kvc_sequence_commit(cache, 1, 12));
  ok(kvc_sequence_remove(cache, 1));
  ok(kvc_cache_probe(cache, tokens, 12, NULL, &cached));
  assert_int_equal(cached, 0);
  ok(kvc_sequence_add(cache, 2, tokens, 12, NULL, NULL, &cached));
  assert_int_equal(cached, 0);
  ok(kvc_sequence_commit(cache, 2, 12));
  ok(kvc_sequence_add(cache, 3, tokens, 12, NULL, NULL, &cached));
  assert_int_equal(cached, 0);
  kvc_cache_stats_t s = KVC_CACHE_STATS_INIT;
  ok(kvc_cache_get_stats(cache, &s));
  assert_int_equal(s.reused_blocks, 0);
  assert_int_equal(s.tree_nodes, 3);  /* published, but no snapshot to reuse them with */
  assert_fails(kvc_sequence_rewind(cache, 2, 2), KVC_ERR_INVALID_STATE,
               "cannot rewind sequence 2 by 2 tokens (from 12 to 10): its state resources go "
               "back only to a published state snapshot, and position 10 is not a positive "
               "multiple of tokens_per_block (4)");
  assert_fails(kvc_sequence_rewind(cache, 2, 4), KVC_ERR_INVALID_STATE,
               "and no state snapshot is cached at position 8");
  ok(kvc_sequence_rewind(cache, 2, 0));
  assert_fails(kvc_sequence_rewind(cache, 9, 1), KVC_ERR_NOT_FOUND, "9");
  kvc_sequence_desc_t d = KVC_SEQUENCE_DESC_INIT;
  ok(kvc_sequence_describe(cache, 2, &d));
  assert_int_equal(d.num_tokens, 12);
  kvc_export_t *ex = NULL;
  assert_fails(kvc_cache_export_sequence(cache, 2, 12, &ex), KVC_ERR_UNSUPPORTED,
               "block export from a cache with state resources");
  kvc_cache_destroy(cache);
}

static void unpaged_length_bound(void **state) {
  (void)state;
  kvc_cache_t *cache = small_hybrid(4);  /* unpaged: 32 tokens */
  int32_t tokens[33];
  for (int t = 0; t < 33; ++t) tokens[t] = t;
  uint64_t cached = 0;
  assert_fails(kvc_sequence_add(cache, 1, tokens, 33, NULL, NULL, &cached),
               KVC_ERR_INVALID_ARGUMENT,
               "sequence 1 would hold 33 tokens, more than the 32 max_tokens of unpaged resource 4");
  ok(kvc_sequence_add(cache, 1, tokens, 30, NULL, NULL, &cached));
  assert_fails(kvc_sequence_extend(cache, 1, tokens, 3, NULL), KVC_ERR_INVALID_ARGUMENT,
               "would hold 33 tokens");
  ok(kvc_sequence_extend(cache, 1, tokens, 2, NULL));
  const uint64_t one = 1;
  assert_fails(kvc_batch_extend(cache, &one, tokens, 1, NULL), KVC_ERR_INVALID_ARGUMENT,
               "would hold 33 tokens");
  assert_int_equal(resource(cache, 0).slots_used, 1);
  kvc_cache_destroy(cache);
}

static void bad_input(void **state) {
  (void)state;
  kvc_config_t *c = NULL;
  ok(kvc_config_create(&c));
  uint32_t i = 77;
  assert_fails(kvc_config_add_ssm_state(c, 0, 4, 8, KVC_DTYPE_F32, &i), KVC_ERR_INVALID_ARGUMENT,
               "num_heads must be > 0, got 0");
  assert_fails(kvc_config_add_ssm_state(c, 2, 0, 8, KVC_DTYPE_F32, &i), KVC_ERR_INVALID_ARGUMENT,
               "head_dim must be > 0, got 0");
  assert_fails(kvc_config_add_ssm_state(c, 2, 4, 0, KVC_DTYPE_F32, &i), KVC_ERR_INVALID_ARGUMENT,
               "d_state must be > 0, got 0");
  assert_fails(kvc_config_add_ssm_state(c, 2, 4, 8, KVC_DTYPE_FP8_E4M3, &i),
               KVC_ERR_INVALID_ARGUMENT, "got 4");
  assert_fails(kvc_config_add_ssm_state(c, 2, 4, 8, KVC_DTYPE_F32, NULL),
               KVC_ERR_INVALID_ARGUMENT, "index must not be NULL");
  assert_fails(kvc_config_add_conv_state(c, 0, 4, KVC_DTYPE_F32, &i), KVC_ERR_INVALID_ARGUMENT,
               "conv_dim must be > 0, got 0");
  assert_fails(kvc_config_add_conv_state(c, 8, 0, KVC_DTYPE_F32, &i), KVC_ERR_INVALID_ARGUMENT,
               "d_conv must be > 0, got 0");
  assert_fails(kvc_config_add_conv_state(c, 8, 4, 9, &i), KVC_ERR_INVALID_ARGUMENT, "got 9");
  assert_fails(kvc_config_add_generic_state(c, 0, 0, &i), KVC_ERR_INVALID_ARGUMENT,
               "bytes must be > 0, got 0");
  assert_fails(kvc_config_add_generic_state(c, 8, 3, &i), KVC_ERR_INVALID_ARGUMENT,
               "alignment must be 0 or a power of two up to 4096, got 3");
  assert_fails(kvc_config_add_generic_state(c, 8, 8192, &i), KVC_ERR_INVALID_ARGUMENT,
               "got 8192");
  assert_fails(kvc_config_add_unpaged_resource(c, 0, 4, &i), KVC_ERR_INVALID_ARGUMENT,
               "bytes_per_token must be > 0, got 0");
  assert_fails(kvc_config_add_unpaged_resource(c, 4, 0, &i), KVC_ERR_INVALID_ARGUMENT,
               "max_tokens must be > 0, got 0");
  assert_fails(kvc_config_add_unpaged_resource(c, 1ull << 30, 1ull << 20, &i),
               KVC_ERR_INVALID_ARGUMENT, "(1073741824 * 1048576) must be at most 2^40 bytes");
  assert_fails(kvc_config_set_max_state_slots(c, (1u << 20) + 1), KVC_ERR_INVALID_ARGUMENT,
               "max_state_slots must be at most 1048576, got 1048577");
  uint32_t n = 9, slots = 9;
  ok(kvc_config_get_num_resources(c, &n));
  assert_int_equal(n, 0);
  ok(kvc_config_get_max_state_slots(c, &slots));
  assert_int_equal(slots, 0);
  assert_int_equal(i, 77);
  assert_fails(kvc_config_get_num_resources(NULL, &n), KVC_ERR_INVALID_ARGUMENT,
               "config must not be NULL");
  kvc_config_destroy(c);

  /* A cache without state resources. */
  c = attention(1, 1, 8, 1 << 20);
  kvc_cache_t *cache = create(c);
  kvc_cache_desc_t d = KVC_CACHE_DESC_INIT;
  ok(kvc_cache_describe(cache, &d));
  assert_int_equal(d.num_resources, 0);
  assert_int_equal(d.num_state_slots, 0);
  assert_int_equal(d.state_bytes, 0);
  add(cache, 1, 4);
  const uint64_t one = 1;
  int32_t s = 0;
  assert_fails(kvc_batch_state_slots(cache, &one, 1, 0, &s), KVC_ERR_INVALID_ARGUMENT,
               "the cache has no state resources");
  kvc_resource_desc_t r = KVC_RESOURCE_DESC_INIT;
  assert_fails(kvc_cache_describe_resource(cache, 0, &r), KVC_ERR_INVALID_ARGUMENT,
               "< the cache's 0 state resources, got 0");
  assert_fails(kvc_batch_state_slots(cache, NULL, 1, 0, &s), KVC_ERR_INVALID_ARGUMENT,
               "ids must not be NULL");
  kvc_cache_destroy(cache);
}

/* Random add/fork/remove/extend with the invariant check (slot ownership
 * included) after every step, and a shadow of the slot counts. */
static void randomized(void **state) {
  (void)state;
  kvc_cache_t *cache = small_hybrid(6);
  unsigned seed = 12345;
  uint64_t live[64];
  size_t n = 0;
  uint64_t next = 1;
  for (int step = 0; step < 600; ++step) {
    seed = seed * 1103515245u + 12345u;
    const unsigned op = (seed >> 16) % 4;
    if (op == 0 || n == 0) {
      int32_t tokens[8] = {1, 2, 3, 4, 5, 6, 7, 8};
      uint64_t cached = 0;
      const kvc_status_t st = kvc_sequence_add(cache, next, tokens, 1 + (seed >> 8) % 8, NULL,
                                               NULL, &cached);
      if (n == 6) {
        assert_int_equal(st, KVC_ERR_OUT_OF_BLOCKS);
      } else if (st == KVC_OK) {
        live[n++] = next;
      }
      ++next;
    } else if (op == 1) {
      const kvc_status_t st = kvc_sequence_fork(cache, live[(seed >> 8) % n], next);
      if (n == 6) {
        assert_int_equal(st, KVC_ERR_OUT_OF_BLOCKS);
      } else if (st == KVC_OK) {
        live[n++] = next;
      }
      ++next;
    } else if (op == 2) {
      const size_t k = (seed >> 8) % n;
      ok(kvc_sequence_remove(cache, live[k]));
      live[k] = live[--n];
    } else {
      int32_t t = 9;
      (void)kvc_sequence_extend(cache, live[(seed >> 8) % n], &t, 1, NULL);
    }
    ok(kvc_cache_check(cache));
    for (uint32_t r = 0; r < NRES; ++r) assert_int_equal(resource(cache, r).slots_used, n);
    if (n > 0) {
      int32_t slots[64 * NRES];
      ok(kvc_batch_state_slots(cache, live, n, KVC_STATE_ALL, slots));
      for (uint32_t r = 0; r < NRES; ++r)
        for (size_t a = 0; a < n; ++a)
          for (size_t b = a + 1; b < n; ++b)
            assert_int_not_equal(slots[a * NRES + r], slots[b * NRES + r]);
    }
  }
  kvc_cache_destroy(cache);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(jamba_like_describe),
      cmocka_unit_test(nemotron_h_like_describe),
      cmocka_unit_test(conv_without_ssm_is_local),
      cmocka_unit_test(slot_accounting),
      cmocka_unit_test(fork_copies_state_bit_for_bit),
      cmocka_unit_test(budget_split),
      cmocka_unit_test(no_reuse_no_rewind_without_snapshot),
      cmocka_unit_test(unpaged_length_bound),
      cmocka_unit_test(bad_input),
      cmocka_unit_test(randomized),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
