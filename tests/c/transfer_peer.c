/* The decode side of test_transfer's two-process test: reads the file the
 * prefill side wrote (seed, prompt length, key blob, block bytes), imports
 * the blocks into its own cache and checks that an add of the prompt reuses
 * every block bit for bit. Exits 0 on success, else prints why. */
#include <stdio.h>
#include <stdlib.h>

#include "transfer_common.h"

#define PT 16

static int fail(const char *what) {
  fprintf(stderr, "transfer_peer: %s: %s\n", what, kvc_last_error_message());
  return 1;
}

static int read_u64(FILE *f, uint64_t *v) { return fread(v, 8, 1, f) == 1 ? 0 : -1; }

int main(int argc, char **argv) {
  if (argc != 2) return 2;
  FILE *f = fopen(argv[1], "rb");
  if (f == NULL) return fail("open");
  uint64_t seed = 0, n = 0, size = 0, blocks = 0, bytes = 0;
  if (read_u64(f, &seed) || read_u64(f, &n) || read_u64(f, &size)) return fail("header");
  unsigned char *keys = malloc(size);
  if (fread(keys, 1, size, f) != size) return fail("keys");
  if (read_u64(f, &blocks) || read_u64(f, &bytes)) return fail("blocks");
  int32_t *tokens = malloc(sizeof(int32_t) * n);
  xt_tokens((uint32_t)seed, tokens, n);
  kvc_cache_t *b = xt_cache(KVC_DTYPE_F32, PT, 2 * n);
  if (b == NULL) return fail("cache");
  if (xt_block_bytes(b) != bytes) return fail("block bytes differ");
  kvc_import_t *imp = NULL;
  if (kvc_cache_import_begin(b, 1, tokens, n, NULL, keys, size, &imp) != KVC_OK)
    return fail("import_begin");
  kvc_transfer_desc_t d = KVC_TRANSFER_DESC_INIT;
  if (kvc_import_describe(imp, &d) != KVC_OK) return fail("describe");
  if (d.num_blocks != blocks || d.first_block != 0) return fail("unexpected blocks");
  int32_t *ids = malloc(sizeof(int32_t) * blocks);
  size_t count = 0;
  if (kvc_import_block_ids(imp, 0, ids, blocks, &count) != KVC_OK) return fail("block ids");
  for (size_t i = 0; i < count; ++i)
    if (fread(xt_block(b, ids[i]), 1, bytes, f) != bytes) return fail("block bytes");
  fclose(f);
  if (kvc_import_complete(imp, count) != KVC_OK) return fail("complete");
  kvc_import_destroy(imp);
  if (kvc_sequence_remove(b, 1) != KVC_OK) return fail("remove");
  uint64_t cached = 0;
  if (kvc_sequence_add(b, 2, tokens, n, NULL, NULL, &cached) != KVC_OK) return fail("add");
  if (cached != blocks * PT) {
    fprintf(stderr, "transfer_peer: add reused %llu tokens, expected %llu\n",
            (unsigned long long)cached, (unsigned long long)(blocks * PT));
    return 1;
  }
  int32_t *all = malloc(sizeof(int32_t) * (blocks + 1));
  if (kvc_sequence_block_ids(b, 2, 0, all, blocks + 1, &count) != KVC_OK) return fail("ids");
  for (size_t i = 0; i < blocks; ++i)
    if (xt_check(b, all[i], i, tokens, PT) != 0) {
      fprintf(stderr, "transfer_peer: block %zu differs\n", i);
      return 1;
    }
  if (kvc_cache_check(b) != KVC_OK) return fail("check");
  kvc_cache_destroy(b);
  free(all);
  free(ids);
  free(tokens);
  free(keys);
  printf("transfer_peer: imported %llu blocks, reused bit for bit\n", (unsigned long long)blocks);
  return 0;
}
