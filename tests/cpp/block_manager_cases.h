// The fixture of the black-box manager cases (test_block_manager.cpp,
// test_block_manager_eviction.cpp): a small cache and the steps they share.
#pragma once

#include <cstdint>
#include <vector>

#include "core/cache.h"
#include "manager_fixture.h"

namespace kvc {
namespace test {

inline CacheConfig small_config(uint64_t blocks, uint32_t T = 4) {
  CacheConfig c;
  c.num_layers = 2;
  c.kv_heads = {2};
  c.head_dim = 4;
  c.dtype = KVC_DTYPE_F32;
  c.tokens_per_block = T;
  c.max_tokens = blocks * T;
  return c;
}

class ManagerTest : public ManagerFixture {
 protected:
  // Adds, commits everything and removes: the prompt ends up cached.
  void cache_prompt(uint64_t id, const std::vector<int32_t>& t, SequenceOptions o = {}) {
    add(id, t, o);
    commit_all(id);
    remove(id);
  }
  uint32_t block(uint64_t id, uint64_t b) { return m().sequence(id).blocks[0][b]; }
  uint32_t ref(uint32_t blk) { return m().pool(0).info(blk).ref; }
};

}  // namespace test
}  // namespace kvc
