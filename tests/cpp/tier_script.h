// The host tier's scripted tests (test_host_tier.cpp, test_room_ahead.cpp):
// a small two-tier cache and the calls a script makes on it, each checked
// (the KV of reused rows bit for bit, the invariants of both tiers), and
// where a recorded node is now.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "core/cache.h"
#include "kv_content.h"
#include "manager_fixture.h"

namespace kvc {
namespace test {

constexpr uint64_t kTierSetBytes = 512;  // 2 layers x K,V x 4 tokens x 2 heads x 4 dims x f32

// 4-token blocks of kTierSetBytes; only full blocks are published (exact counts).
inline CacheConfig tier_config(uint64_t primary_blocks, uint64_t host_blocks) {
  CacheConfig c;
  c.num_layers = 2;
  c.kv_heads = {2};
  c.head_dim = 4;
  c.dtype = KVC_DTYPE_F32;
  c.tokens_per_block = 4;
  c.max_tokens = primary_blocks * 4;
  c.host_cache_bytes = host_blocks * kTierSetBytes;
  c.partial_reuse = false;
  return c;
}

class TierScript {
 public:
  void make(const CacheConfig& c) { cache_ = faulty_cache(c, faults_); }
  BlockManager& m() { return cache_->manager(); }
  void check() {
    m().check_invariants();
    EXPECT_EQ(check_tree(*cache_), "");
  }
  // Adds, writes the KV of the tokens not found cached, checks the reused ones.
  uint64_t add(uint64_t id, const std::vector<int32_t>& t, uint32_t priority = 35) {
    SequenceOptions o;
    o.prompt_priority = priority;
    const uint64_t cached = m().add(id, t.data(), t.size(), o, nullptr);
    const Sequence& s = m().sequence(id);
    EXPECT_EQ(check_sequence(*cache_, s, 0, cached), "");
    write_sequence(*cache_, s, cached, s.length());
    check();
    return cached;
  }
  void commit_all(uint64_t id) {
    m().commit(id, m().sequence(id).length());
    check();
  }
  void remove(uint64_t id) {
    m().remove(id);
    check();
  }
  // Adds, commits and removes: the prompt's full blocks end up cached.
  // Returns the tree nodes of its full blocks.
  std::vector<uint32_t> cache_prompt(uint64_t id, const std::vector<int32_t>& t,
                                     uint32_t priority = 35) {
    add(id, t, priority);
    commit_all(id);
    const Sequence& s = m().sequence(id);
    const std::vector<uint32_t> nodes(s.nodes.begin(), s.nodes.begin() + long(s.published));
    remove(id);
    return nodes;
  }
  // Where a recorded node is now: 'P' primary, 'H' host, '-' gone. A node
  // id reused by another key reads as gone.
  char where(uint32_t node, const std::vector<int32_t>& prompt, uint64_t b) {
    const TreeNode& t = m().tree().node(node);
    if (!t.live || t.num_tokens != 4 ||
        !std::equal(prompt.begin() + long(b * 4), prompt.begin() + long(b * 4 + 4),
                    m().tree().tokens(node)))
      return '-';
    return m().in_host_tier(node) ? 'H' : 'P';
  }
  std::string tiers(const std::vector<uint32_t>& nodes, const std::vector<int32_t>& prompt) {
    std::string s;
    for (size_t b = 0; b < nodes.size(); ++b) s += where(nodes[b], prompt, b);
    return s;
  }
  CacheStats stats() { return m().stats(); }

  FaultPlan faults_;  // outlives the cache's device
  std::unique_ptr<Cache> cache_;
};

}  // namespace test
}  // namespace kvc
