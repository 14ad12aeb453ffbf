/* Block transfer (transfer.h): the key blob's scope check (format version
 * 2) decides which receivers' extra keys match the sender's: those
 * overlapping the exported blocks only, each whole; keys past the blocks
 * never matter. Through the public header only; a refusal changes
 * nothing. (test_transfer.c has the rest of the transfer suite.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "kvc_test_assert.h"
#include "transfer_helpers.h"
#include "transfer_common.h"

#define ok(call) assert_int_equal((call), KVC_OK)
#define TPB 4
#define BLOCKS 10
#define PROMPT (BLOCKS * TPB + 2) /* ten full blocks and a partial one */

/* Commits the prompt with `opts` on a fresh cache, exports its ten full
 * blocks; the key blob into *keys (the caller frees it). */
static void export_keys(const int32_t *tokens, const kvc_sequence_options_t *opts,
                        unsigned char **keys, size_t *size) {
  kvc_cache_t *a = xt_cache(KVC_DTYPE_F32, TPB, 64 * TPB);
  assert_non_null(a);
  uint64_t cached = 0;
  ok(kvc_sequence_add(a, 1, tokens, PROMPT, opts, NULL, &cached));
  ok(kvc_sequence_commit(a, 1, PROMPT));
  kvc_export_t *exp = NULL;
  ok(kvc_cache_export_sequence(a, 1, 0, &exp));
  assert_int_equal(kvc_export_keys(exp, NULL, 0, size), KVC_ERR_BUFFER_TOO_SMALL);
  *keys = malloc(*size);
  ok(kvc_export_keys(exp, *keys, *size, size));
  kvc_export_release(exp);
  kvc_cache_destroy(a);
}

/* The key blob's scope check covers the extra keys overlapping the exported
 * blocks (tokens [0, 40)) only: keys past them (the partial block's) may
 * differ between sender and receiver; a key inside them must be equal. */
static void test_extra_keys_count_inside_the_exported_blocks_only(void **state) {
  (void)state;
  int32_t tokens[PROMPT];
  xt_tokens(9, tokens, PROMPT);
  const kvc_extra_key_t past = {BLOCKS * TPB, 2, "img-a", 5};
  kvc_sequence_options_t sender = KVC_SEQUENCE_OPTIONS_INIT;
  sender.extra_keys = &past;
  sender.num_extra_keys = 1;
  unsigned char *keys = NULL;
  size_t size = 0;
  export_keys(tokens, &sender, &keys, &size);
  kvc_cache_t *b = xt_cache(KVC_DTYPE_F32, TPB, 64 * TPB);
  const kvc_cache_stats_t before = stats_of(b);
  kvc_import_t *imp = NULL;
  /* None, or another key past the blocks: accepted. */
  ok(kvc_cache_import_begin(b, 7, tokens, PROMPT, NULL, keys, size, &imp));
  kvc_import_destroy(imp);
  imp = NULL;
  const kvc_extra_key_t other_past = {BLOCKS * TPB + 1, 1, "img-b", 5};
  kvc_sequence_options_t receiver = KVC_SEQUENCE_OPTIONS_INIT;
  receiver.extra_keys = &other_past;
  receiver.num_extra_keys = 1;
  ok(kvc_cache_import_begin(b, 7, tokens, PROMPT, &receiver, keys, size, &imp));
  kvc_import_destroy(imp);
  imp = NULL;
  assert_same_blocks(b, &before);
  /* A key that reaches into block 9: refused, nothing changed. */
  const kvc_extra_key_t inside = {BLOCKS * TPB - 1, 3, "img-a", 5};
  receiver.extra_keys = &inside;
  assert_fails(kvc_cache_import_begin(b, 7, tokens, PROMPT, &receiver, keys, size, &imp),
               KVC_ERR_INVALID_ARGUMENT, "another cache salt, LoRA id or extra keys");
  assert_null(imp);
  assert_same_blocks(b, &before);
  free(keys);

  /* A key inside the blocks on both sides: equal keys accepted, another
   * key's bytes refused. */
  const kvc_extra_key_t image = {5, 6, "img-a", 5};
  sender.extra_keys = &image;
  export_keys(tokens, &sender, &keys, &size);
  ok(kvc_cache_import_begin(b, 7, tokens, PROMPT, &sender, keys, size, &imp));
  kvc_import_destroy(imp);
  imp = NULL;
  const kvc_extra_key_t other_image = {5, 6, "img-b", 5};
  receiver.extra_keys = &other_image;
  assert_fails(kvc_cache_import_begin(b, 7, tokens, PROMPT, &receiver, keys, size, &imp),
               KVC_ERR_INVALID_ARGUMENT, "another cache salt, LoRA id or extra keys");
  assert_fails(kvc_cache_import_begin(b, 7, tokens, PROMPT, NULL, keys, size, &imp),
               KVC_ERR_INVALID_ARGUMENT, "another cache salt, LoRA id or extra keys");
  assert_null(imp);
  assert_same_blocks(b, &before);
  free(keys);
  kvc_cache_destroy(b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_extra_keys_count_inside_the_exported_blocks_only),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
