// RadixTree::match_full_blocks (successor guesses, hashed spans) against a
// lookup of every block with find(), on trees grown and pruned at random:
// chains published in one go (consecutive ids), ids reused out of order
// after erasures, siblings right after their parent's successor, dead
// records left where a guess looks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "base/error.h"
#include "core/block_hash.h"
#include "core/key_builder.h"
#include "core/radix_tree.h"

namespace kvc {
namespace {

constexpr uint32_t kScope = 1;
constexpr uint64_t kScopeDigest = 0x5c09e;

struct Walker {
  RadixTree& tree;
  uint32_t T;

  // The reference: find() block after block.
  std::vector<uint32_t> by_find(const std::vector<int32_t>& p, uint64_t blocks) const {
    std::vector<uint32_t> nodes;
    uint32_t parent = RadixTree::kRoot;
    uint64_t h = 0;
    for (uint64_t b = 0; b < blocks; ++b) {
      const int32_t* t = p.data() + b * T;
      h = hash_block(h, kScopeDigest, 0, t, T);
      const uint32_t n = tree.find(parent, kScope, t, T, std::string(), h);
      if (n == kNoNode) break;
      nodes.push_back(n);
      parent = n;
    }
    return nodes;
  }

  // Inserts the missing blocks of p's first `blocks` blocks.
  void publish(const std::vector<int32_t>& p, uint64_t blocks) {
    uint32_t parent = RadixTree::kRoot;
    uint64_t h = 0;
    for (uint64_t b = 0; b < blocks && !tree.full(); ++b) {
      const int32_t* t = p.data() + b * T;
      h = hash_block(h, kScopeDigest, 0, t, T);
      uint32_t n = tree.find(parent, kScope, t, T, std::string(), h);
      if (n == kNoNode) {
        const uint32_t block = uint32_t(b);
        const std::string no_extra;
        n = tree.insert(BlockKey{parent, kScope, t, T, &no_extra, h}, &block);
      }
      parent = n;
    }
  }
};

void run(uint32_t T, uint32_t seed) {
  RadixTree tree(3000, T, 1);
  Walker w{tree, T};
  std::mt19937 rng(seed);
  // Prompts from a few stems with random tails and a small alphabet, so
  // that they share prefixes and diverge anywhere.
  const uint64_t max_blocks = 200;
  std::vector<std::vector<int32_t>> stems(6);
  for (auto& s : stems) {
    s.resize(max_blocks * T);
    for (auto& x : s) x = int32_t(rng() % 4);
  }
  auto make_prompt = [&] {
    std::vector<int32_t> p = stems[rng() % stems.size()];
    const uint64_t cut = rng() % (max_blocks * T);
    for (uint64_t i = cut; i < p.size(); ++i)
      if (rng() % 4 == 0) p[i] = int32_t(rng() % 4);
    return p;
  };
  uint64_t queries = 0, matched = 0;
  for (int op = 0; op < 3000; ++op) {
    const uint32_t kind = rng() % 8;
    if (kind < 3) {
      w.publish(make_prompt(), 1 + rng() % max_blocks);
    } else if (kind < 5) {
      // Erase a few leaves (any id, spare ones included: radix_tree.h).
      for (int k = 0; k < 20; ++k) {
        const uint32_t id = 1 + rng() % (tree.id_bound() - 1);
        if (tree.node(id).live && tree.is_leaf(id)) tree.erase(id);
      }
    } else {
      const std::vector<int32_t> p = make_prompt();
      const uint64_t blocks = 1 + rng() % max_blocks;
      std::vector<uint32_t> walked;
      tree.match_full_blocks(RadixTree::kRoot, 0, kScope, kScopeDigest, p.data(), blocks, walked);
      ASSERT_EQ(walked, w.by_find(p, blocks)) << "T " << T << ", operation " << op;
      ++queries;
      matched += walked.size();
    }
  }
  EXPECT_GT(queries, 500u);
  EXPECT_GT(matched, queries * 5);  // the walks went deep, not just to the first miss
}

TEST(PrefixWalkTest, MatchesFindOnRandomTrees16) { run(16, 1); }
TEST(PrefixWalkTest, MatchesFindOnRandomTrees8) { run(8, 2); }
TEST(PrefixWalkTest, MatchesFindOnRandomTrees32) { run(32, 3); }

// The record after a node's, dead but still holding a matching key, is no
// successor: past the first hashed span the walk guesses, and must stop
// where the chain was cut.
TEST(PrefixWalkTest, ErasedSuccessorIsNotFound) {
  const uint32_t T = 16, n = 300;
  RadixTree tree(400, T, 1);
  Walker w{tree, T};
  std::vector<int32_t> p(n * T);
  for (size_t i = 0; i < p.size(); ++i) p[i] = int32_t(i);
  w.publish(p, n);
  std::vector<uint32_t> all;
  tree.match_full_blocks(RadixTree::kRoot, 0, kScope, kScopeDigest, p.data(), n, all);
  ASSERT_EQ(all, w.by_find(p, n));
  ASSERT_EQ(all.size(), n);
  for (uint32_t b = n - 1; b >= 250; --b) tree.erase(all[b]);
  std::vector<uint32_t> walked;
  tree.match_full_blocks(RadixTree::kRoot, 0, kScope, kScopeDigest, p.data(), n, walked);
  EXPECT_EQ(walked, std::vector<uint32_t>(all.begin(), all.begin() + 250));
  // Re-published, the cut part takes the freed ids back (in order).
  w.publish(p, n);
  walked.clear();
  tree.match_full_blocks(RadixTree::kRoot, 0, kScope, kScopeDigest, p.data(), n, walked);
  EXPECT_EQ(walked, w.by_find(p, n));
  EXPECT_EQ(walked.size(), n);
}

// A node's tier is copied into its record's flags (RadixTree::tier, read
// where the record is in cache): the walk and find() leave it out of the
// key, so a node found before a move to another tier is found after it,
// and a node with extra keys keeps them.
TEST(PrefixWalkTest, ATiersCopyInTheRecordIsNoPartOfTheKey) {
  const uint32_t T = 16, n = 100;
  RadixTree tree(200, T, 1);
  Walker w{tree, T};
  std::vector<int32_t> p(n * T);
  for (size_t i = 0; i < p.size(); ++i) p[i] = int32_t(i % 7);
  w.publish(p, n);
  std::vector<uint32_t> all;
  tree.match_full_blocks(RadixTree::kRoot, 0, kScope, kScopeDigest, p.data(), n, all);
  ASSERT_EQ(all.size(), n);
  // A block with extra keys under the chain's last node.
  const std::vector<int32_t> tail(T, 5);
  const std::string extra = "image-7";
  const uint64_t tail_hash = 0xe7;
  const uint32_t block = 999;
  const uint32_t with_extra =
      tree.insert(BlockKey{all.back(), kScope, tail.data(), T, &extra, tail_hash}, &block);
  for (uint32_t b = 0; b < n; b += 2) tree.set_tier(all[b], 1);
  tree.set_tier(with_extra, 1);
  for (uint32_t b = 0; b < n; ++b) {
    EXPECT_EQ(tree.tier(all[b]), b % 2 == 0 ? 1 : 0) << "block " << b;
    EXPECT_EQ(tree.tier(all[b]), tree.node(all[b]).tier) << "block " << b;
  }
  std::vector<uint32_t> walked;
  tree.match_full_blocks(RadixTree::kRoot, 0, kScope, kScopeDigest, p.data(), n, walked);
  EXPECT_EQ(walked, all);
  EXPECT_EQ(w.by_find(p, n), all);
  EXPECT_EQ(tree.find(all.back(), kScope, tail.data(), T, extra, tail_hash), with_extra);
  EXPECT_EQ(tree.find(all.back(), kScope, tail.data(), T, std::string(), tail_hash), kNoNode);
  EXPECT_NO_THROW(tree.check_tables());
  for (uint32_t b = 0; b < n; b += 2) tree.set_tier(all[b], 0);
  tree.set_tier(with_extra, 0);
  EXPECT_EQ(tree.tier(with_extra), 0);
  EXPECT_EQ(tree.find(all.back(), kScope, tail.data(), T, extra, tail_hash), with_extra);
  walked.clear();
  tree.match_full_blocks(RadixTree::kRoot, 0, kScope, kScopeDigest, p.data(), n, walked);
  EXPECT_EQ(walked, all);
  // A copy that disagrees with the node is an invariant the checker names.
  tree.node(all[3]).tier = 1;
  EXPECT_THROW(tree.check_tables(), Error);
}

}  // namespace
}  // namespace kvc
