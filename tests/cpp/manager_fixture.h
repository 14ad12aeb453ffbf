// What the black-box manager tests share: token ranges, the status a call
// failed with, and a fixture whose steps run the invariant checker after
// every mutation.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <numeric>
#include <vector>

#include "core/cache.h"
#include "base/error.h"

namespace kvc {
namespace test {

// Tokens from, from+1, ..., n of them.
inline std::vector<int32_t> seq(int32_t from, int32_t n) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), from);
  return v;
}

inline std::vector<int32_t> cat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

inline kvc_status_t status_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.status();
  }
  return KVC_OK;
}

class ManagerFixture : public ::testing::Test {
 protected:
  void make(const CacheConfig& c) { cache_ = std::make_unique<Cache>(c); }
  BlockManager& m() { return cache_->manager(); }
  uint64_t add(uint64_t id, const std::vector<int32_t>& t, const SequenceOptions& o = {}) {
    const uint64_t r = m().add(id, t.data(), t.size(), o, nullptr);
    m().check_invariants();
    return r;
  }
  uint64_t probe(const std::vector<int32_t>& t, const SequenceOptions& o = {}) {
    return m().probe(t.data(), t.size(), o);
  }
  void extend(uint64_t id, const std::vector<int32_t>& t) {
    m().extend(id, t.data(), t.size(), nullptr);
    m().check_invariants();
  }
  void commit(uint64_t id, uint64_t n) {
    m().commit(id, n);
    m().check_invariants();
  }
  void commit_all(uint64_t id) { commit(id, m().sequence(id).length()); }
  void remove(uint64_t id) {
    m().remove(id);
    m().check_invariants();
  }
  CacheStats stats() { return m().stats(); }

  std::unique_ptr<Cache> cache_;
};

}  // namespace test
}  // namespace kvc
