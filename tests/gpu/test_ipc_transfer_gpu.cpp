// Block export/import over CUDA IPC between two processes on one GPU: runs
// the example examples/cuda_ipc_transfer (prefill process; it fork+execs
// itself as the decode process) and checks what each role reports. The
// decode process does the checks on its own cache (it is the only one that
// can see it): bit-for-bit reuse of a 4096-token prompt, a prompt differing
// in one token refused naming block 37 with the cache unchanged, an aborted
// import leaving the cache unchanged (kvc_cache_check, stats), and a
// growable (VMM) sending cache refused. Skips with the reason when no CUDA
// device is usable or the example was not built.
#include <gtest/gtest.h>
#include <sys/wait.h>

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
                  "imported 256 blocks over CUDA IPC; an add of the prompt reused all "
                  "256 blocks, bit for bit"))
      << r.output;
  EXPECT_TRUE(has(r.output, "prefill: exported 256 blocks")) << r.output;
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

TEST(CudaIpcTransfer, GrowableSendingCacheIsRefused) {
  SKIP_WITHOUT_IPC();
  const ExampleRun r = run_example("--growable");
  EXPECT_EQ(r.status, 3) << r.output;
  EXPECT_TRUE(has(r.output, "refused: the cache's pools are not shareable with legacy CUDA IPC"))
      << r.output;
}

}  // namespace
