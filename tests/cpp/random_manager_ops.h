// The randomized driver of the cache manager (test_block_manager_random.cpp):
// random operations with a fixed seed, the invariant checker after every
// one, a whole-state snapshot that a failed operation must leave equal and
// a probe must predict the next add exactly; with events on, a router's
// index fed only by the drained events equal to the snapshot.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <vector>

#include "core/cache.h"
#include "base/error.h"
#include "event_shadow.h"

namespace kvc {
namespace test {

struct Snapshot {
  std::vector<BlockInfo> blocks;
  std::vector<uint64_t> counts;
  std::vector<std::vector<uint32_t>> seqs;

  static Snapshot of(const BlockManager& m, const std::vector<uint64_t>& ids) {
    Snapshot s;
    for (size_t p = 0; p < m.num_pools(); ++p)
      for (uint32_t b = 0; b < m.pool(uint32_t(p)).capacity(); ++b) s.blocks.push_back(m.pool(uint32_t(p)).info(b));
    const CacheStats st = m.stats();
    s.counts = {st.free_blocks, st.cached_blocks, st.in_use_blocks, st.reused_blocks,
                st.missed_blocks, st.evicted_blocks, st.num_sequences, st.num_pinned,
                st.tree_nodes, m.policy().size()};
    for (uint32_t g = 0; g < m.num_groups(); ++g) {
      const GroupStats gs = m.group_stats(g);
      s.counts.insert(s.counts.end(), {gs.in_use_blocks, gs.cached_blocks, gs.reused_blocks,
                                       gs.missed_blocks, gs.evicted_blocks, gs.released_blocks});
    }
    for (uint64_t id : ids) {
      const Sequence* q = m.find_sequence(id);
      std::vector<uint32_t> v{uint32_t(id), q ? uint32_t(q->length()) : 0u,
                              q ? uint32_t(q->committed) : 0u};
      if (q)
        for (const auto& g : q->blocks) v.insert(v.end(), g.begin(), g.end());
      if (q) v.insert(v.end(), q->nodes.begin(), q->nodes.end());
      if (q)
        for (uint64_t w : q->window_begin) v.push_back(uint32_t(w));
      s.seqs.push_back(std::move(v));
    }
    return s;
  }
  bool operator==(const Snapshot& o) const {
    if (blocks.size() != o.blocks.size()) return false;
    for (size_t i = 0; i < blocks.size(); ++i)
      if (blocks[i].ref != o.blocks[i].ref || blocks[i].node != o.blocks[i].node) return false;
    return counts == o.counts && seqs == o.seqs;
  }
};

class RandomOps {
 public:
  RandomOps(const CacheConfig& cfg, uint32_t seed)
      : cache_(cfg), rng_(seed), retention_(cfg.manual_clock) {
    for (int d = 0; d < 6; ++d) {
      std::vector<int32_t> doc(64);
      for (auto& t : doc) t = int32_t(rng_() % 50);
      docs_.push_back(doc);
    }
  }

  // Calls go mostly to the newest sequences, so forks of forks, pins,
  // rewinds and removals meet the same few blocks (what the fuzzer found
  // and the uniform choice rarely reached); prompts of at most 19 tokens
  // for tiny pools.
  void focus_on_families() { families_ = true; }
  // kvc_cache_resize among the operations (1 in 20): to a budget drawn from
  // [lo, hi] bytes; the pools' base pointers must never move.
  void resize_between(uint64_t lo, uint64_t hi) {
    resize_lo_ = lo;
    resize_hi_ = hi;
    for (size_t p = 0; p < cache_.num_pools(); ++p) bases_.push_back(cache_.pool(uint32_t(p)).base());
  }
  uint64_t resizes = 0, refused_resizes = 0;
  uint64_t min_blocks = UINT64_MAX, max_blocks = 0;  // the stats' num_blocks seen

  void run(int ops) {
    for (int i = 0; i < ops; ++i) {
      step();
      m().check_invariants();
      max_expiries = std::max<uint64_t>(max_expiries, m().expiries().size());
      if (m().events() != nullptr) {
        ASSERT_EQ(shadow.drain(m(), 1 + pick(9)), "") << "after operation " << i;
        ASSERT_EQ(shadow.compare(m()), "") << "after operation " << i;
      }
    }
    for (uint32_t g = 0; g < m().num_groups(); ++g) groups.push_back(m().group_stats(g));
    // Drain: everything removed and unpinned leaves no block in use.
    while (!ids_.empty()) remove_at(0);
    while (!pins_.empty()) {
      m().unpin(pins_.back());
      pins_.pop_back();
    }
    m().check_invariants();
    EXPECT_EQ(m().stats().in_use_blocks, 0u);
    m().reset_reuse();
    EXPECT_EQ(m().stats().free_blocks, m().stats().num_blocks);
    if (m().events() != nullptr) {
      ASSERT_EQ(shadow.drain(m()), "");
      ASSERT_EQ(shadow.compare(m()), "");
    }
  }

  test::EventShadow shadow;  // with events on
  uint64_t successes = 0, failures = 0;
  uint64_t max_expiries = 0;  // most cached blocks waiting for a priority expiry
  std::vector<GroupStats> groups;  // per group, before the drain
  BlockManager& m() { return cache_.manager(); }

 private:
  uint32_t pick(uint32_t n) { return uint32_t(rng_() % n); }

  std::vector<int32_t> prompt() {
    const auto& doc = docs_[pick(uint32_t(docs_.size()))];
    std::vector<int32_t> p(doc.begin(), doc.begin() + 1 + pick(families_ ? 16 : 40));
    for (uint32_t k = pick(families_ ? 4 : 9); k > 0; --k) p.push_back(int32_t(pick(50)));
    return p;
  }
  SequenceOptions options() {
    SequenceOptions o;
    static const uint32_t prios[] = {0, 20, 35, 80, 100};
    o.prompt_priority = prios[pick(5)];
    o.decode_priority = prios[pick(5)];
    switch (pick(4)) {
      case 0: o.has_salt = true; o.salt = "a"; break;
      case 1: o.has_salt = true; break;  // empty salt
      case 2: o.has_lora = true; o.lora_id = pick(2); break;
      default: break;
    }
    if (pick(8) == 0) o.extra_keys.push_back(ExtraKey{pick(20), 1 + pick(6), pick(2) ? "img" : "vid"});
    if (retention_) {
      // Up to three ranges from random cut points (sometimes overlapping or
      // open before the last: rejected), durations of 0..40 ms.
      uint64_t at = pick(6);
      for (uint32_t k = pick(4); k > 0; --k) {
        RetentionRange r;
        r.start = pick(8) == 0 ? at + pick(8) : at;
        r.end = pick(6) == 0 ? kOpenEnd : r.start + 1 + pick(20);
        r.priority = prios[pick(5)] + (pick(50) == 0 ? 101 : 0);
        r.duration_ms = pick(2) ? 0 : pick(41);
        o.retention_ranges.push_back(r);
        at = r.end == kOpenEnd ? r.start : r.end - (pick(10) == 0 ? 2 : 0);
      }
      o.decode_duration_ms = pick(2) ? 0 : pick(41);
    }
    return o;
  }

  // Runs one operation; a failure must leave the snapshot unchanged.
  template <class F>
  bool attempt(F&& f) {
    const Snapshot before = Snapshot::of(m(), ids_);
    const uint64_t events_before = m().events() ? m().events()->last_id() : 0;
    try {
      f();
      ++successes;
      return true;
    } catch (const Error& e) {
      ++failures;
      EXPECT_TRUE(e.status() == KVC_ERR_OUT_OF_BLOCKS || e.status() == KVC_ERR_INVALID_ARGUMENT ||
                  e.status() == KVC_ERR_NOT_FOUND || e.status() == KVC_ERR_ALREADY_EXISTS ||
                  e.status() == KVC_ERR_INVALID_STATE)
          << e.what();
      const Snapshot after = Snapshot::of(m(), ids_);
      EXPECT_TRUE(before == after) << "state changed by a failed call: " << e.what();
      if (m().events() != nullptr) {
        EXPECT_EQ(m().events()->last_id(), events_before) << "a failed call emitted: " << e.what();
      }
      return false;
    }
  }

  void remove_at(size_t i) {
    m().remove(ids_[i]);
    ids_.erase(ids_.begin() + long(i));
  }

  void step() {
    if (resize_hi_ != 0 && pick(20) == 0) {
      const uint64_t bytes = resize_lo_ + rng_() % (resize_hi_ - resize_lo_ + 1);
      if (attempt([&] { cache_.resize(bytes); })) ++resizes;
      else ++refused_resizes;
      for (size_t p = 0; p < cache_.num_pools(); ++p)
        EXPECT_EQ(cache_.pool(uint32_t(p)).base(), bases_[p]) << "pool " << p << " moved";
      min_blocks = std::min<uint64_t>(min_blocks, m().stats().num_blocks);
      max_blocks = std::max<uint64_t>(max_blocks, m().stats().num_blocks);
      return;
    }
    if (retention_ && pick(15) == 0) {
      attempt([&] { m().advance_clock(pick(25)); });
      return;
    }
    if (families_ && ids_.size() > 4) {  // tiny pools: few sequences and pins live
      remove_at(0);
      return;
    }
    if (families_ && pins_.size() > 1) {
      m().unpin(pins_.front());
      pins_.erase(pins_.begin());
      return;
    }
    const uint32_t op = pick(100);
    if (op < 22 || ids_.empty()) {
      const auto p = prompt();
      const SequenceOptions o = options();
      const uint64_t id = next_id_++;
      uint64_t predicted = 0;
      try {
        predicted = m().probe(p.data(), p.size(), o);
      } catch (const Error& e) {  // invalid options: the add must refuse them too
        EXPECT_EQ(e.status(), KVC_ERR_INVALID_ARGUMENT) << e.what();
        EXPECT_FALSE(attempt([&] { m().add(id, p.data(), p.size(), o, nullptr); }));
        return;
      }
      const Snapshot before = Snapshot::of(m(), ids_);
      m().probe(p.data(), p.size(), o);
      EXPECT_TRUE(before == Snapshot::of(m(), ids_)) << "probe changed the state";
      uint64_t got = 0;
      if (attempt([&] { got = m().add(id, p.data(), p.size(), o, nullptr); })) {
        EXPECT_EQ(got, predicted);
        EXPECT_LT(got, p.size());
        ids_.push_back(id);
      }
      return;
    }
    // Families: most calls on the newest sequences (forks of forks).
    const size_t n_ids = ids_.size();
    const size_t i = families_ && pick(3) != 0
                         ? n_ids - 1 - pick(uint32_t(std::min<size_t>(n_ids, 3)))
                         : pick(uint32_t(n_ids));
    const uint64_t id = ids_[i];
    const Sequence& s = m().sequence(id);
    if (op < 36) {
      std::vector<int32_t> t(1 + pick(9));
      for (auto& x : t) x = int32_t(pick(50));
      attempt([&] { m().extend(id, t.data(), t.size(), nullptr); });
    } else if (op < 44) {
      std::vector<uint64_t> batch = ids_;
      std::shuffle(batch.begin(), batch.end(), rng_);
      batch.resize(1 + pick(uint32_t(batch.size())));
      if (pick(20) == 0) batch.push_back(batch[0]);  // a repeated id
      std::vector<int32_t> t(batch.size());
      for (auto& x : t) x = int32_t(pick(50));
      attempt([&] { m().extend_batch(batch.data(), t.data(), batch.size(), nullptr); });
    } else if (op < 60) {
      const uint64_t n = s.length() == 0 ? 0 : s.committed + pick(uint32_t(s.length() - s.committed + 2));
      attempt([&] { m().commit(id, n); });
    } else if (op < 67) {
      const uint64_t n = pick(uint32_t(std::min<uint64_t>(s.length(), 12) + 2));
      attempt([&] { m().rewind(id, n); });
    } else if (op < 72) {
      const uint64_t child = pick(10) == 0 ? id : next_id_++;
      if (attempt([&] { m().fork(id, child); })) ids_.push_back(child);
    } else if (op < 88) {
      remove_at(i);
    } else if (op < 91) {
      if (attempt([&] { m().pin(id); })) pins_.push_back(id);
    } else if (op < 94) {
      if (!pins_.empty()) {
        const size_t k = pick(uint32_t(pins_.size()));
        m().unpin(pins_[k]);
        pins_.erase(pins_.begin() + long(k));
      } else {
        attempt([&] { m().unpin(id); });
      }
    } else if (op < 96) {
      attempt([&] { m().reset_reuse(); });
    } else {
      uint64_t need = 0;
      attempt([&] { need = m().blocks_needed(id, pick(20)); });
      (void)need;
    }
  }

  Cache cache_;
  std::mt19937 rng_;
  std::vector<std::vector<int32_t>> docs_;
  std::vector<uint64_t> ids_;
  std::vector<uint64_t> pins_;
  uint64_t next_id_ = 1;
  bool retention_;  // retention ranges, durations and clock advances
  bool families_ = false;
  uint64_t resize_lo_ = 0, resize_hi_ = 0;  // resizes off when hi is 0
  std::vector<void*> bases_;
};

}  // namespace test
}  // namespace kvc
