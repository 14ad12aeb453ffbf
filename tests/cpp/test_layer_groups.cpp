#include <gtest/gtest.h>

#include "core/cache_config.h"
#include "base/error.h"
#include "core/layer_groups.h"
#include "core/memory_plan.h"

namespace kvc {
namespace {

CacheConfig llama8b() {
  CacheConfig c;
  c.num_layers = 32;
  c.kv_heads = {8};
  c.head_dim = 128;
  c.dtype = KVC_DTYPE_BF16;
  c.tokens_per_block = 16;
  c.primary_bytes = 2ull << 30;
  return c;
}

TEST(LayerGroups, UniformModelIsOneGroupOnePool) {
  const LayerGrouping g = group_layers(llama8b());
  ASSERT_EQ(g.groups.size(), 1u);
  ASSERT_EQ(g.pools.size(), 1u);
  EXPECT_EQ(g.groups[0].layers.size(), 32u);
  // 32 layers * 2 (K,V) * 16 tokens * 8 heads * 128 dims * 2 bytes
  EXPECT_EQ(g.groups[0].geometry.block_bytes, 32ull * 2 * 16 * 8 * 128 * 2);
  EXPECT_EQ(g.groups[0].token_stride, 8u * 128 * 2);
  EXPECT_EQ(g.groups[0].head_stride, 128u * 2);
  EXPECT_EQ(g.groups[0].geometry.num_runs, 64u);
}

TEST(LayerGroups, HndStridesAndRuns) {
  CacheConfig c = llama8b();
  c.layout = KVC_LAYOUT_HND;
  const LayerGrouping g = group_layers(c);
  EXPECT_EQ(g.groups[0].token_stride, 128u * 2);
  EXPECT_EQ(g.groups[0].head_stride, 16u * 128 * 2);
  EXPECT_EQ(g.groups[0].geometry.num_runs, 32u * 2 * 8);
  EXPECT_EQ(g.groups[0].geometry.row_bytes, 128u * 2);
}

TEST(LayerGroups, WindowListRepeatsAndGroupsShareEqualPools) {
  CacheConfig c = llama8b();
  c.num_layers = 6;
  c.windows = {0, 256};  // full, 256, full, 256, ...
  const LayerGrouping g = group_layers(c);
  ASSERT_EQ(g.groups.size(), 2u);
  EXPECT_EQ(g.groups[0].window, 0u);
  EXPECT_EQ(g.groups[1].window, 256u);
  EXPECT_EQ(g.groups[0].layers, (std::vector<uint32_t>{0, 2, 4}));
  EXPECT_EQ(g.groups[1].layers, (std::vector<uint32_t>{1, 3, 5}));
  // Equal block bytes: one pool serves both groups.
  ASSERT_EQ(g.pools.size(), 1u);
  EXPECT_EQ(g.pools[0].groups.size(), 2u);
  EXPECT_EQ(g.layers[3].group, 1u);
  EXPECT_EQ(g.layers[3].index, 1u);
}

TEST(LayerGroups, DifferentHeadsMakeDifferentPools) {
  CacheConfig c = llama8b();
  c.num_layers = 3;
  c.kv_heads = {8, 4, 8};
  const LayerGrouping g = group_layers(c);
  ASSERT_EQ(g.groups.size(), 2u);
  ASSERT_EQ(g.pools.size(), 2u);
  EXPECT_EQ(g.groups[0].layers, (std::vector<uint32_t>{0, 2}));
  EXPECT_EQ(g.groups[1].pool, 1u);
}

TEST(MemoryPlan, LeastBoundWins) {
  CacheConfig c = llama8b();
  const LayerGrouping g = group_layers(c);
  const uint64_t block = g.groups[0].geometry.block_bytes;  // 2 MiB... per block
  MemoryPlan p = plan_memory(c, g, 0);
  EXPECT_EQ(p.limited_by, "primary_bytes");
  EXPECT_EQ(p.blocks_per_group, (2ull << 30) / block);
  c.max_tokens = 100;  // 7 blocks
  p = plan_memory(c, g, 0);
  EXPECT_EQ(p.limited_by, "max_tokens");
  EXPECT_EQ(p.blocks_per_group, 7u);
  EXPECT_EQ(p.token_capacity, 112u);
  c.max_tokens = 0;
  c.primary_bytes = 0;
  c.free_gpu_memory_fraction = 0.5;
  p = plan_memory(c, g, 10 * block);
  EXPECT_EQ(p.limited_by, "free_gpu_memory_fraction");
  EXPECT_EQ(p.blocks_per_group, 5u);
}

TEST(MemoryPlan, TooSmallForOneBlockFails) {
  CacheConfig c = llama8b();
  c.primary_bytes = 1000;
  const LayerGrouping g = group_layers(c);
  try {
    plan_memory(c, g, 0);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), KVC_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("too small for one block"), std::string::npos);
  }
}

TEST(MemoryPlan, CpuWithoutABoundTakesOneGiB) {
  CacheConfig c = llama8b();
  c.primary_bytes = 0;
  const MemoryPlan plan = plan_memory(c, group_layers(c), 0);
  EXPECT_EQ(plan.budget_bytes, kDefaultCpuPoolBytes);
  EXPECT_EQ(plan.limited_by, "the CPU default of 1 GiB");
  EXPECT_LE(plan.total_bytes, kDefaultCpuPoolBytes);
  EXPECT_EQ(plan.token_capacity, 8192u);  // 128 KiB per token
}

}  // namespace
}  // namespace kvc
