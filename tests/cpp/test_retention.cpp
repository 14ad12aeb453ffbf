// Retention policies with exact numbers: token ranges mapped to blocks by
// their first token, decode priority on generated blocks, invalid policies,
// and durations on the manual clock changing the victim order (no sleeps).
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <numeric>
#include <vector>

#include "core/cache.h"
#include "base/error.h"
#include "manager_fixture.h"

namespace kvc {
namespace {

using test::seq;

std::vector<int32_t> plus_one(std::vector<int32_t> v) {
  v.push_back(-7);  // a last token, always recomputed, so probe sees full blocks
  return v;
}

RetentionRange range(uint64_t start, uint64_t end, uint32_t priority, uint64_t duration = 0) {
  RetentionRange r;
  r.start = start;
  r.end = end;
  r.priority = priority;
  r.duration_ms = duration;
  return r;
}

class RetentionTest : public test::ManagerFixture {
 protected:
  void make(uint64_t blocks, uint32_t T) {
    CacheConfig c;
    c.num_layers = 2;
    c.kv_heads = {2};
    c.head_dim = 4;
    c.dtype = KVC_DTYPE_F32;
    c.tokens_per_block = T;
    c.max_tokens = blocks * T;
    c.partial_reuse = false;
    c.manual_clock = true;
    ManagerFixture::make(c);
  }
  void advance(uint64_t ms) {
    m().advance_clock(ms);
    m().check_invariants();
  }
  // Priority of every published block of a sequence, in order.
  std::vector<uint32_t> node_priorities(uint64_t id) {
    std::vector<uint32_t> p;
    for (uint32_t n : m().sequence(id).nodes) p.push_back(m().tree().node(n).priority);
    return p;
  }
  std::vector<uint32_t> nodes(uint64_t id) { return m().sequence(id).nodes; }
  uint32_t priority(uint32_t node) { return m().tree().node(node).priority; }
};

TEST_F(RetentionTest, RangesMapToBlocksByFirstToken) {
  make(8, 64);
  SequenceOptions o;
  o.retention_ranges = {range(0, 64, 80), range(64, 128, 50)};
  add(1, seq(0, 256), o);
  commit_all(1);
  EXPECT_EQ(node_priorities(1), (std::vector<uint32_t>{80, 50, 35, 35}));
  const std::vector<uint32_t> n = nodes(1);
  remove(1);
  for (size_t b = 0; b < 4; ++b) EXPECT_EQ(priority(n[b]), (std::vector<uint32_t>{80, 50, 35, 35})[b]);
  EXPECT_EQ(m().policy().priority(n[3]), 35u);  // the leaf is queued at its priority
}

TEST_F(RetentionTest, RangeStartingInsideABlockDoesNotCoverIt) {
  make(8, 64);
  SequenceOptions o;
  o.retention_ranges = {range(32, 160, 90), range(160, kOpenEnd, 10)};
  o.prompt_priority = 40;  // blocks whose first token no range holds
  add(1, seq(0, 256), o);
  commit_all(1);
  // First tokens 0, 64, 128, 192: none, [32,160), [32,160), [160,open).
  EXPECT_EQ(node_priorities(1), (std::vector<uint32_t>{40, 90, 90, 10}));
}

TEST_F(RetentionTest, DecodePriorityOnGeneratedBlocks) {
  make(8, 4);
  SequenceOptions o;
  o.retention_ranges = {range(0, kOpenEnd, 10)};
  o.decode_priority = 90;
  add(1, seq(0, 6), o);  // block 1 starts at token 4, a prompt token
  const auto gen = seq(100, 6);
  m().extend(1, gen.data(), gen.size(), nullptr);
  commit_all(1);  // 12 tokens: blocks starting at 0, 4 (prompt), 8 (generated)
  EXPECT_EQ(node_priorities(1), (std::vector<uint32_t>{10, 10, 90}));
}

TEST_F(RetentionTest, InvalidPoliciesRejectedWithoutChange) {
  make(8, 4);
  const CacheStats before = m().stats();
  auto message = [&](std::vector<RetentionRange> ranges) -> std::string {
    SequenceOptions o;
    o.retention_ranges = std::move(ranges);
    try {
      add(1, seq(0, 10), o);
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), KVC_ERR_INVALID_ARGUMENT);
      return e.what();
    }
    return "accepted";
  };
  EXPECT_EQ(message({range(0, 64, 80), range(32, 96, 50)}),
            "options->retention_ranges[1] [32, 96) overlaps options->retention_ranges[0] [0, 64)");
  EXPECT_EQ(message({range(0, kOpenEnd, 80), range(64, 128, 50)}),
            "options->retention_ranges[0] is open-ended (end = KVC_RETENTION_OPEN_END) but is not "
            "the last of the 2 ranges");
  EXPECT_EQ(message({range(64, 10, 80)}),
            "options->retention_ranges[0].end must be > its start (64), got 10");
  EXPECT_EQ(message({range(0, 8, 101)}),
            "options->retention_ranges[0].priority must be in 0..100, got 101");
  EXPECT_EQ(message({range(4, 8, 50), range(0, 4, 60), range(2, 3, 70)}),
            "options->retention_ranges[2] [2, 3) overlaps options->retention_ranges[1] [0, 4)");
  const CacheStats after = m().stats();
  EXPECT_EQ(after.num_sequences, 0u);
  EXPECT_EQ(after.free_blocks, before.free_blocks);
  EXPECT_EQ(message({range(4, 8, 50), range(0, 4, 60), range(8, kOpenEnd, 70)}), "accepted");
}

// Two cached one-block prompts: A at 80 for 100 ms, then B at 35, released
// later. One block must be evicted for a new two-block prompt.
class RetentionExpiryTest : public RetentionTest {
 protected:
  const std::vector<int32_t> a_ = seq(0, 4), b_ = seq(100, 4), c_ = seq(200, 8);
  void SetUp() override {
    make(3, 4);
    SequenceOptions o;
    o.retention_ranges = {range(0, kOpenEnd, 80, 100)};
    add(1, a_, o);
    commit_all(1);
    a_node_ = nodes(1)[0];
    remove(1);
    add(2, b_);
    commit_all(2);
    remove(2);
    EXPECT_EQ(priority(a_node_), 80u);
    EXPECT_EQ(m().expiries().size(), 1u);
  }
  uint32_t a_node_ = kNoNode;
};

TEST_F(RetentionExpiryTest, BeforeExpiryTheLowerPriorityGoesFirst) {
  advance(99);
  EXPECT_EQ(priority(a_node_), 80u);
  add(3, c_);
  EXPECT_EQ(probe(plus_one(a_)), 4u);
  EXPECT_EQ(probe(plus_one(b_)), 0u);
}

TEST_F(RetentionExpiryTest, AfterExpiryTheOlderGoesFirst) {
  advance(99);
  advance(1);
  EXPECT_EQ(priority(a_node_), 35u);
  EXPECT_EQ(m().expiries().size(), 0u);
  add(3, c_);
  EXPECT_EQ(probe(plus_one(a_)), 0u);
  EXPECT_EQ(probe(plus_one(b_)), 4u);
}

TEST_F(RetentionTest, DurationCountsFromCommitNotRelease) {
  make(3, 4);
  SequenceOptions o;
  o.decode_priority = 70;
  o.decode_duration_ms = 50;
  add(1, seq(0, 4), o);
  const auto gen = seq(10, 4);
  m().extend(1, gen.data(), gen.size(), nullptr);
  commit_all(1);  // both blocks reusable at 0 ms; block 1 is generated
  const uint32_t gen_node = nodes(1)[1];
  advance(30);
  remove(1);  // released at 30 ms: still 20 ms at 70
  EXPECT_EQ(priority(gen_node), 70u);
  advance(19);
  EXPECT_EQ(priority(gen_node), 70u);
  advance(1);
  EXPECT_EQ(priority(gen_node), 35u);
  EXPECT_EQ(m().policy().priority(gen_node), 35u);
}

TEST_F(RetentionTest, ReleasedAfterExpiryStartsAtDefault) {
  make(3, 4);
  SequenceOptions o;
  o.retention_ranges = {range(0, kOpenEnd, 90, 10)};
  add(1, seq(0, 5), o);
  commit_all(1);
  const uint32_t n = nodes(1)[0];
  advance(10);
  remove(1);
  EXPECT_EQ(priority(n), 35u);
  EXPECT_EQ(m().expiries().size(), 0u);
}

TEST_F(RetentionTest, ReuseCancelsThePendingExpiry) {
  make(4, 4);
  SequenceOptions o;
  o.retention_ranges = {range(0, kOpenEnd, 90, 10)};
  add(1, seq(0, 5), o);
  commit_all(1);
  remove(1);
  EXPECT_EQ(m().expiries().size(), 1u);
  add(2, seq(0, 5));  // reuses the block: in use, no expiry pending
  EXPECT_EQ(m().expiries().size(), 0u);
  advance(10);
  remove(2);  // released by a sequence without a duration: 35 for ever
  EXPECT_EQ(m().expiries().size(), 0u);
}

TEST_F(RetentionTest, AdvancingTheMonotonicClockIsRefused) {
  CacheConfig c;
  c.num_layers = 1;
  c.kv_heads = {1};
  c.head_dim = 4;
  c.dtype = KVC_DTYPE_F32;
  c.tokens_per_block = 4;
  c.max_tokens = 16;
  cache_ = std::make_unique<Cache>(c);
  try {
    m().advance_clock(1);
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), KVC_ERR_INVALID_STATE);
  }
}

}  // namespace
}  // namespace kvc
