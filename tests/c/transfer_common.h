/* Shared by test_transfer.c and transfer_peer.c: a cache of a fixed shape,
 * the bytes a block holds (derived from its position and tokens) and the
 * block addresses, through the public header only. */
#ifndef KVC_TRANSFER_COMMON_H
#define KVC_TRANSFER_COMMON_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <kvcache/kvcache.h>

#define XT_LAYERS 2
#define XT_HEADS 2
#define XT_DIM 8

/* A CPU cache: XT_LAYERS layers of XT_HEADS x XT_DIM, `tpb` tokens per
 * block, room for `max_tokens` tokens; NULL on failure. */
static inline kvc_cache_t *xt_cache(kvc_dtype_t dtype, uint32_t tpb, uint64_t max_tokens) {
  kvc_config_t *c = NULL;
  kvc_cache_t *cache = NULL;
  if (kvc_config_create(&c) != KVC_OK) return NULL;
  if (kvc_config_set_num_layers(c, XT_LAYERS) == KVC_OK &&
      kvc_config_set_kv_heads(c, XT_HEADS) == KVC_OK &&
      kvc_config_set_head_dim(c, XT_DIM) == KVC_OK && kvc_config_set_dtype(c, dtype) == KVC_OK &&
      kvc_config_set_tokens_per_block(c, tpb) == KVC_OK &&
      kvc_config_set_max_tokens(c, max_tokens) == KVC_OK)
    (void)kvc_cache_create(c, &cache);
  kvc_config_destroy(c);
  return cache;
}

/* The prompt of test `seed`: n deterministic tokens. */
static inline void xt_tokens(uint32_t seed, int32_t *tokens, size_t n) {
  uint32_t x = seed * 2654435761u + 1u;
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    tokens[i] = (int32_t)(x % 32000u);
  }
}

/* Byte i of the block at position b of a prompt whose block starts with
 * `first_token`. */
static inline unsigned char xt_byte(uint64_t b, int32_t first_token, uint64_t i) {
  uint32_t x = (uint32_t)b * 40503u ^ (uint32_t)first_token * 2246822519u ^ (uint32_t)i * 97u;
  x ^= x >> 15, x *= 2654435761u, x ^= x >> 13;
  return (unsigned char)x;
}

/* Bytes of one block of group 0 (every layer of the group). */
static inline uint64_t xt_block_bytes(const kvc_cache_t *cache) {
  kvc_group_desc_t g = KVC_GROUP_DESC_INIT;
  if (kvc_cache_describe_group(cache, 0, &g) != KVC_OK) return 0;
  return g.block_bytes;
}

/* Block `id` of group 0: its first layer's view (the group's block is
 * block_bytes contiguous bytes from there). */
static inline unsigned char *xt_block(const kvc_cache_t *cache, int32_t id) {
  kvc_layer_view_t v = KVC_LAYER_VIEW_INIT;
  if (kvc_cache_layer_view(cache, 0, &v) != KVC_OK) return NULL;
  return (unsigned char *)v.base + (uint64_t)id * v.block_stride;
}

static inline void xt_fill(const kvc_cache_t *cache, int32_t id, uint64_t b, const int32_t *tokens,
                    uint32_t tpb) {
  unsigned char *p = xt_block(cache, id);
  const uint64_t n = xt_block_bytes(cache);
  for (uint64_t i = 0; i < n; ++i) p[i] = xt_byte(b, tokens[b * tpb], i);
}

/* 0 when block `id` holds position b's bytes, else the first wrong byte + 1. */
static inline uint64_t xt_check(const kvc_cache_t *cache, int32_t id, uint64_t b, const int32_t *tokens,
                         uint32_t tpb) {
  const unsigned char *p = xt_block(cache, id);
  const uint64_t n = xt_block_bytes(cache);
  for (uint64_t i = 0; i < n; ++i)
    if (p[i] != xt_byte(b, tokens[b * tpb], i)) return i + 1;
  return 0;
}

#endif /* KVC_TRANSFER_COMMON_H */
