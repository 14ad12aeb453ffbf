/* What test_remote_tier.c and its peer process (remote_tier_peer.c) share:
 * one model (1 layer, K+V, 1 head, dim 4, f32, 4 tokens a block), the KV
 * oracle (bytes are a function of token and position) and the steps that
 * write or check a prompt's KV through the public API. */
#ifndef KVC_REMOTE_TIER_COMMON_H
#define KVC_REMOTE_TIER_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <kvcache/kvcache.h>

enum { RT_T = 4, RT_MAX_BLOCKS = 8 };

static unsigned char rt_byte(int32_t token, uint64_t i) {
  return (unsigned char)((uint32_t)token * 131u + (uint32_t)i * 7u + 1u);
}

/* A config with a remote tier at `url` (NULL: none). */
static kvc_config_t *rt_config(const char *url, uint64_t max_blocks) {
  kvc_config_t *c = NULL;
  if (kvc_config_create(&c) != KVC_OK) return NULL;
  kvc_config_set_num_layers(c, 1);
  kvc_config_set_kv_heads(c, 1);
  kvc_config_set_head_dim(c, 4);
  kvc_config_set_dtype(c, KVC_DTYPE_F32);
  kvc_config_set_tokens_per_block(c, RT_T);
  kvc_config_set_max_tokens(c, max_blocks * RT_T);
  kvc_config_set_partial_reuse(c, false);
  if (url != NULL && kvc_config_set_remote_cache(c, url, "c-test", 1 << 20) != KVC_OK) {
    kvc_config_destroy(c);
    return NULL;
  }
  return c;
}

/* Writes (check == 0) or compares the KV of tokens [from, to) of `id`.
 * Returns the first position that differs, or -1. */
static long rt_kv(kvc_cache_t *cache, uint64_t id, const int32_t *tokens, size_t from, size_t to,
                  int check) {
  kvc_layer_view_t v = KVC_LAYER_VIEW_INIT;
  if (kvc_cache_layer_view(cache, 0, &v) != KVC_OK) return 0;
  int32_t ids[RT_MAX_BLOCKS];
  size_t n = 0;
  if (kvc_sequence_block_ids(cache, id, 0, ids, RT_MAX_BLOCKS, &n) != KVC_OK) return 0;
  for (size_t p = from; p < to; ++p)
    for (uint32_t k = 0; k < 2; ++k) {
      unsigned char *row = (unsigned char *)v.base + (uint64_t)ids[p / RT_T] * v.block_stride +
                           k * v.kv_stride + (p % RT_T) * v.token_stride;
      for (uint64_t i = 0; i < 16; ++i) {
        const unsigned char want = rt_byte(tokens[p], i + 16 * k + 32 * p);
        if (!check) row[i] = want;
        else if (row[i] != want) return (long)p;
      }
    }
  return -1;
}

/* Adds a prompt, checks the reused KV, writes the rest, commits, removes.
 * Returns the cached tokens, or -1 (with a message on stderr). */
static long rt_cache_prompt(kvc_cache_t *cache, uint64_t id, const int32_t *t, size_t n,
                            const char *salt) {
  uint64_t cached = 0;
  kvc_sequence_options_t o = KVC_SEQUENCE_OPTIONS_INIT;
  if (salt != NULL) {
    o.salt = salt;
    o.salt_size = strlen(salt);
  }
  if (kvc_sequence_add(cache, id, t, n, salt != NULL ? &o : NULL, NULL, &cached) != KVC_OK) {
    fprintf(stderr, "add: %s\n", kvc_last_error_message());
    return -1;
  }
  const long bad = rt_kv(cache, id, t, 0, cached, 1);
  if (bad >= 0) {
    fprintf(stderr, "reused KV differs at position %ld\n", bad);
    return -1;
  }
  rt_kv(cache, id, t, cached, n, 0);
  if (kvc_sequence_commit(cache, id, n) != KVC_OK || kvc_sequence_remove(cache, id) != KVC_OK) {
    fprintf(stderr, "commit/remove: %s\n", kvc_last_error_message());
    return -1;
  }
  return (long)cached;
}

#endif /* KVC_REMOTE_TIER_COMMON_H */
