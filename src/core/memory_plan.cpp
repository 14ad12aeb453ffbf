#include "core/memory_plan.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "base/error.h"
#include "core/state_slots.h"

namespace kvc {

uint64_t block_set_bytes(const LayerGrouping& grouping) {
  uint64_t bytes = 0;  // one block of every group
  for (const LayerGroup& g : grouping.groups) bytes += g.geometry.block_bytes;
  return bytes;
}

namespace {

// Block ids are int32 in block tables.
uint64_t max_blocks_per_group(const LayerGrouping& grouping) {
  return uint64_t(std::numeric_limits<int32_t>::max()) /
         std::max<size_t>(1, grouping.groups.size());
}

}  // namespace

HostPlan plan_host_memory(const CacheConfig& cfg, const LayerGrouping& grouping,
                          uint32_t device_snapshots) {
  HostPlan plan;
  uint64_t bytes = cfg.host_cache_bytes;
  // Host state snapshots (state.h): a quarter of the host budget, with
  // state resources and a snapshot pool; the host pools get the rest.
  if (bytes != 0 && !cfg.resources.empty() && device_snapshots > 0) {
    const uint64_t slot = state_bytes_per_slot(lay_out_resources(cfg.resources));
    const uint64_t snaps =
        std::min<uint64_t>(CacheConfig::kMaxStateSlots, bytes / kHostSnapshotShare / slot);
    plan.snapshot_slots = uint32_t(snaps);
    plan.snapshot_bytes = snaps * slot;
    bytes -= plan.snapshot_bytes;
  }
  plan.blocks_per_group =
      std::min(bytes / block_set_bytes(grouping), max_blocks_per_group(grouping));
  for (const PoolShape& p : grouping.pools) {
    const uint64_t blocks = plan.blocks_per_group * p.groups.size();
    plan.pool_blocks.push_back(blocks);
    plan.total_bytes += blocks * p.block_bytes;
  }
  return plan;
}

MemoryPlan plan_memory(const CacheConfig& cfg, const LayerGrouping& grouping,
                       uint64_t device_free_bytes) {
  const uint64_t bytes_per_block_set = block_set_bytes(grouping);

  MemoryPlan plan;
  plan.budget_bytes = std::numeric_limits<uint64_t>::max();
  auto bound = [&](uint64_t bytes, const char* what) {
    if (bytes < plan.budget_bytes) {
      plan.budget_bytes = bytes;
      plan.limited_by = what;
    }
  };
  if (cfg.primary_bytes != 0) bound(cfg.primary_bytes, "primary_bytes");
  if (cfg.max_tokens != 0) {
    const uint64_t blocks = (cfg.max_tokens + cfg.tokens_per_block - 1) / cfg.tokens_per_block;
    const uint64_t bytes =
        blocks > std::numeric_limits<uint64_t>::max() / bytes_per_block_set
            ? std::numeric_limits<uint64_t>::max()
            : blocks * bytes_per_block_set;
    bound(bytes, "max_tokens");
  }
  if (device_free_bytes != 0) {
    bound(uint64_t(std::floor(double(device_free_bytes) * cfg.free_gpu_memory_fraction)),
          "free_gpu_memory_fraction");
  }
  // A CPU cache with no bound at all gets a modest default, as vLLM's CPU
  // backend does (its KV cache space): enough to try things, never the
  // whole machine.
  if (plan.limited_by.empty()) bound(kDefaultCpuPoolBytes, "the CPU default of 1 GiB");

  if (!cfg.resources.empty()) {
    const uint64_t slot = state_bytes_per_slot(lay_out_resources(cfg.resources));
    if (plan.budget_bytes < bytes_per_block_set || plan.budget_bytes - bytes_per_block_set < slot)
      invalid_argument("memory budget of " + std::to_string(plan.budget_bytes) +
                       " bytes (limited by " + plan.limited_by +
                       ") is too small for one block of every layer group (" +
                       std::to_string(bytes_per_block_set) +
                       " bytes) plus one slot of every state resource (" + std::to_string(slot) +
                       " bytes)");
    const uint64_t room = (plan.budget_bytes - bytes_per_block_set) / slot;
    uint64_t slots = cfg.max_state_slots;
    if (slots == 0) slots = std::min(kMaxPlannedStateSlots, std::max<uint64_t>(1, room / 2));
    if (slots > room)
      invalid_argument("max_state_slots " + std::to_string(slots) + " need " +
                       std::to_string(slots) + " * " + std::to_string(slot) +
                       " bytes; with one block of every layer group (" +
                       std::to_string(bytes_per_block_set) + " bytes) the memory budget of " +
                       std::to_string(plan.budget_bytes) + " bytes (limited by " +
                       plan.limited_by + ") holds " + std::to_string(room) + " slots");
    plan.state_slots = uint32_t(slots);
    plan.state_bytes = slots * slot;
    plan.budget_bytes -= plan.state_bytes;
    // Snapshots: from what is left after the slots and one block set.
    const uint64_t left = (plan.budget_bytes - bytes_per_block_set) / slot;
    uint64_t snaps = cfg.max_state_snapshots;
    if (snaps == CacheConfig::kNoSnapshots) snaps = 0;
    else if (snaps == 0) snaps = std::min<uint64_t>(slots, left / 4);
    else if (snaps > left)
      invalid_argument("max_state_snapshots " + std::to_string(snaps) + " need " +
                       std::to_string(snaps) + " * " + std::to_string(slot) +
                       " bytes; after " + std::to_string(slots) +
                       " state slots and one block of every layer group (" +
                       std::to_string(bytes_per_block_set) + " bytes) the memory budget (" +
                       plan.limited_by + ") holds " + std::to_string(left) + " snapshots");
    plan.snapshot_slots = uint32_t(snaps);
    plan.snapshot_bytes = snaps * slot;
    plan.budget_bytes -= plan.snapshot_bytes;
  }
  plan.blocks_per_group = plan.budget_bytes / bytes_per_block_set;
  if (plan.blocks_per_group == 0)
    invalid_argument("memory budget of " + std::to_string(plan.budget_bytes) +
                     " bytes (limited by " + plan.limited_by +
                     ") is too small for one block of every layer group, which needs " +
                     std::to_string(bytes_per_block_set) + " bytes");
  const uint64_t max_blocks = max_blocks_per_group(grouping);
  if (plan.blocks_per_group > max_blocks) plan.blocks_per_group = max_blocks;
  plan.token_capacity = plan.blocks_per_group * cfg.tokens_per_block;
  plan.max_budget_bytes = std::max(plan.budget_bytes, cfg.max_primary_bytes);
  // With a host tier the pools keep the static split: moving pages between
  // pools is not combined with moving blocks between tiers (yet).
  if (grouping.pools.size() > 1 && cfg.host_cache_bytes == 0) {
    uint64_t lcm = 1, largest = 0;
    for (const PoolShape& p : grouping.pools) {
      largest = std::max(largest, p.block_bytes);
      lcm = std::lcm(lcm, p.block_bytes);
      if (lcm > kMaxPageBlocks * largest) break;
    }
    const uint64_t pages = plan.budget_bytes / lcm;
    uint64_t ids = 0;
    for (const PoolShape& p : grouping.pools) ids = std::max(ids, pages * (lcm / p.block_bytes));
    if (lcm <= kMaxPageBlocks * largest && pages >= grouping.pools.size() &&
        ids <= uint64_t(std::numeric_limits<int32_t>::max())) {
      plan.page_bytes = lcm;
      plan.num_pages = pages;
      plan.total_bytes = pages * lcm;
      for (const PoolShape& p : grouping.pools) plan.pool_blocks.push_back(pages * (lcm / p.block_bytes));
      // The ceiling in pages, within int32 ids.
      uint64_t max_pages = std::max(pages, plan.max_budget_bytes / lcm);
      for (const PoolShape& p : grouping.pools)
        max_pages = std::min<uint64_t>(
            max_pages, uint64_t(std::numeric_limits<int32_t>::max()) / (lcm / p.block_bytes));
      plan.max_pages = std::max(pages, max_pages);
      for (const PoolShape& p : grouping.pools)
        plan.max_pool_blocks.push_back(plan.max_pages * (lcm / p.block_bytes));
      return plan;
    }
  }
  for (const PoolShape& p : grouping.pools) {
    const uint64_t blocks = plan.blocks_per_group * p.groups.size();
    plan.pool_blocks.push_back(blocks);
    plan.total_bytes += blocks * p.block_bytes;
  }
  const uint64_t max_sets = std::max(
      plan.blocks_per_group, std::min(plan.max_budget_bytes / bytes_per_block_set, max_blocks));
  for (const PoolShape& p : grouping.pools) plan.max_pool_blocks.push_back(max_sets * p.groups.size());
  return plan;
}

uint64_t mem_for_paged(const ResizeInputs& in) {
  if (!(in.fraction > 0.0 && in.fraction <= 1.0))
    invalid_argument("free_gpu_memory_fraction must be in (0, 1], got " +
                     std::to_string(in.fraction));
  if (in.non_paged_bytes > in.free_bytes || in.forward_bytes > in.free_bytes - in.non_paged_bytes)
    invalid_argument("non_paged_bytes (" + std::to_string(in.non_paged_bytes) +
                     ") plus forward_bytes (" + std::to_string(in.forward_bytes) +
                     ") exceed free_bytes (" + std::to_string(in.free_bytes) + ")");
  return uint64_t(
      std::floor(double(in.free_bytes - in.non_paged_bytes - in.forward_bytes) * in.fraction));
}

MemoryPlan plan_resize(const LayerGrouping& grouping, const MemoryPlan& current, uint64_t bytes,
                       uint32_t tokens_per_block) {
  const uint64_t set_bytes = block_set_bytes(grouping);
  if (bytes > current.max_budget_bytes)
    invalid_argument("primary bytes " + std::to_string(bytes) +
                     " exceed the cache's ceiling of " + std::to_string(current.max_budget_bytes) +
                     " bytes (max_primary_bytes at creation, or the budget then)");
  MemoryPlan plan = current;
  plan.budget_bytes = bytes;
  plan.limited_by = "kvc_cache_resize";
  plan.blocks_per_group = std::min(bytes / set_bytes, max_blocks_per_group(grouping));
  if (plan.blocks_per_group == 0)
    invalid_argument("primary bytes " + std::to_string(bytes) +
                     " are too few for one block of every layer group, which needs " +
                     std::to_string(set_bytes) + " bytes");
  plan.token_capacity = plan.blocks_per_group * tokens_per_block;
  plan.pool_blocks.clear();
  plan.total_bytes = 0;
  if (current.page_bytes != 0) {
    const uint64_t pages = std::min(bytes / current.page_bytes, current.max_pages);
    if (pages < grouping.pools.size())
      invalid_argument("primary bytes " + std::to_string(bytes) + " hold " +
                       std::to_string(pages) + " pages of " + std::to_string(current.page_bytes) +
                       " bytes, fewer than the " + std::to_string(grouping.pools.size()) +
                       " pools that share them (one each)");
    plan.num_pages = pages;
    plan.total_bytes = pages * current.page_bytes;
    for (const PoolShape& p : grouping.pools)
      plan.pool_blocks.push_back(pages * (current.page_bytes / p.block_bytes));
    return plan;
  }
  for (const PoolShape& p : grouping.pools) {
    const uint64_t blocks = plan.blocks_per_group * p.groups.size();
    plan.pool_blocks.push_back(blocks);
    plan.total_bytes += blocks * p.block_bytes;
  }
  return plan;
}

}  // namespace kvc
