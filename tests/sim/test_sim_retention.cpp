// The simulator's system-prompt retention through CacheAdapter: a request's
// first system_length tokens, retained at system_priority, outlive blocks
// that LRU would keep, and without the range the same adds evict them.
//
// Four blocks of 16 tokens. A = system S (2 blocks) + tail T (1 block);
// C = one unrelated block, released after A; then D = two unrelated blocks
// needs two evictions among S1, S2, T, C. LRU evicts A's leaves first (T,
// then S2, both released before C); with S retained at 90 the two blocks
// at the default priority (T and C) go instead, and S stays cached.
#include <cstdint>
#include <string>
#include <vector>

#include "cache_adapter.h"
#include "check.h"
#include "presets.h"

using namespace sim;

// Tokens [from, from + n).
static std::vector<int32_t> tokens(int32_t from, int32_t n) {
  std::vector<int32_t> v;
  for (int32_t i = 0; i < n; ++i) v.push_back(from + i);
  return v;
}

// Cached tokens of the system prompt after D, with S at `system_priority`
// (0: no retention range).
static uint64_t system_cached_after_pressure(uint32_t system_priority) {
  SimConfig c;
  c.model = *find_preset("tiny");
  c.tokens_per_block = 16;
  c.memory_bytes = 4 * 16 * 4;  // four blocks of 16 tokens of 4 bytes
  CacheAdapter cache(c, 0);
  SIM_CHECK_EQ(cache.counters().capacity, uint64_t{4});

  SequenceOptions a;
  a.system_length = 32;
  a.system_priority = system_priority;
  SequenceOptions plain;
  uint64_t cached = 0;

  // A: 48 prompt tokens, committed and released: three cached blocks.
  const std::vector<int32_t> ta = tokens(1000, 48);
  SIM_CHECK(cache.add(1, ta, a, cached));
  cache.commit(1, 48);
  cache.remove(1);
  const std::vector<int32_t> tc = tokens(2000, 16);
  SIM_CHECK(cache.add(2, tc, plain, cached));
  cache.commit(2, 16);
  cache.remove(2);
  SIM_CHECK_EQ(cache.counters().cached, uint64_t{4});

  const std::vector<int32_t> td = tokens(3000, 32);
  SIM_CHECK(cache.add(3, td, plain, cached));
  SIM_CHECK_EQ(cache.counters().evicted, uint64_t{2});
  return cache.probe(4, tokens(1000, 33), a);
}

int main() {
  SIM_CHECK_EQ(system_cached_after_pressure(90), uint64_t{32});
  SIM_CHECK(system_cached_after_pressure(0) < 32);
  std::puts("simulator retention: all checks passed");
  return 0;
}
