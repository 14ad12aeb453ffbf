/* The user program of tests/outside, in C: the reference whose output the
 * Rust, Go, Java and Python versions must print byte for byte.
 *
 * A CPU cache of Llama-3-8B's KV shape (32 layers, 8 KV heads, head dim 128,
 * bf16, 16 tokens per block, 4096 tokens), a 1000-token prompt, a second
 * prompt sharing its first 512 tokens (reused once the first is committed),
 * 10 batched decode steps with their slot mappings, one provoked error
 * (extending a sequence that does not exist), then everything removed and
 * closed. Only integers and the library's own text are printed. */
#include <stdio.h>
#include <kvcache/kvcache.h>

#define CHECK(call)                                                         \
  do {                                                                      \
    kvc_status_t s_ = (call);                                               \
    if (s_ != KVC_OK) {                                                     \
      fprintf(stderr, "%s: %s: %s\n", #call, kvc_status_string(s_),         \
              kvc_last_error_message());                                    \
      return 1;                                                             \
    }                                                                       \
  } while (0)

int main(void) {
  kvc_config_t *cfg;
  CHECK(kvc_config_create(&cfg));
  CHECK(kvc_config_set_num_layers(cfg, 32));
  CHECK(kvc_config_set_kv_heads(cfg, 8));
  CHECK(kvc_config_set_head_dim(cfg, 128));
  CHECK(kvc_config_set_dtype(cfg, KVC_DTYPE_BF16));
  CHECK(kvc_config_set_tokens_per_block(cfg, 16));
  CHECK(kvc_config_set_device(cfg, KVC_DEVICE_CPU, 0));
  CHECK(kvc_config_set_max_tokens(cfg, 4096));
  kvc_cache_t *cache;
  CHECK(kvc_cache_create(cfg, &cache));
  kvc_config_destroy(cfg);

  kvc_cache_desc_t desc = KVC_CACHE_DESC_INIT;
  CHECK(kvc_cache_describe(cache, &desc));
  printf("cache: %u layers in %u group, %u tokens per block, %llu blocks, %llu bytes\n",
         desc.num_layers, desc.num_groups, desc.tokens_per_block,
         (unsigned long long)desc.num_blocks, (unsigned long long)desc.primary_bytes);

  int32_t first[1000], second[1000];
  for (int i = 0; i < 1000; i++) {
    first[i] = 1000 + i;
    second[i] = i < 512 ? first[i] : 5000 + i;
  }
  uint64_t cached = 0;
  CHECK(kvc_sequence_add(cache, 1, first, 1000, NULL, NULL, &cached));
  printf("request 1: 1000 prompt tokens, %llu cached\n", (unsigned long long)cached);
  CHECK(kvc_sequence_commit(cache, 1, 1000));
  CHECK(kvc_sequence_add(cache, 2, second, 1000, NULL, NULL, &cached));
  printf("request 2: 1000 prompt tokens, %llu cached\n", (unsigned long long)cached);
  CHECK(kvc_sequence_commit(cache, 2, 1000));

  uint64_t ids[2] = {1, 2};
  /* The prompts' slots (-1 where cached), then one per decode step. */
  int64_t slots[2000];
  size_t num_slots = 0;
  int32_t new_tokens[2];
  CHECK(kvc_batch_slot_mapping(cache, 0, ids, 2, slots, 2000, &num_slots, new_tokens));
  size_t cached_slots = 0;
  for (size_t i = 0; i < num_slots; i++) cached_slots += slots[i] == -1;
  printf("prompt slots: %llu, %llu of them cached\n", (unsigned long long)num_slots,
         (unsigned long long)cached_slots);
  size_t decode_slots = 0;
  for (int step = 0; step < 10; step++) {
    int32_t next[2] = {7000 + step, 8000 + step};
    CHECK(kvc_batch_extend(cache, ids, next, 2, NULL));
    CHECK(kvc_batch_slot_mapping(cache, 0, ids, 2, slots, 64, &num_slots, new_tokens));
    decode_slots += num_slots;
  }
  int32_t lengths[2];
  CHECK(kvc_batch_sequence_lengths(cache, ids, 2, lengths));
  printf("decode: 10 steps of 2 sequences, %llu slots, lengths %d %d\n",
         (unsigned long long)decode_slots, lengths[0], lengths[1]);

  kvc_cache_stats_t stats = KVC_CACHE_STATS_INIT;
  CHECK(kvc_cache_get_stats(cache, &stats));
  printf("stats: %llu reused blocks, %llu missed blocks, %llu in use, %llu sequences\n",
         (unsigned long long)stats.reused_blocks, (unsigned long long)stats.missed_blocks,
         (unsigned long long)stats.in_use_blocks, (unsigned long long)stats.num_sequences);

  int32_t token = 1;
  kvc_status_t status = kvc_sequence_extend(cache, 99, &token, 1, NULL);
  printf("error: status %d: %s\n", (int)status, kvc_last_error_message());

  CHECK(kvc_sequence_remove(cache, 1));
  CHECK(kvc_sequence_remove(cache, 2));
  CHECK(kvc_cache_get_stats(cache, &stats));
  printf("removed: %llu sequences, %llu cached blocks\n",
         (unsigned long long)stats.num_sequences, (unsigned long long)stats.cached_blocks);
  kvc_cache_destroy(cache);
  printf("closed\n");
  return 0;
}
