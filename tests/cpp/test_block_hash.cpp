// The lookup's inline block hashes (block_hash_inline.h) against the
// out-of-line ones that publishing uses: a block hashed one way and looked
// up the other must land on the same bucket.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "core/block_hash.h"
#include "core/block_hash_inline.h"

namespace kvc {
namespace {

std::vector<int32_t> random_tokens(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = int32_t(rng());
  return t;
}

TEST(BlockHashTest, SixtyFourBytesMatchXxh3WithSeed) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 1000; ++i) {
    const uint64_t seed = i == 0 ? 0 : rng();
    const std::vector<int32_t> block = random_tokens(16, uint32_t(i));
    const hash_detail::Xxh3Of64Bytes h(seed);
    ASSERT_EQ(h(block.data()), XXH3_64bits_withSeed(block.data(), 64, seed)) << "seed " << seed;
  }
}

TEST(BlockHashTest, ChainMatchesPerBlockHashes) {
  for (uint32_t tokens_per_block : {2u, 8u, 16u, 32u, 64u, 128u}) {
    const size_t blocks = 40;
    const std::vector<int32_t> t = random_tokens(blocks * tokens_per_block, tokens_per_block);
    const uint64_t scope_digest = 0x5eed0000u + tokens_per_block;
    std::vector<uint64_t> chained(blocks);
    hash_chain(0x1234, scope_digest, t.data(), tokens_per_block, blocks, chained.data());
    uint64_t h = 0x1234;
    for (size_t b = 0; b < blocks; ++b) {
      h = hash_block(h, scope_digest, 0, t.data() + b * tokens_per_block, tokens_per_block);
      ASSERT_EQ(chained[b], h) << tokens_per_block << " tokens per block, block " << b;
    }
  }
}

}  // namespace
}  // namespace kvc
