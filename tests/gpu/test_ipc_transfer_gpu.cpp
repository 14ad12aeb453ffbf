// Block export/import over CUDA IPC between two processes on one GPU: runs
// the example examples/cuda_ipc_transfer (prefill process; it fork+execs
// itself as the decode process) and checks what each role reports. The
// decode process does the checks on its own cache (it is the only one that
// can see it): bit-for-bit reuse of a 4096-token prompt, a prompt differing
// in one token refused naming block 37 with the cache unchanged, an aborted
// import leaving the cache unchanged (kvc_cache_check, stats). The
// sender's pool is two physical allocations (it grew), shared as POSIX file
// descriptors (kvc_cache_export_pool_chunk) and mapped by the decode
// process. Also checks the sharing calls themselves on a CUDA cache. Skips
// with the reason when no CUDA device is usable or the example was not
// built.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "kvcache/kvcache.h"

namespace {

struct ExampleRun {
  int status = -1;  // exit status, -1 when it did not exit
  std::string output;
};

ExampleRun run_example(const std::string& args) {
  ExampleRun r;
#ifdef KVC_IPC_EXAMPLE
  // KVC_IPC_EXAMPLE in the environment overrides the path built in; a
  // transfer that hangs is cut after 120 s (coreutils timeout).
  const char* env = std::getenv("KVC_IPC_EXAMPLE");
  const std::string path = env != nullptr && env[0] != '\0' ? env : KVC_IPC_EXAMPLE;
  const std::string cmd = "timeout 120 '" + path + "' " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[512];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  const int st = pclose(p);
  if (st != -1 && WIFEXITED(st)) r.status = WEXITSTATUS(st);
#else
  (void)args;
#endif
  return r;
}

#define SKIP_WITHOUT_IPC()                                                                 \
  do {                                                                                     \
    if ((kvc_features() & KVC_FEATURE_CUDA_DEVICE) == 0)                                   \
      GTEST_SKIP() << "no usable CUDA device (kvc_features() = " << kvc_features() << ")"; \
    if (!kHaveExample)                                                                     \
      GTEST_SKIP() << "examples/cuda_ipc_transfer not built (KVCACHE_BUILD_EXAMPLES=OFF)"; \
  } while (0)

#ifdef KVC_IPC_EXAMPLE
constexpr bool kHaveExample = true;
#else
constexpr bool kHaveExample = false;
#endif

bool has(const std::string& out, const char* what) { return out.find(what) != std::string::npos; }

TEST(CudaIpcTransfer, DecodeProcessReusesPrefillBlocksBitForBit) {
  SKIP_WITHOUT_IPC();
  const ExampleRun r = run_example("");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(has(r.output,
                  "imported 256 blocks over CUDA IPC (2 allocations mapped); an add of the "
                  "prompt reused all 256 blocks, bit for bit"))
      << r.output;
  EXPECT_TRUE(has(r.output,
                  "prefill: exported 256 blocks (33554432 bytes) from a pool of 2 "
                  "shared allocations"))
      << r.output;
}

TEST(CudaIpcTransfer, DecodePromptDifferingInOneTokenIsRefusedNamingTheBlock) {
  SKIP_WITHOUT_IPC();
  const ExampleRun r = run_example("--mismatch");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(has(r.output, "decode: refused: ")) << r.output;
  EXPECT_TRUE(has(r.output, "block 37")) << r.output;
  EXPECT_TRUE(has(r.output, "cache unchanged (check passes, stats equal)")) << r.output;
}

TEST(CudaIpcTransfer, AbortedImportLeavesDecodeCacheUnchanged) {
  SKIP_WITHOUT_IPC();
  const ExampleRun r = run_example("--abort");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(has(r.output,
                  "aborted import of 256 blocks: cache unchanged (check passes, stats "
                  "equal, nothing reusable)"))
      << r.output;
}

// The sharing calls on a CUDA cache: one chunk per allocation, a grown pool
// one more, a descriptor per export (a distinct open file), indices and
// struct sizes checked.
TEST(CudaPoolShare, ChunksFollowGrowthAndExportDescriptors) {
  if ((kvc_features() & KVC_FEATURE_CUDA_DEVICE) == 0) GTEST_SKIP() << "no usable CUDA device";
  kvc_config_t* cfg = nullptr;
  ASSERT_EQ(kvc_config_create(&cfg), KVC_OK);
  const uint64_t block_bytes = 2ull * 2 * 16 * 2 * 64 * 2;  // 16 KiB
  kvc_config_set_num_layers(cfg, 2);
  kvc_config_set_kv_heads(cfg, 2);
  kvc_config_set_head_dim(cfg, 64);
  kvc_config_set_dtype(cfg, KVC_DTYPE_BF16);
  kvc_config_set_tokens_per_block(cfg, 16);
  kvc_config_set_device(cfg, KVC_DEVICE_CUDA, 0);
  kvc_config_set_primary_bytes(cfg, 256 * block_bytes);
  kvc_config_set_max_primary_bytes(cfg, 1024 * block_bytes);
  kvc_cache_t* cache = nullptr;
  ASSERT_EQ(kvc_cache_create(cfg, &cache), KVC_OK) << kvc_last_error_message();
  kvc_config_destroy(cfg);

  kvc_pool_share_t s = KVC_POOL_SHARE_INIT;
  ASSERT_EQ(kvc_cache_describe_pool_share(cache, 0, 0, &s), KVC_OK) << kvc_last_error_message();
  EXPECT_EQ(s.num_chunks, 1u);
  EXPECT_EQ(s.handle_type, uint32_t(KVC_SHARE_HANDLE_POSIX_FD));
  EXPECT_EQ(s.device_ordinal, 0);
  ASSERT_GT(s.granularity, 0u);
  EXPECT_EQ(s.mapped_bytes % s.granularity, 0u);
  EXPECT_EQ(s.reserved_bytes % s.granularity, 0u);
  EXPECT_GE(s.reserved_bytes, 1024 * block_bytes);
  kvc_pool_desc_t pool = KVC_POOL_DESC_INIT;
  ASSERT_EQ(kvc_cache_describe_pool(cache, 0, &pool), KVC_OK);
  EXPECT_GE(s.mapped_bytes, pool.bytes);

  ASSERT_EQ(kvc_cache_resize(cache, 1024 * block_bytes), KVC_OK) << kvc_last_error_message();
  kvc_pool_share_t grown = KVC_POOL_SHARE_INIT;
  ASSERT_EQ(kvc_cache_describe_pool_share(cache, 0, 0, &grown), KVC_OK);
  EXPECT_EQ(grown.num_chunks, 2u);
  EXPECT_GT(grown.mapped_bytes, s.mapped_bytes);

  uint64_t next = 0;
  for (uint64_t i = 0; i < grown.num_chunks; ++i) {
    kvc_share_chunk_t c = KVC_SHARE_CHUNK_INIT;
    ASSERT_EQ(kvc_cache_export_pool_chunk(cache, 0, 0, i, &c), KVC_OK) << kvc_last_error_message();
    EXPECT_GE(c.fd, 0);
    EXPECT_NE(fcntl(c.fd, F_GETFD), -1);  // an open descriptor, ours to close
    EXPECT_EQ(c.index, i);
    EXPECT_EQ(c.offset, next);  // contiguous from the base
    next += c.size;
    close(c.fd);
  }
  EXPECT_EQ(next, grown.mapped_bytes);

  kvc_share_chunk_t c = KVC_SHARE_CHUNK_INIT;
  EXPECT_EQ(kvc_cache_export_pool_chunk(cache, 0, 0, 2, &c), KVC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(std::string(kvc_last_error_message()), "chunk must be < num_chunks (2), got 2");
  EXPECT_EQ(c.fd, -1);  // untouched
  EXPECT_EQ(kvc_cache_describe_pool_share(cache, 1, 0, &s), KVC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvc_cache_describe_pool_share(cache, 0, 1, &s), KVC_ERR_INVALID_ARGUMENT);

  // A shrink returns the second allocation: one chunk again.
  ASSERT_EQ(kvc_cache_resize(cache, 256 * block_bytes), KVC_OK) << kvc_last_error_message();
  kvc_pool_share_t shrunk = KVC_POOL_SHARE_INIT;
  ASSERT_EQ(kvc_cache_describe_pool_share(cache, 0, 0, &shrunk), KVC_OK);
  EXPECT_EQ(shrunk.num_chunks, 1u);
  EXPECT_EQ(shrunk.mapped_bytes, s.mapped_bytes);
  kvc_cache_destroy(cache);
}

}  // namespace
