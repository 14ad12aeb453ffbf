// State snapshots (core/state_snapshots.h) through the facade: a full pool
// evicts the snapshot whose node the prioritized LRU would evict first
// (lowest priority, then least recently used), a reuse refreshes its
// snapshot's age, and the checker holds after every call.
#include <gtest/gtest.h>

#include <string>

#include "base/error.h"
#include "core/cache.h"

namespace kvc {
namespace {

CacheConfig hybrid(uint32_t snapshots) {
  CacheConfig cfg;
  cfg.num_layers = 1;
  cfg.kv_heads = {1};
  cfg.head_dim = 8;
  cfg.tokens_per_block = 4;
  cfg.primary_bytes = 1 << 20;
  StateResource r;
  r.kind = KVC_RESOURCE_GENERIC;
  r.bytes = 64;
  cfg.resources = {r};
  cfg.max_state_slots = 8;
  cfg.max_state_snapshots = snapshots;
  return cfg;
}

// Adds `id` with 5 tokens starting at `first`, commits 4, publishes at 4.
void publish_one(Cache& cache, uint64_t id, int32_t first, uint32_t priority) {
  const int32_t tokens[5] = {first, first + 1, first + 2, first + 3, first + 4};
  SequenceOptions o;
  o.prompt_priority = priority;
  uint64_t cached = 0;
  Refusal refusal;
  ASSERT_TRUE(cache.add(id, tokens, 5, o, nullptr, &cached, &refusal));
  cache.commit(id, 4);
  cache.publish_state(id, 4, nullptr);
  cache.remove(id);  // the block keeps the priority of its prompt
  cache.check_invariants();
}

uint64_t reuse(Cache& cache, uint64_t id, int32_t first) {
  const int32_t tokens[5] = {first, first + 1, first + 2, first + 3, first + 4};
  uint64_t cached = 0;
  Refusal refusal;
  EXPECT_TRUE(cache.add(id, tokens, 5, {}, nullptr, &cached, &refusal));
  cache.remove(id);
  cache.check_invariants();
  return cached;
}

TEST(StateSnapshots, FullPoolEvictsTheLowestPriorityFirst) {
  Cache cache(hybrid(2));
  publish_one(cache, 1, 100, 80);  // oldest, but kept longest by priority
  publish_one(cache, 2, 200, 10);
  publish_one(cache, 3, 300, 35);  // evicts 200's (priority 10)
  EXPECT_EQ(cache.snapshot_summary().counts.evicted, 1u);
  EXPECT_EQ(reuse(cache, 12, 200), 0u);
  publish_one(cache, 4, 400, 80);  // evicts 300's (35 < 80)
  EXPECT_EQ(reuse(cache, 14, 300), 0u);
  // (A reuse releases the node at the reuser's priority, 35 here: the
  // node's priority is its last owner's, as for block eviction.)
  EXPECT_EQ(reuse(cache, 15, 100), 4u);
  EXPECT_EQ(reuse(cache, 16, 400), 4u);
}

TEST(StateSnapshots, EqualPrioritiesEvictTheLeastRecentlyUsed) {
  Cache cache(hybrid(2));
  publish_one(cache, 1, 100, 35);
  publish_one(cache, 2, 200, 35);
  EXPECT_EQ(reuse(cache, 11, 100), 4u);  // 100's snapshot is now the fresher
  publish_one(cache, 3, 300, 35);        // evicts 200's
  EXPECT_EQ(reuse(cache, 12, 200), 0u);
  EXPECT_EQ(reuse(cache, 13, 100), 4u);
  const Cache::SnapshotSummary s = cache.snapshot_summary();
  EXPECT_EQ(s.num_slots, 2u);
  EXPECT_EQ(s.used, 2u);
  EXPECT_EQ(s.counts.hits, 2u);
  EXPECT_EQ(s.counts.hit_tokens, 8u);
  EXPECT_EQ(s.bytes_per_snapshot, 64u);
  EXPECT_EQ(s.bytes, 2u * 256);
}

// A host tier whose quarter holds 2 snapshot slots of 256 bytes (the
// generic 64 bytes rounded up to 256).
CacheConfig hybrid_host(uint32_t snapshots) {
  CacheConfig cfg = hybrid(snapshots);
  cfg.host_cache_bytes = 2048;
  return cfg;
}

TEST(StateSnapshots, HostPlanTakesAQuarterOfTheHostBytes) {
  Cache cache(hybrid_host(2));
  EXPECT_EQ(cache.host_plan().snapshot_slots, 2u);
  EXPECT_EQ(cache.host_plan().snapshot_bytes, 512u);
  EXPECT_LE(cache.host_plan().total_bytes, 2048u - 512u);
  const Cache::SnapshotSummary s = cache.snapshot_summary();
  EXPECT_EQ(s.host_num_slots, 2u);
  EXPECT_EQ(s.host_bytes, 512u);
}

TEST(StateSnapshots, HostPoolTakesQualifyingVictimsAndEvictsByPriority) {
  Cache cache(hybrid_host(2));  // offload priority 35 (the default)
  publish_one(cache, 1, 100, 80);
  publish_one(cache, 2, 200, 10);
  publish_one(cache, 3, 300, 35);  // 200's (10 < 35) is dropped, not offloaded
  Cache::SnapshotSummary s = cache.snapshot_summary();
  EXPECT_EQ(s.counts.evicted, 1u);
  EXPECT_EQ(s.counts.offloaded, 0u);
  publish_one(cache, 4, 400, 80);  // 300's (35) goes to the host
  publish_one(cache, 5, 500, 50);  // 100's (80, older than 400's) goes to the host
  s = cache.snapshot_summary();
  EXPECT_EQ(s.counts.offloaded, 2u);
  EXPECT_EQ(s.host_used, 2u);
  // The host pool is full: 500's offload evicts its lowest priority, 300's.
  publish_one(cache, 6, 600, 80);
  s = cache.snapshot_summary();
  EXPECT_EQ(s.counts.offloaded, 3u);
  EXPECT_EQ(s.counts.host_evicted, 1u);
  EXPECT_EQ(s.used, 2u);
  EXPECT_EQ(s.host_used, 2u);
  EXPECT_EQ(reuse(cache, 12, 200), 0u);
  EXPECT_EQ(reuse(cache, 13, 300), 0u);
  EXPECT_EQ(reuse(cache, 11, 100), 4u);  // from the host
  EXPECT_EQ(reuse(cache, 15, 500), 4u);  // from the host
  EXPECT_EQ(reuse(cache, 14, 400), 4u);
  EXPECT_EQ(reuse(cache, 16, 600), 4u);
  s = cache.snapshot_summary();
  EXPECT_EQ(s.counts.onboarded, 2u);
  EXPECT_EQ(s.counts.hits, 4u);
}

TEST(StateSnapshots, ProbeAgreesWithAddAndChangesNothing) {
  Cache cache(hybrid(4));
  publish_one(cache, 1, 100, 35);
  const int32_t tokens[9] = {100, 101, 102, 103, 104, 105, 106, 107, 108};
  EXPECT_EQ(cache.probe(tokens, 9, {}), 4u);
  EXPECT_EQ(cache.probe(tokens, 4, {}), 0u);  // the last token is recomputed
  const Cache::SnapshotSummary before = cache.snapshot_summary();
  EXPECT_EQ(before.counts.hits, 0u);
}

}  // namespace
}  // namespace kvc
