/* Block export/import between two caches (transfer.h): bytes copied by
 * host memcpy through the addresses the export and the import name, then
 * reused bit for bit on the receiver; refusals of another prompt, salt or
 * geometry and of damaged key blobs, each with nothing changed; aborts;
 * holds that outlive eviction pressure and the sequence; a receiver that
 * already holds the first blocks; a second process as the decode side.
 * Sharing pool memory is test_pool_share.c's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "kvc_test_assert.h"
#include "transfer_helpers.h"
#include "transfer_common.h"

#define ok(call) assert_int_equal((call), KVC_OK)
#define TPB 4
#define BLOCKS 10
#define PROMPT (BLOCKS * TPB + 2) /* ten full blocks and a partial one */

/* Adds sequence `id` with the prompt, writes every block's bytes and
 * commits the whole prompt. */
static void prefill(kvc_cache_t *cache, uint64_t id, const int32_t *tokens, size_t n,
                    const kvc_sequence_options_t *opts) {
  uint64_t cached = 0;
  ok(kvc_sequence_add(cache, id, tokens, n, opts, NULL, &cached));
  int32_t ids[512];
  size_t count = 0;
  ok(kvc_sequence_block_ids(cache, id, 0, ids, 512, &count));
  for (size_t b = cached / TPB; b < n / TPB; ++b) xt_fill(cache, ids[b], b, tokens, TPB);
  ok(kvc_sequence_commit(cache, id, n));
}

static void keys_of(const kvc_export_t *exp, unsigned char **buf, size_t *size) {
  assert_int_equal(kvc_export_keys(exp, NULL, 0, size), KVC_ERR_BUFFER_TOO_SMALL);
  *buf = malloc(*size);
  ok(kvc_export_keys(exp, *buf, *size, size));
}

/* Copies export blocks [first_block, num_blocks) into the import's blocks. */
static uint64_t copy_blocks(const kvc_cache_t *from, const kvc_export_t *exp, const kvc_cache_t *to,
                            const kvc_import_t *imp) {
  kvc_transfer_desc_t d = KVC_TRANSFER_DESC_INIT;
  ok(kvc_import_describe(imp, &d));
  int32_t src[512], dst[512];
  size_t ns = 0, nd = 0;
  ok(kvc_export_block_ids(exp, 0, src, 512, &ns));
  ok(kvc_import_block_ids(imp, 0, dst, 512, &nd));
  assert_int_equal(ns, d.num_blocks);
  assert_int_equal(nd, d.num_blocks - d.first_block);
  const uint64_t bytes = xt_block_bytes(from);
  assert_int_equal(bytes, xt_block_bytes(to));
  for (size_t i = 0; i < nd; ++i)
    memcpy(xt_block(to, dst[i]), xt_block(from, src[d.first_block + i]), bytes);
  return nd;
}

/* Every block of sequence `id` on `cache` holds the prompt's bytes. */
static void assert_bytes(const kvc_cache_t *cache, uint64_t id, const int32_t *tokens,
                         size_t blocks) {
  int32_t ids[512];
  size_t count = 0;
  ok(kvc_sequence_block_ids(cache, id, 0, ids, 512, &count));
  assert_true(count >= blocks);
  for (size_t b = 0; b < blocks; ++b) {
    const uint64_t bad = xt_check(cache, ids[b], b, tokens, TPB);
    if (bad != 0) fail_msg("block %zu (id %d) differs at byte %llu", b, ids[b],
                           (unsigned long long)(bad - 1));
  }
}

static void test_round_trip_reuses_every_block_bit_for_bit(void **state) {
  (void)state;
  kvc_cache_t *a = xt_cache(KVC_DTYPE_F32, TPB, 64 * TPB);
  kvc_cache_t *b = xt_cache(KVC_DTYPE_F32, TPB, 64 * TPB);
  assert_non_null(a);
  assert_non_null(b);
  int32_t tokens[PROMPT];
  xt_tokens(1, tokens, PROMPT);
  prefill(a, 1, tokens, PROMPT, NULL);

  kvc_export_t *exp = NULL;
  ok(kvc_cache_export_sequence(a, 1, 0, &exp));
  kvc_transfer_desc_t ed = KVC_TRANSFER_DESC_INIT;
  ok(kvc_export_describe(exp, &ed));
  assert_int_equal(ed.num_blocks, BLOCKS);
  assert_int_equal(ed.num_tokens, BLOCKS * TPB);
  assert_int_equal(ed.first_block, 0);
  assert_int_equal(ed.num_groups, 1);
  assert_int_equal(ed.seq_id, 1);
  assert_int_equal(ed.tokens_per_block, TPB);
  unsigned char *keys = NULL;
  size_t keys_size = 0;
  keys_of(exp, &keys, &keys_size);
  assert_int_equal(keys_size, ed.keys_bytes);
  assert_int_equal(keys_size, 64 + BLOCKS * (4 * TPB + 8) + 8);
  assert_memory_equal(keys, "KVCXFERK", 8);
  /* The blob's tokens, little endian. */
  for (size_t i = 0; i < BLOCKS * TPB; ++i) {
    const unsigned char *p = keys + 64 + 4 * i;
    const uint32_t t = p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    assert_int_equal((int32_t)t, tokens[i]);
  }
  /* The portable hashes are those kvc_block_hashes computes. */
  kvc_config_t *cfg = NULL;
  ok(kvc_config_create(&cfg));
  ok(kvc_config_set_tokens_per_block(cfg, TPB));
  uint64_t hashes[BLOCKS];
  size_t nh = 0;
  ok(kvc_block_hashes(cfg, tokens, BLOCKS * TPB, NULL, hashes, BLOCKS, &nh));
  kvc_config_destroy(cfg);
  for (size_t i = 0; i < BLOCKS; ++i) {
    const unsigned char *p = keys + 64 + 4 * BLOCKS * TPB + 8 * i;
    uint64_t h = 0;
    for (int k = 7; k >= 0; --k) h = h << 8 | p[k];
    assert_true(h == hashes[i]);
  }

  kvc_import_t *imp = NULL;
  ok(kvc_cache_import_begin(b, 7, tokens, PROMPT, NULL, keys, keys_size, &imp));
  kvc_transfer_desc_t id = KVC_TRANSFER_DESC_INIT;
  ok(kvc_import_describe(imp, &id));
  assert_int_equal(id.first_block, 0);
  assert_int_equal(id.num_blocks, BLOCKS);
  assert_int_equal(id.seq_id, 7);
  assert_int_equal(id.keys_bytes, 0);
  int32_t small[2];
  size_t count = 0;
  assert_fails(kvc_import_block_ids(imp, 0, small, 2, &count), KVC_ERR_BUFFER_TOO_SMALL,
               "ids holds 2 entries but the import has 10 blocks");
  assert_int_equal(count, BLOCKS);
  assert_fails(kvc_import_block_ids(imp, 1, small, 2, &count), KVC_ERR_INVALID_ARGUMENT,
               "group must be < num_groups (1), got 1");
  const uint64_t written = copy_blocks(a, exp, b, imp);
  assert_int_equal(written, BLOCKS);
  ok(kvc_import_complete(imp, written));
  kvc_import_destroy(imp);
  kvc_export_release(exp);

  /* The import's sequence holds the imported tokens, committed. */
  kvc_sequence_desc_t sd = KVC_SEQUENCE_DESC_INIT;
  ok(kvc_sequence_describe(b, 7, &sd));
  assert_int_equal(sd.num_tokens, PROMPT);
  assert_int_equal(sd.committed_tokens, BLOCKS * TPB);
  assert_bytes(b, 7, tokens, BLOCKS);
  ok(kvc_sequence_remove(b, 7));
  /* An add of the same prompt reuses every block, bit for bit. */
  uint64_t cached = 0;
  ok(kvc_sequence_add(b, 8, tokens, PROMPT, NULL, NULL, &cached));
  assert_int_equal(cached, BLOCKS * TPB);
  assert_bytes(b, 8, tokens, BLOCKS);
  ok(kvc_cache_check(a));
  ok(kvc_cache_check(b));
  free(keys);
  kvc_cache_destroy(a);
  kvc_cache_destroy(b);
}

/* Exports blocks of `tokens` on a fresh cache; the blob into *keys. */
static void export_keys(const int32_t *tokens, const kvc_sequence_options_t *opts,
                        unsigned char **keys, size_t *size) {
  kvc_cache_t *a = xt_cache(KVC_DTYPE_F32, TPB, 64 * TPB);
  prefill(a, 1, tokens, PROMPT, opts);
  kvc_export_t *exp = NULL;
  ok(kvc_cache_export_sequence(a, 1, 0, &exp));
  keys_of(exp, keys, size);
  kvc_export_release(exp);
  kvc_cache_destroy(a);
}

static void test_refuses_another_prompt_salt_or_geometry(void **state) {
  (void)state;
  int32_t tokens[PROMPT];
  xt_tokens(2, tokens, PROMPT);
  unsigned char *keys = NULL;
  size_t size = 0;
  export_keys(tokens, NULL, &keys, &size);
  kvc_cache_t *b = xt_cache(KVC_DTYPE_F32, TPB, 64 * TPB);
  const kvc_cache_stats_t before = stats_of(b);
  kvc_import_t *imp = NULL;

  /* A token of block 3 differs. */
  int32_t other[PROMPT];
  memcpy(other, tokens, sizeof other);
  other[3 * TPB + 1] += 1;
  assert_fails(kvc_cache_import_begin(b, 7, other, PROMPT, NULL, keys, size, &imp),
               KVC_ERR_INVALID_ARGUMENT, "block 3 differs: token 13 is");
  assert_null(imp);
  assert_same_blocks(b, &before);

  /* The receiver's salt (the sender had none). */
  kvc_sequence_options_t salted = KVC_SEQUENCE_OPTIONS_INIT;
  salted.salt = "tenant-b";
  salted.salt_size = 8;
  assert_fails(kvc_cache_import_begin(b, 7, tokens, PROMPT, &salted, keys, size, &imp),
               KVC_ERR_INVALID_ARGUMENT,
               "scope check differs from the one computed from options over its 40 tokens "
               "(another cache salt, LoRA id or extra keys)");
  assert_same_blocks(b, &before);

  /* A prompt shorter than the blob. */
  assert_fails(kvc_cache_import_begin(b, 7, tokens, BLOCKS * TPB - 1, NULL, keys, size, &imp),
               KVC_ERR_INVALID_ARGUMENT, "num_tokens (39) is shorter than the 40 tokens");

  /* Truncated, corrupted, another version. */
  assert_fails(kvc_cache_import_begin(b, 7, tokens, PROMPT, NULL, keys, size - 1, &imp),
               KVC_ERR_INVALID_ARGUMENT, "truncated");
  assert_fails(kvc_cache_import_begin(b, 7, tokens, PROMPT, NULL, keys, 10, &imp),
               KVC_ERR_INVALID_ARGUMENT, "truncated");
  unsigned char *bad = malloc(size);
  memcpy(bad, keys, size);
  bad[64 + 4 * BLOCKS * TPB + 5] ^= 1; /* a portable hash byte */
  assert_fails(kvc_cache_import_begin(b, 7, tokens, PROMPT, NULL, bad, size, &imp),
               KVC_ERR_INVALID_ARGUMENT, "checksum");
  memcpy(bad, keys, size);
  bad[32 + 7] ^= 1; /* a scope check byte */
  assert_fails(kvc_cache_import_begin(b, 7, tokens, PROMPT, NULL, bad, size, &imp),
               KVC_ERR_INVALID_ARGUMENT, "checksum");
  memcpy(bad, keys, size);
  bad[64 + 4 * 5] ^= 1; /* a token of block 1 */
  assert_fails(kvc_cache_import_begin(b, 7, tokens, PROMPT, NULL, bad, size, &imp),
               KVC_ERR_INVALID_ARGUMENT, "checksum");
  memcpy(bad, keys, size);
  bad[8] = 3;
  assert_fails(kvc_cache_import_begin(b, 7, tokens, PROMPT, NULL, bad, size, &imp),
               KVC_ERR_INVALID_ARGUMENT,
               "the key blob has format version 3; this cache reads version 2");
  memcpy(bad, keys, size);
  bad[8] = 1; /* the format of 0.3.0's first transfer commits */
  assert_fails(kvc_cache_import_begin(b, 7, tokens, PROMPT, NULL, bad, size, &imp),
               KVC_ERR_INVALID_ARGUMENT,
               "the key blob has format version 1 (a chain digest per block); this cache reads "
               "version 2");
  memcpy(bad, keys, size);
  bad[0] = 'X';
  assert_fails(kvc_cache_import_begin(b, 7, tokens, PROMPT, NULL, bad, size, &imp),
               KVC_ERR_INVALID_ARGUMENT, "not a kvcache key blob");
  free(bad);
  assert_fails(kvc_cache_import_begin(b, 7, tokens, PROMPT, NULL, NULL, size, &imp),
               KVC_ERR_INVALID_ARGUMENT, "keys must not be NULL");
  assert_same_blocks(b, &before);
  assert_null(imp);
  kvc_cache_destroy(b);

  /* Another dtype, another tokens_per_block. */
  kvc_cache_t *f16 = xt_cache(KVC_DTYPE_F16, TPB, 64 * TPB);
  assert_fails(kvc_cache_import_begin(f16, 7, tokens, PROMPT, NULL, keys, size, &imp),
               KVC_ERR_INVALID_ARGUMENT, "geometry fingerprint");
  kvc_cache_destroy(f16);
  kvc_cache_t *t8 = xt_cache(KVC_DTYPE_F32, 2 * TPB, 64 * TPB);
  assert_fails(kvc_cache_import_begin(t8, 7, tokens, PROMPT, NULL, keys, size, &imp),
               KVC_ERR_INVALID_ARGUMENT, "tokens_per_block is 4; this cache's is 8");
  kvc_cache_destroy(t8);
  free(keys);

  /* A salted export imports only into the same salt. */
  export_keys(tokens, &salted, &keys, &size);
  kvc_cache_t *c = xt_cache(KVC_DTYPE_F32, TPB, 64 * TPB);
  assert_fails(kvc_cache_import_begin(c, 7, tokens, PROMPT, NULL, keys, size, &imp),
               KVC_ERR_INVALID_ARGUMENT, "another cache salt");
  kvc_sequence_options_t other_salt = salted;
  other_salt.salt = "tenant-c";
  assert_fails(kvc_cache_import_begin(c, 7, tokens, PROMPT, &other_salt, keys, size, &imp),
               KVC_ERR_INVALID_ARGUMENT, "another cache salt");
  ok(kvc_cache_import_begin(c, 7, tokens, PROMPT, &salted, keys, size, &imp));
  kvc_import_destroy(imp); /* aborts */
  assert_int_equal(stats_of(c).num_sequences, 0);
  free(keys);
  kvc_cache_destroy(c);
}

static void test_abort_and_complete_rules(void **state) {
  (void)state;
  int32_t tokens[PROMPT];
  xt_tokens(3, tokens, PROMPT);
  unsigned char *keys = NULL;
  size_t size = 0;
  export_keys(tokens, NULL, &keys, &size);
  kvc_cache_t *b = xt_cache(KVC_DTYPE_F32, TPB, 64 * TPB);
  const kvc_cache_stats_t before = stats_of(b);
  kvc_import_t *imp = NULL;
  ok(kvc_cache_import_begin(b, 7, tokens, PROMPT, NULL, keys, size, &imp));
  assert_int_equal(stats_of(b).num_sequences, 1);
  /* The sequence id is taken while the import is open. */
  kvc_import_t *again = NULL;
  assert_int_equal(kvc_cache_import_begin(b, 7, tokens, PROMPT, NULL, keys, size, &again),
                   KVC_ERR_ALREADY_EXISTS);
  assert_null(again);
  ok(kvc_import_abort(imp));
  assert_same_blocks(b, &before);
  assert_fails(kvc_import_abort(imp), KVC_ERR_INVALID_STATE,
               "kvc_import_abort: the import of sequence 7 is already aborted");
  assert_fails(kvc_import_complete(imp, BLOCKS), KVC_ERR_INVALID_STATE, "already aborted");
  kvc_import_destroy(imp);

  ok(kvc_cache_import_begin(b, 7, tokens, PROMPT, NULL, keys, size, &imp));
  assert_fails(kvc_import_complete(imp, BLOCKS - 1), KVC_ERR_INVALID_ARGUMENT,
               "blocks_written is 9 but the import of sequence 7 expects 10");
  assert_int_equal(stats_of(b).tree_nodes, 0); /* still open, nothing published */
  ok(kvc_import_complete(imp, BLOCKS));
  assert_int_equal(stats_of(b).tree_nodes, BLOCKS);
  assert_fails(kvc_import_complete(imp, BLOCKS), KVC_ERR_INVALID_STATE, "already completed");
  assert_fails(kvc_import_abort(imp), KVC_ERR_INVALID_STATE, "already completed");
  kvc_import_destroy(imp);
  kvc_import_destroy(NULL);
  kvc_export_release(NULL);
  /* Completed: the sequence stays, an ordinary one. */
  ok(kvc_sequence_remove(b, 7));
  assert_int_equal(stats_of(b).cached_blocks, BLOCKS + 0);

  /* A sequence removed under an open import. */
  ok(kvc_cache_reset_reuse(b));
  ok(kvc_cache_import_begin(b, 7, tokens, PROMPT, NULL, keys, size, &imp));
  ok(kvc_sequence_remove(b, 7));
  assert_fails(kvc_import_complete(imp, BLOCKS), KVC_ERR_NOT_FOUND, "was removed");
  kvc_import_destroy(imp);
  assert_same_blocks(b, &before);

  /* Out of blocks: refused with nothing changed. */
  kvc_cache_t *tiny = xt_cache(KVC_DTYPE_F32, TPB, 4 * TPB);
  const kvc_cache_stats_t tiny_before = stats_of(tiny);
  assert_int_equal(kvc_cache_import_begin(tiny, 7, tokens, PROMPT, NULL, keys, size, &imp),
                   KVC_ERR_OUT_OF_BLOCKS);
  assert_same_blocks(tiny, &tiny_before);
  kvc_cache_destroy(tiny);
  free(keys);
  kvc_cache_destroy(b);
}

static void test_export_refuses_bad_input(void **state) {
  (void)state;
  kvc_cache_t *a = xt_cache(KVC_DTYPE_F32, TPB, 64 * TPB);
  int32_t tokens[PROMPT];
  xt_tokens(4, tokens, PROMPT);
  const kvc_cache_stats_t empty = stats_of(a);
  kvc_export_t *exp = NULL;
  assert_fails(kvc_cache_export_sequence(a, 1, 0, &exp), KVC_ERR_NOT_FOUND, "sequence 1");
  uint64_t cached = 0;
  ok(kvc_sequence_add(a, 1, tokens, PROMPT, NULL, NULL, &cached));
  assert_fails(kvc_cache_export_sequence(a, 1, 0, &exp), KVC_ERR_INVALID_ARGUMENT,
               "no committed full block");
  ok(kvc_sequence_commit(a, 1, 3 * TPB + 1));
  const kvc_cache_stats_t before = stats_of(a);
  assert_fails(kvc_cache_export_sequence(a, 1, 6, &exp), KVC_ERR_INVALID_ARGUMENT,
               "num_tokens (6) must be a multiple of tokens_per_block (4)");
  assert_fails(kvc_cache_export_sequence(a, 1, 4 * TPB, &exp), KVC_ERR_INVALID_ARGUMENT,
               "num_tokens (16) exceeds the 12 tokens of committed full blocks of sequence 1");
  assert_fails(kvc_cache_export_sequence(a, 1, 0, NULL), KVC_ERR_INVALID_ARGUMENT,
               "out must not be NULL");
  assert_fails(kvc_cache_export_sequence(NULL, 1, 0, &exp), KVC_ERR_INVALID_ARGUMENT,
               "cache must not be NULL");
  assert_null(exp);
  assert_same_blocks(a, &before);
  ok(kvc_cache_export_sequence(a, 1, 2 * TPB, &exp));
  kvc_transfer_desc_t d = KVC_TRANSFER_DESC_INIT;
  ok(kvc_export_describe(exp, &d));
  assert_int_equal(d.num_blocks, 2);
  kvc_export_release(exp);
  ok(kvc_sequence_remove(a, 1));
  assert_fails(kvc_cache_export_sequence(a, 1, 0, &exp), KVC_ERR_NOT_FOUND, "sequence 1");
  ok(kvc_cache_reset_reuse(a));
  assert_int_equal(stats_of(a).free_blocks, empty.free_blocks);
  assert_int_equal(stats_of(a).tree_nodes, 0);
  kvc_cache_destroy(a);
}

static void test_exported_blocks_outlive_eviction_and_remove(void **state) {
  (void)state;
  /* 16 blocks: 4 exported, the other 12 filled again and again. */
  kvc_cache_t *a = xt_cache(KVC_DTYPE_F32, TPB, 16 * TPB);
  int32_t tokens[4 * TPB + 1];
  xt_tokens(5, tokens, 4 * TPB + 1);
  prefill(a, 1, tokens, 4 * TPB + 1, NULL);
  kvc_export_t *exp = NULL;
  ok(kvc_cache_export_sequence(a, 1, 0, &exp));
  ok(kvc_sequence_remove(a, 1));
  assert_int_equal(stats_of(a).in_use_blocks, 4);
  assert_fails(kvc_cache_reset_reuse(a), KVC_ERR_INVALID_STATE, "4 blocks are in use");
  for (uint32_t round = 0; round < 3; ++round) {
    int32_t other[12 * TPB];
    xt_tokens(100 + round, other, 12 * TPB);
    prefill(a, 2, other, 12 * TPB, NULL); /* evicts every cached block but the held ones */
    uint64_t cached = 0;
    assert_int_equal(kvc_sequence_add(a, 3, tokens, TPB + 1, NULL, NULL, &cached),
                     KVC_ERR_OUT_OF_BLOCKS);
    ok(kvc_sequence_remove(a, 2));
  }
  int32_t ids[4];
  size_t count = 0;
  ok(kvc_export_block_ids(exp, 0, ids, 4, &count));
  for (size_t b = 0; b < 4; ++b) assert_int_equal(xt_check(a, ids[b], b, tokens, TPB), 0);
  /* The held blocks are still in the tree: an add reuses them. */
  uint64_t cached = 0;
  ok(kvc_sequence_add(a, 4, tokens, 4 * TPB + 1, NULL, NULL, &cached));
  assert_int_equal(cached, 4 * TPB);
  ok(kvc_sequence_remove(a, 4));
  kvc_export_release(exp);
  assert_int_equal(stats_of(a).in_use_blocks, 0);
  ok(kvc_cache_reset_reuse(a));
  assert_int_equal(stats_of(a).free_blocks, 16);
  ok(kvc_cache_check(a));
  kvc_cache_destroy(a);
}

static void test_partially_cached_receiver_imports_the_rest(void **state) {
  (void)state;
  kvc_cache_t *a = xt_cache(KVC_DTYPE_F32, TPB, 64 * TPB);
  kvc_cache_t *b = xt_cache(KVC_DTYPE_F32, TPB, 64 * TPB);
  int32_t tokens[PROMPT];
  xt_tokens(6, tokens, PROMPT);
  prefill(a, 1, tokens, PROMPT, NULL);
  prefill(b, 1, tokens, 3 * TPB + 1, NULL); /* B holds blocks 0..2 */
  ok(kvc_sequence_remove(b, 1));
  kvc_export_t *exp = NULL;
  ok(kvc_cache_export_sequence(a, 1, 0, &exp));
  unsigned char *keys = NULL;
  size_t size = 0;
  keys_of(exp, &keys, &size);
  kvc_import_t *imp = NULL;
  const kvc_cache_stats_t lookups = stats_of(b);
  ok(kvc_cache_import_begin(b, 9, tokens, PROMPT, NULL, keys, size, &imp));
  /* An import is not a lookup: the reuse counters stay. */
  assert_int_equal(stats_of(b).reused_blocks, lookups.reused_blocks);
  assert_int_equal(stats_of(b).missed_blocks, lookups.missed_blocks);
  kvc_transfer_desc_t d = KVC_TRANSFER_DESC_INIT;
  ok(kvc_import_describe(imp, &d));
  assert_int_equal(d.first_block, 3);
  const uint64_t written = copy_blocks(a, exp, b, imp);
  assert_int_equal(written, BLOCKS - 3);
  assert_fails(kvc_import_complete(imp, BLOCKS), KVC_ERR_INVALID_ARGUMENT, "expects 7");
  ok(kvc_import_complete(imp, written));
  kvc_import_destroy(imp);
  kvc_export_release(exp);
  ok(kvc_sequence_remove(b, 9));
  uint64_t cached = 0;
  ok(kvc_sequence_add(b, 2, tokens, PROMPT, NULL, NULL, &cached));
  assert_int_equal(cached, BLOCKS * TPB);
  assert_bytes(b, 2, tokens, BLOCKS);
  ok(kvc_sequence_remove(b, 2));

  /* A receiver that holds every block writes none. */
  ok(kvc_cache_export_sequence(a, 1, 0, &exp));
  ok(kvc_cache_import_begin(b, 10, tokens, PROMPT, NULL, keys, size, &imp));
  ok(kvc_import_describe(imp, &d));
  assert_int_equal(d.first_block, BLOCKS);
  size_t count = 1;
  ok(kvc_import_block_ids(imp, 0, NULL, 0, &count));
  assert_int_equal(count, 0);
  ok(kvc_import_complete(imp, 0));
  kvc_import_destroy(imp);
  kvc_export_release(exp);
  ok(kvc_cache_check(b));
  free(keys);
  kvc_cache_destroy(a);
  kvc_cache_destroy(b);
}

static void test_destroying_the_cache_releases_open_transfers(void **state) {
  (void)state;
  kvc_cache_t *a = xt_cache(KVC_DTYPE_F32, TPB, 64 * TPB);
  kvc_cache_t *b = xt_cache(KVC_DTYPE_F32, TPB, 64 * TPB);
  int32_t tokens[PROMPT];
  xt_tokens(7, tokens, PROMPT);
  prefill(a, 1, tokens, PROMPT, NULL);
  kvc_export_t *exp = NULL;
  ok(kvc_cache_export_sequence(a, 1, 0, &exp));
  unsigned char *keys = NULL;
  size_t size = 0;
  keys_of(exp, &keys, &size);
  kvc_import_t *imp = NULL;
  ok(kvc_cache_import_begin(b, 7, tokens, PROMPT, NULL, keys, size, &imp));
  kvc_cache_destroy(a);
  kvc_cache_destroy(b);
  /* The handles still describe what they named; the rest is refused. */
  kvc_transfer_desc_t d = KVC_TRANSFER_DESC_INIT;
  ok(kvc_export_describe(exp, &d));
  assert_int_equal(d.num_blocks, BLOCKS);
  ok(kvc_import_describe(imp, &d));
  assert_fails(kvc_import_complete(imp, BLOCKS), KVC_ERR_INVALID_STATE, "cache was destroyed");
  assert_fails(kvc_import_abort(imp), KVC_ERR_INVALID_STATE, "cache was destroyed");
  kvc_export_release(exp);
  kvc_import_destroy(imp);
  free(keys);
}

/* The decode side in another process: transfer_peer reads the blob and the
 * blocks' bytes from a file, imports them into its own cache and checks
 * that an add of the same 4096-token prompt reuses them bit for bit. */
static void test_second_process_imports_a_4096_token_prompt(void **state) {
  (void)state;
  enum { PT = 16, N = 4096 };
  kvc_cache_t *a = xt_cache(KVC_DTYPE_F32, PT, 2 * N);
  int32_t *tokens = malloc(sizeof(int32_t) * (N + 1));
  xt_tokens(4242, tokens, N + 1);
  uint64_t cached = 0;
  ok(kvc_sequence_add(a, 1, tokens, N + 1, NULL, NULL, &cached));
  int32_t *ids = malloc(sizeof(int32_t) * (N / PT + 1));
  size_t count = 0;
  ok(kvc_sequence_block_ids(a, 1, 0, ids, N / PT + 1, &count));
  for (size_t b = 0; b < N / PT; ++b) xt_fill(a, ids[b], b, tokens, PT);
  ok(kvc_sequence_commit(a, 1, N + 1));
  kvc_export_t *exp = NULL;
  ok(kvc_cache_export_sequence(a, 1, 0, &exp));
  ok(kvc_sequence_remove(a, 1)); /* the export holds the blocks */
  unsigned char *keys = NULL;
  size_t size = 0;
  keys_of(exp, &keys, &size);
  ok(kvc_export_block_ids(exp, 0, ids, N / PT, &count));
  assert_int_equal(count, N / PT);
  char path[] = "/tmp/kvc_transfer_XXXXXX";
  const int fd = mkstemp(path);
  assert_true(fd >= 0);
  FILE *f = fdopen(fd, "wb");
  const uint64_t bytes = xt_block_bytes(a), blocks = count, n = N + 1;
  const uint64_t seed = 4242;
  fwrite(&seed, 8, 1, f);
  fwrite(&n, 8, 1, f);
  fwrite(&size, 8, 1, f);
  fwrite(keys, 1, size, f);
  fwrite(&blocks, 8, 1, f);
  fwrite(&bytes, 8, 1, f);
  for (size_t b = 0; b < count; ++b) fwrite(xt_block(a, ids[b]), 1, bytes, f);
  assert_int_equal(fclose(f), 0);
  kvc_export_release(exp);
  const pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    execl(KVC_TRANSFER_PEER, KVC_TRANSFER_PEER, path, (char *)NULL);
    _exit(127);
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  unlink(path);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  free(keys);
  free(ids);
  free(tokens);
  kvc_cache_destroy(a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_round_trip_reuses_every_block_bit_for_bit),
      cmocka_unit_test(test_refuses_another_prompt_salt_or_geometry),
      cmocka_unit_test(test_abort_and_complete_rules),
      cmocka_unit_test(test_export_refuses_bad_input),
      cmocka_unit_test(test_exported_blocks_outlive_eviction_and_remove),
      cmocka_unit_test(test_partially_cached_receiver_imports_the_rest),
      cmocka_unit_test(test_destroying_the_cache_releases_open_transfers),
      cmocka_unit_test(test_second_process_imports_a_4096_token_prompt),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
