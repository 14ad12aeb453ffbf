/* An old client: compiled against the committed snapshot of the baseline
 * headers (tests/abi/baseline/include), run against the freshly built
 * library. It crosses every transparent struct three ways: at the size the
 * baseline knew, at an older smaller size (only the known prefix is written
 * or read; the rest is defaulted), and at a larger size from a "newer"
 * client (an output struct's unknown tail is zeroed; an input struct's
 * unknown tail must be zero, else the call is rejected). kvc_extra_key_t
 * has no struct_size: it is an array element and its layout is frozen. */
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

/* A "newer" caller's struct size: larger than this library's structs will
 * ever grow to in one ABI major. A newer library may know some of the bytes
 * between the old size and this one, so tests look only at the far end. */
#define NEWER 512u

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
  /* Newer, larger struct (NEWER bytes, more than any library knows): the
   * tail the library does not know comes back zeroed, and nothing past
   * struct_size is touched. */
  memset(buf, 0xEE, sizeof buf);
  *(uint32_t *)(void *)buf = NEWER;
  EXPECT(fn(cache, index, buf) == KVC_OK);
  for (size_t i = NEWER - 32; i < NEWER; ++i) EXPECT(buf[i] == 0);
  for (size_t i = NEWER; i < NEWER + 32; ++i) EXPECT(buf[i] == 0xEE);
  /* No size at all is an error that names the field. */
  *(uint32_t *)(void *)buf = 0;
  EXPECT(fn(cache, index, buf) == KVC_ERR_INVALID_ARGUMENT);
  EXPECT(strstr(kvc_last_error_message(), "struct_size") != NULL);
  printf("  %-22s baseline size %3zu, older size %3zu, newer size %3u: ok\n", name, full, older,
         NEWER);
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
static kvc_status_t seq_desc(const kvc_cache_t *c, uint32_t i, void *out) {
  return kvc_sequence_describe(c, i, (kvc_sequence_desc_t *)out);
}
static kvc_status_t stats(const kvc_cache_t *c, uint32_t i, void *out) {
  (void)i;
  return kvc_cache_get_stats(c, (kvc_cache_stats_t *)out);
}

/* Input structs. An older caller's smaller struct: the bytes past its size
 * hold garbage (0xEE) that the library must not read. A newer caller's
 * larger struct: accepted when the unknown tail is zero, rejected with a
 * message when it is not. */
static unsigned char in_buf[1024];

static void *older_input(const void *value, size_t older) {
  memset(in_buf, 0xEE, sizeof in_buf);
  memcpy(in_buf, value, older);
  *(uint32_t *)(void *)in_buf = (uint32_t)older;
  return in_buf;
}

static void *newer_input(const void *value, size_t full, int poison_tail) {
  memset(in_buf, 0, sizeof in_buf);
  memcpy(in_buf, value, full);
  *(uint32_t *)(void *)in_buf = NEWER;
  if (poison_tail) in_buf[NEWER - 8] = 1;
  return in_buf;
}

#define EXPECT_REJECTED_NEWER(call)                                                  \
  do {                                                                               \
    EXPECT((call) == KVC_ERR_INVALID_ARGUMENT);                                      \
    EXPECT(strstr(kvc_last_error_message(), "newer kvcache") != NULL);               \
  } while (0)

static const int32_t prompt[40] = {5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18,
                                   19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32,
                                   33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44};

/* kvc_sequence_options_t: an older struct that knows only the priorities. */
static void cross_sequence_options(kvc_cache_t *cache) {
  kvc_sequence_options_t o = KVC_SEQUENCE_OPTIONS_INIT;
  o.prompt_priority = 90;
  o.decode_priority = 10;
  const size_t older = offsetof(kvc_sequence_options_t, has_lora);
  uint64_t cached = 99;
  EXPECT(kvc_sequence_add(cache, 1, prompt, 40, older_input(&o, older), NULL, &cached) ==
         KVC_OK);
  EXPECT(cached == 0);
  kvc_sequence_desc_t d = KVC_SEQUENCE_DESC_INIT;
  EXPECT(kvc_sequence_describe(cache, 1, &d) == KVC_OK);
  EXPECT(d.prompt_priority == 90 && d.decode_priority == 10 && d.num_tokens == 40);
  EXPECT(kvc_sequence_commit(cache, 1, 40) == KVC_OK);
  /* The garbage past the old size was not read as a salt: an add with no
   * options (no salt) reuses the committed prefix. */
  EXPECT(kvc_sequence_add(cache, 2, prompt, 40, NULL, NULL, &cached) == KVC_OK);
  EXPECT(cached == 32); /* two full blocks of 16; the last token recomputed */
  EXPECT(kvc_sequence_add(cache, 3, prompt, 40, newer_input(&o, sizeof o, 0), NULL, &cached) ==
         KVC_OK);
  EXPECT_REJECTED_NEWER(
      kvc_sequence_add(cache, 4, prompt, 40, newer_input(&o, sizeof o, 1), NULL, &cached));
  EXPECT(kvc_sequence_describe(cache, 4, &d) == KVC_ERR_NOT_FOUND); /* nothing added */
  printf("  %-22s baseline size %3zu, older size %3zu accepted, newer size %3u: zero tail "
         "accepted, non-zero tail rejected\n",
         "kvc_sequence_options_t", sizeof o, older, NEWER);
}

/* kvc_store_args_t: an older struct without the fp8 scales. */
static void cross_store_args(kvc_cache_t *cache) {
  kvc_layer_view_t v = KVC_LAYER_VIEW_INIT;
  EXPECT(kvc_cache_layer_view(cache, 0, &v) == KVC_OK);
  const size_t row = (size_t)v.kv_heads * v.head_dim;
  float key[2 * 64], value[2 * 64];
  for (size_t i = 0; i < row; ++i) {
    key[i] = (float)i;
    value[i] = -(float)i;
  }
  const int64_t slot[1] = {3}; /* block 0, token 3 */
  kvc_store_args_t a = KVC_STORE_ARGS_INIT;
  a.layer = 0;
  a.num_tokens = 1;
  a.src_dtype = KVC_DTYPE_F32;
  a.key = key;
  a.value = value;
  a.slot_mapping = slot;
  const size_t older = offsetof(kvc_store_args_t, k_scale);
  EXPECT(kvc_store_kv(cache, older_input(&a, older), NULL) == KVC_OK);
  const float *stored = (const float *)(const void *)((const char *)v.base + 3 * v.token_stride);
  EXPECT(memcmp(stored, key, row * sizeof(float)) == 0);
  EXPECT(memcmp((const char *)stored + v.kv_stride, value, row * sizeof(float)) == 0);
  EXPECT(kvc_store_kv(cache, newer_input(&a, sizeof a, 0), NULL) == KVC_OK);
  EXPECT_REJECTED_NEWER(kvc_store_kv(cache, newer_input(&a, sizeof a, 1), NULL));
  printf("  %-22s baseline size %3zu, older size %3zu accepted, newer size %3u: zero tail "
         "accepted, non-zero tail rejected\n",
         "kvc_store_args_t", sizeof a, older, NEWER);
}

/* kvc_decode_args_t: an older struct without the fp8 scales and workspace. */
static void cross_decode_args(kvc_cache_t *cache) {
  float q[4 * 64], out[4 * 64];
  for (size_t i = 0; i < 4 * 64; ++i) q[i] = (float)(i % 7) * 0.125f;
  const int32_t lens[1] = {4};
  const int32_t table[1] = {0};
  kvc_decode_args_t a = KVC_DECODE_ARGS_INIT;
  a.layer = 0;
  a.batch = 1;
  a.q_heads = 4;
  a.q_dtype = KVC_DTYPE_F32;
  a.query = q;
  a.out = out;
  a.seq_lens = lens;
  a.block_table = table;
  a.table_stride = 1;
  a.max_seq_len = 4;
  const size_t older = offsetof(kvc_decode_args_t, k_scale);
  EXPECT(kvc_decode_attention(cache, older_input(&a, older), NULL) == KVC_OK);
  EXPECT(kvc_decode_attention(cache, newer_input(&a, sizeof a, 0), NULL) == KVC_OK);
  EXPECT_REJECTED_NEWER(kvc_decode_attention(cache, newer_input(&a, sizeof a, 1), NULL));
  uint64_t bytes = 1;
  EXPECT(kvc_decode_workspace_size(cache, older_input(&a, older), &bytes) == KVC_OK);
  EXPECT(bytes == 0); /* a CPU cache needs none */
  printf("  %-22s baseline size %3zu, older size %3zu accepted, newer size %3u: zero tail "
         "accepted, non-zero tail rejected\n",
         "kvc_decode_args_t", sizeof a, older, NEWER);
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
  EXPECT(kvc_config_set_dtype(cfg, KVC_DTYPE_F32) == KVC_OK);
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
  EXPECT(v.head_dim == 64 && v.kv_heads == 2 && v.token_stride == 2 * 64 * 4);

  cross("kvc_cache_desc_t", cache, describe, 0, sizeof(kvc_cache_desc_t),
        offsetof(kvc_cache_desc_t, num_layers));
  cross("kvc_group_desc_t", cache, group, 0, sizeof(kvc_group_desc_t),
        offsetof(kvc_group_desc_t, num_layers));
  cross("kvc_pool_desc_t", cache, pool, 0, sizeof(kvc_pool_desc_t),
        offsetof(kvc_pool_desc_t, num_blocks));
  cross("kvc_layer_view_t", cache, view, 1, sizeof(kvc_layer_view_t),
        offsetof(kvc_layer_view_t, base));

  cross_sequence_options(cache);
  cross_store_args(cache);
  cross_decode_args(cache);
  cross("kvc_sequence_desc_t", cache, seq_desc, 1, sizeof(kvc_sequence_desc_t),
        offsetof(kvc_sequence_desc_t, num_tokens));
  cross("kvc_cache_stats_t", cache, stats, 0, sizeof(kvc_cache_stats_t),
        offsetof(kvc_cache_stats_t, cached_blocks));

  kvc_cache_destroy(cache);
  printf("%d passed, %d failed\n", checks - failures, failures);
  return failures == 0 ? 0 : 1;
}
