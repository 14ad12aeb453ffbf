// The disk store's lookup filter (store/hash_filter.h): never a false "no"
// for a hash added and not removed, whatever shares its bucket; "no" again
// once every hash of a bucket is removed; the counters and bits match the
// hashes held after any sequence of adds and removes.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "store/hash_filter.h"

namespace kvc {
namespace {

TEST(HashFilter, NeverSaysNoForAHashItHoldsAndForgetsRemovedOnes) {
  HashFilter f(16);  // the smallest table: 1024 buckets, so buckets are shared
  std::mt19937_64 rng(5);
  std::vector<uint64_t> held, gone;
  for (int i = 0; i < 5000; ++i) held.push_back(rng());
  for (uint64_t h : held) f.add(h);
  for (uint64_t h : held) ASSERT_TRUE(f.maybe_contains(h));
  EXPECT_TRUE(f.matches(held));
  // Remove every other one: those kept are still found.
  std::vector<uint64_t> kept;
  for (size_t i = 0; i < held.size(); ++i) (i % 2 == 0 ? kept : gone).push_back(held[i]);
  for (uint64_t h : gone) f.remove(h);
  for (uint64_t h : kept) ASSERT_TRUE(f.maybe_contains(h));
  EXPECT_TRUE(f.matches(kept));
  // Remove the rest: nothing is held, every answer is "no".
  for (uint64_t h : kept) f.remove(h);
  for (uint64_t h : held) EXPECT_FALSE(f.maybe_contains(h));
  EXPECT_TRUE(f.matches({}));
}

TEST(HashFilter, AHashAddedTwiceStaysUntilRemovedTwice) {
  HashFilter f(1000);
  f.add(42);
  f.add(42);  // the disk store counts a hash once per map it is in (queued and indexed)
  f.remove(42);
  EXPECT_TRUE(f.maybe_contains(42));
  f.remove(42);
  EXPECT_FALSE(f.maybe_contains(42));
  EXPECT_TRUE(f.matches({}));
}

}  // namespace
}  // namespace kvc
