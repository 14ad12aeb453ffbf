// Every allocation of the backend can fail (fault_hook.h): creating a cache
// whose k-th allocation fails, for every k, throws KVC_ERR_OUT_OF_MEMORY
// with the size and releases everything allocated before it.
#include <gtest/gtest.h>

#include "core/cache.h"
#include "base/error.h"
#include "kv_content.h"

namespace kvc {
namespace {

using test::FaultPlan;
using test::faulty_cache;

CacheConfig config(int variant) {
  CacheConfig c;
  c.num_layers = 3;
  c.kv_heads = {1};
  c.head_dim = 2;
  c.dtype = KVC_DTYPE_F32;
  c.tokens_per_block = 4;
  c.max_tokens = 64;
  if (variant >= 1) c.host_cache_bytes = 8 * 3 * 64;  // a host tier
  if (variant >= 2) c.kv_heads = {1, 2, 1};           // two pools
  if (variant == 3) {                                 // pages shared between pools
    c.host_cache_bytes = 0;
    c.windows = {0, 16, 0};
  }
  return c;
}

TEST(FaultInjection, EveryAllocationOfCacheCreationCanFail) {
  for (int variant = 0; variant < 4; ++variant) {
    FaultPlan ok;
    { auto cache = faulty_cache(config(variant), ok); }
    EXPECT_EQ(ok.live, 0);
    ASSERT_GT(ok.allocations, 0u) << variant;
    for (uint64_t k = 1; k <= ok.allocations; ++k) {
      FaultPlan plan;
      plan.fail_allocation(uint32_t(k));
      try {
        auto cache = faulty_cache(config(variant), plan);
        ADD_FAILURE() << "variant " << variant << ": allocation " << k << " did not fail";
      } catch (const Error& e) {
        EXPECT_EQ(e.status(), KVC_ERR_OUT_OF_MEMORY) << e.what();
        EXPECT_NE(std::string(e.what()).find("(injected fault)"), std::string::npos) << e.what();
      }
      EXPECT_EQ(plan.live, 0) << "variant " << variant << ", allocation " << k << " leaked";
      EXPECT_EQ(plan.allocations, k - 1);
    }
  }
}

}  // namespace
}  // namespace kvc
