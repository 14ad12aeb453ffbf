/* Sharing pool memory with another process (kvc_cache_describe_pool_share,
 * kvc_cache_export_pool_chunk) on the CPU backend: the initializers, the
 * argument checks and the backend's refusal, each with nothing changed.
 * The CUDA backend's sharing is tests/gpu/test_ipc_transfer_gpu.cpp's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "kvc_test_assert.h"
#include "transfer_helpers.h"
#include "transfer_common.h"

#define TPB 4

/* Sharing pool memory is the CUDA backend's (tests/gpu/test_ipc_transfer_gpu.cpp):
 * the CPU backend refuses it with the reason, changing nothing; the
 * initializers and the argument checks come first. */
static void test_cpu_backend_refuses_to_share_pool_memory(void **state) {
  (void)state;
  kvc_pool_share_t share = KVC_POOL_SHARE_INIT;
  assert_int_equal(share.struct_size, sizeof(kvc_pool_share_t));
  memset(&share, 0x5a, sizeof share);
  kvc_pool_share_init(&share);
  assert_int_equal(share.struct_size, sizeof(kvc_pool_share_t));
  assert_int_equal(share.num_chunks, 0);
  assert_int_equal(share.mapped_bytes, 0);
  kvc_share_chunk_t chunk = KVC_SHARE_CHUNK_INIT;
  assert_int_equal(chunk.fd, -1);
  memset(&chunk, 0x5a, sizeof chunk);
  kvc_share_chunk_init(&chunk);
  assert_int_equal(chunk.struct_size, sizeof(kvc_share_chunk_t));
  assert_int_equal(chunk.fd, -1);
  assert_int_equal(chunk.size, 0);
  kvc_pool_share_init(NULL);
  kvc_share_chunk_init(NULL);

  kvc_cache_t *a = xt_cache(KVC_DTYPE_F32, TPB, 64 * TPB);
  const kvc_cache_stats_t before = stats_of(a);
  assert_fails(kvc_cache_describe_pool_share(NULL, 0, 0, &share), KVC_ERR_INVALID_ARGUMENT,
               "cache must not be NULL");
  assert_fails(kvc_cache_describe_pool_share(a, 0, 0, NULL), KVC_ERR_INVALID_ARGUMENT,
               "out must not be NULL");
  assert_fails(kvc_cache_describe_pool_share(a, 1, 0, &share), KVC_ERR_INVALID_ARGUMENT,
               "rank must be < num_ranks (1), got 1");
  assert_fails(kvc_cache_describe_pool_share(a, 0, 3, &share), KVC_ERR_INVALID_ARGUMENT,
               "pool must be < num_pools (1), got 3");
  assert_fails(kvc_cache_describe_pool_share(a, 0, 0, &share), KVC_ERR_UNSUPPORTED,
               "the cpu device cannot share pool memory with another process: only the CUDA "
               "backend can");
  assert_int_equal(share.num_chunks, 0); /* untouched */
  kvc_share_chunk_t bad = KVC_SHARE_CHUNK_INIT;
  bad.struct_size = 0;
  assert_fails(kvc_cache_export_pool_chunk(a, 0, 0, 0, &bad), KVC_ERR_INVALID_ARGUMENT,
               "out->struct_size must be set");
  assert_fails(kvc_cache_export_pool_chunk(a, 0, 0, 0, NULL), KVC_ERR_INVALID_ARGUMENT,
               "out must not be NULL");
  assert_fails(kvc_cache_export_pool_chunk(a, 0, 2, 0, &chunk), KVC_ERR_INVALID_ARGUMENT,
               "pool must be < num_pools (1), got 2");
  assert_fails(kvc_cache_export_pool_chunk(a, 0, 0, 0, &chunk), KVC_ERR_UNSUPPORTED,
               "move the blocks through host memory instead");
  assert_int_equal(chunk.fd, -1); /* untouched */
  assert_same_blocks(a, &before);
  kvc_cache_destroy(a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cpu_backend_refuses_to_share_pool_memory),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
