/* The C side of the Python overhead benchmark (bench/python/overhead.py):
 * each function runs one kvcache call (or one decode step's calls) `iters`
 * times in a loop in C, inside one ctypes call, so the Python script can
 * time the same work with and without the Python layer in the same
 * process. Not part of the library; built by the script with cc. */
#include <stddef.h>
#include <stdint.h>

#include "kvcache/kvcache.h"

static volatile uint64_t sink;

/* kvc_cache_describe into a fresh struct, as the binding does. */
int loop_describe(const kvc_cache_t *cache, int64_t iters) {
  uint64_t acc = 0;
  for (int64_t i = 0; i < iters; i++) {
    kvc_cache_desc_t d;
    kvc_cache_desc_init(&d);
    if (kvc_cache_describe(cache, &d) != KVC_OK) return -1;
    acc += d.num_blocks;
  }
  sink = acc;
  return 0;
}

/* Adds a (cached) prompt as sequence `id` and removes it again. */
int loop_add_remove(kvc_cache_t *cache, uint64_t id, const int32_t *tokens, size_t n,
                    int64_t iters) {
  uint64_t acc = 0;
  for (int64_t i = 0; i < iters; i++) {
    uint64_t cached = 0;
    if (kvc_sequence_add(cache, id, tokens, n, NULL, NULL, &cached) != KVC_OK) return -1;
    if (kvc_sequence_remove(cache, id) != KVC_OK) return -2;
    acc += cached;
  }
  sink = acc;
  return 0;
}

/* `iters` decode steps of `count` sequences: one token each
 * (kvc_batch_extend), the new slots, the padded block table and the
 * lengths; then, with `commit` set, a commit of each sequence whose last
 * block just filled (an engine publishes blocks as they fill). */
int loop_decode_steps(kvc_cache_t *cache, const uint64_t *ids, const int32_t *tokens,
                      size_t count, int64_t *slots, int32_t *table, size_t max_blocks,
                      int32_t *lengths, uint32_t tokens_per_block, int commit, int64_t iters) {
  for (int64_t i = 0; i < iters; i++) {
    size_t num_slots = 0, need = 0;
    if (kvc_batch_extend(cache, ids, tokens, count, NULL) != KVC_OK) return -1;
    if (kvc_batch_slot_mapping(cache, 0, ids, count, slots, count, &num_slots, NULL) != KVC_OK)
      return -2;
    if (kvc_batch_block_table(cache, 0, ids, count, table, max_blocks, -1, &need) != KVC_OK)
      return -3;
    if (kvc_batch_sequence_lengths(cache, ids, count, lengths) != KVC_OK) return -4;
    if (commit)
      for (size_t s = 0; s < count; s++)
        if (lengths[s] % (int32_t)tokens_per_block == 0 &&
            kvc_sequence_commit(cache, ids[s], (uint64_t)lengths[s]) != KVC_OK)
          return -5;
  }
  return 0;
}
