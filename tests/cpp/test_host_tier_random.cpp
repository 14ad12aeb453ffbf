// Randomized operations on a cache with a host tier, with the content
// oracle: every token row a sequence computes is written with bytes derived
// from (token, position, layer); after every operation the invariant checker
// runs (both tiers) and every row of every live sequence and every row of
// every tree node, primary or host, must still hold its bytes. Some tier
// copies fail on purpose: the call fails with KVC_ERR_DEVICE and the same
// checks must pass.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <vector>

#include "core/cache.h"
#include "base/error.h"
#include "kv_content.h"

namespace kvc {
namespace {

using test::check_sequence;
using test::check_tree;
using test::FaultPlan;
using test::faulty_cache;
using test::write_sequence;

class TierRandomOps {
 public:
  TierRandomOps(const CacheConfig& cfg, uint32_t seed, uint32_t fail_one_in)
      : rng_(seed), fail_one_in_(fail_one_in) {
    cache_ = faulty_cache(cfg, faults_);
    for (int d = 0; d < 6; ++d) {
      std::vector<int32_t> doc(64);
      for (auto& t : doc) t = int32_t(rng_() % 40);
      docs_.push_back(doc);
    }
  }

  void run(int ops) {
    for (int i = 0; i < ops; ++i) {
      step();
      m().check_invariants();
      const std::string tree = check_tree(*cache_);
      ASSERT_EQ(tree, "") << "after operation " << i;
      for (uint64_t id : ids_) {
        const Sequence& s = m().sequence(id);
        ASSERT_EQ(check_sequence(*cache_, s, 0, s.length()), "") << "after operation " << i;
      }
    }
    while (!ids_.empty()) remove_at(0);
    m().check_invariants();
    EXPECT_EQ(m().stats().in_use_blocks, 0u);
    m().reset_reuse();
    EXPECT_EQ(m().stats().host_free_blocks, m().stats().host_blocks);
    EXPECT_EQ(m().stats().free_blocks, m().stats().num_blocks);
  }

  // Destroys the cache: every allocation of its device must be released.
  void close_and_check_leaks() {
    ASSERT_GT(faults_.allocations, 0u);
    cache_.reset();
    EXPECT_EQ(faults_.live, 0) << "of " << faults_.allocations << " allocations";
  }

  uint64_t device_failures = 0, successes = 0;
  BlockManager& m() { return cache_->manager(); }

 private:
  uint32_t pick(uint32_t n) { return uint32_t(rng_() % n); }

  std::vector<int32_t> prompt() {
    const auto& doc = docs_[pick(uint32_t(docs_.size()))];
    std::vector<int32_t> p(doc.begin(), doc.begin() + 1 + pick(40));
    for (uint32_t k = pick(6); k > 0; --k) p.push_back(int32_t(pick(40)));
    return p;
  }

  // Runs f; a copy may be armed to fail. Failures other than out of blocks
  // and the injected device error are bugs.
  // Every sequence as a caller sees it: lengths, blocks, nodes and each
  // block's reference count.
  std::vector<uint64_t> sequences_now() {
    std::vector<uint64_t> v;
    for (uint64_t id : ids_) {
      const Sequence& s = m().sequence(id);
      v.insert(v.end(), {id, s.length(), s.committed, s.published});
      for (uint32_t g = 0; g < s.blocks.size(); ++g)
        for (uint32_t b : s.blocks[g]) {
          v.push_back(b);
          if (b != kNoBlock) v.push_back(m().pool(m().pool_of_group(g)).info(b).ref);
        }
      v.insert(v.end(), s.nodes.begin(), s.nodes.end());
    }
    v.push_back(m().stats().num_sequences);
    v.push_back(m().stats().num_pinned);
    return v;
  }

  template <class F>
  bool attempt(F&& f) {
    if (fail_one_in_ != 0 && pick(fail_one_in_) == 0) faults_.fail_copy(1 + pick(2));
    const std::vector<uint64_t> before = sequences_now();
    try {
      f();
      faults_.fail_copy(0);
      ++successes;
      return true;
    } catch (const Error& e) {
      faults_.fail_copy(0);
      if (e.status() == KVC_ERR_DEVICE) ++device_failures;
      EXPECT_TRUE(e.status() == KVC_ERR_OUT_OF_BLOCKS || e.status() == KVC_ERR_DEVICE) << e.what();
      // Nothing a caller holds changed (cached prefixes evicted to make room
      // before a failed copy stay evicted: sequence.h says so).
      EXPECT_TRUE(before == sequences_now()) << "a failed call changed a sequence: " << e.what();
      return false;
    }
  }

  void remove_at(size_t i) {
    m().remove(ids_[i]);
    ids_.erase(ids_.begin() + long(i));
  }

  void step() {
    static const uint32_t prios[] = {10, 35, 35, 60, 90};
    const uint32_t op = pick(100);
    if (op < 25 || ids_.empty()) {
      const auto p = prompt();
      SequenceOptions o;
      o.prompt_priority = prios[pick(5)];
      o.decode_priority = prios[pick(5)];
      const uint64_t id = next_id_++;
      const uint64_t predicted = m().probe(p.data(), p.size(), o);
      uint64_t cached = 0;
      if (attempt([&] { cached = m().add(id, p.data(), p.size(), o, nullptr); })) {
        EXPECT_EQ(cached, predicted);
        const Sequence& s = m().sequence(id);
        write_sequence(*cache_, s, cached, s.length());
        ids_.push_back(id);
      }
      return;
    }
    const size_t i = pick(uint32_t(ids_.size()));
    const uint64_t id = ids_[i];
    const Sequence& s = m().sequence(id);
    if (op < 40) {
      std::vector<int32_t> t(1 + pick(9));
      for (auto& x : t) x = int32_t(pick(40));
      const uint64_t from = s.length();
      if (attempt([&] { m().extend(id, t.data(), t.size(), nullptr); }))
        write_sequence(*cache_, s, from, s.length());
    } else if (op < 48) {
      std::vector<uint64_t> batch = ids_;
      std::shuffle(batch.begin(), batch.end(), rng_);
      batch.resize(1 + pick(uint32_t(batch.size())));
      std::vector<int32_t> t(batch.size());
      for (auto& x : t) x = int32_t(pick(40));
      if (attempt([&] { m().extend_batch(batch.data(), t.data(), batch.size(), nullptr); }))
        for (uint64_t b : batch) {
          const Sequence& q = m().sequence(b);
          write_sequence(*cache_, q, q.length() - 1, q.length());
        }
    } else if (op < 68) {
      m().commit(id, s.length() - pick(uint32_t(std::min<uint64_t>(s.length(), 3) + 1)) + 0);
    } else if (op < 74) {
      try {  // with windows: refused past a released block
        m().rewind(id, pick(uint32_t(std::min<uint64_t>(s.length(), 6) + 1)));
      } catch (const Error& e) {
        EXPECT_EQ(e.status(), KVC_ERR_INVALID_ARGUMENT) << e.what();
      }
    } else if (op < 79) {
      const uint64_t child = next_id_++;
      m().fork(id, child);
      ids_.push_back(child);
    } else {
      remove_at(i);
    }
  }

  std::mt19937 rng_;
  uint32_t fail_one_in_;
  FaultPlan faults_;  // outlives the cache's device
  std::unique_ptr<Cache> cache_;
  std::vector<std::vector<int32_t>> docs_;
  std::vector<uint64_t> ids_;
  uint64_t next_id_ = 1;
};

CacheConfig base(uint64_t blocks, uint64_t host_blocks) {
  CacheConfig c;
  c.num_layers = 2;
  c.kv_heads = {1};
  c.head_dim = 2;
  c.dtype = KVC_DTYPE_F32;
  c.tokens_per_block = 4;
  c.max_tokens = blocks * 4;
  c.host_cache_bytes = host_blocks * 2 * 2 * 4 * 1 * 2 * 4;  // block set: 128 bytes
  return c;
}

TEST(TierRandomOps, BytesAndInvariantsHoldInBothTiers) {
  TierRandomOps r(base(40, 24), 20261122, 0);
  r.run(8000);
  EXPECT_GT(r.m().stats().host.offloaded_blocks, 500u);
  EXPECT_GT(r.m().stats().host.onboarded_blocks, 200u);
}

TEST(TierRandomOps, FailedCopiesLeaveBytesAndInvariantsIntact) {
  TierRandomOps r(base(40, 24), 7, 6);
  r.run(8000);
  EXPECT_GT(r.device_failures, 100u);
  EXPECT_GT(r.m().stats().host.onboarded_blocks, 100u);
}

// Fault injection at scale: a fault armed before every other call, on tiny
// pools where most calls move blocks between the tiers, with windows and
// with two pools. KVC_FAULT_OPS sets the operations per configuration
// (default 4000, about a thousand faults each); the campaign in the closing
// note of issue 16 ran 150000.
uint64_t fault_ops() {
  const char* v = std::getenv("KVC_FAULT_OPS");
  return v != nullptr ? std::strtoull(v, nullptr, 10) : 4000;
}

TEST(TierRandomOps, InjectedFaultsChangeNoSequenceAndLeakNothing) {
  uint64_t faults = 0;
  for (int variant = 0; variant < 3; ++variant) {
    CacheConfig c = base(12, 8);
    if (variant == 1) {
      c.windows = {0, 9};
      c.host_cache_bytes = 8 * 128;
    } else if (variant == 2) {
      c.num_layers = 3;
      c.kv_heads = {1, 2, 2};
      c.host_cache_bytes = 8 * (2 * 4 * 1 * 2 * 4 + 2 * 2 * 4 * 2 * 2 * 4);
    }
    TierRandomOps r(c, 100 + uint32_t(variant), 2);
    r.run(int(fault_ops()));
    EXPECT_GT(r.device_failures, fault_ops() / 40) << variant;
    faults += r.device_failures;
    r.close_and_check_leaks();
  }
  std::printf("injected tier-copy faults that failed a call: %llu\n", (unsigned long long)faults);
}

TEST(TierRandomOps, TwoPoolsAndHnd) {
  CacheConfig c = base(40, 0);
  c.num_layers = 3;
  c.kv_heads = {1, 2, 2};
  c.layout = KVC_LAYOUT_HND;
  c.host_cache_bytes = 20 * (2 * 4 * 1 * 2 * 4 + 2 * 2 * 4 * 2 * 2 * 4);
  TierRandomOps r(c, 8, 10);
  r.run(5000);
  EXPECT_GT(r.m().stats().host.onboarded_blocks, 100u);
}

TEST(TierRandomOps, CopyOnPartialReuseOffAndSmallHostTier) {
  CacheConfig c = base(32, 4);
  c.copy_on_partial_reuse = false;
  TierRandomOps r(c, 9, 12);
  r.run(5000);
}

TEST(TierRandomOps, OneGroupSharedPoolWindows) {
  CacheConfig c = base(40, 16);
  c.windows = {0, 64};  // equal block bytes: one pool, two groups
  c.host_cache_bytes = 16 * 2 * 128;
  TierRandomOps r(c, 10, 10);
  r.run(5000);
}

}  // namespace
}  // namespace kvc
