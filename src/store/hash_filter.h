// A counting filter of 64-bit hashes whose read side takes no lock: the
// disk store's answer to "do I hold anything under this hash?" for the
// serving call's lookup (disk_store.h), which is most often a miss (a new
// prompt's first block).
//
// One counter per bucket of the hash (the count of the hashes added and not
// removed that fall in it) and, beside the counters, one bit per bucket
// (counter non-zero). The counters and the bits are written by one thread
// at a time (the owner's lock); maybe_contains() reads only the bit, from
// any thread, without the lock. A clear bit: no such hash was added and not
// removed; a set one: maybe (the hash, or another of its bucket). A reader
// racing an add may miss it, as a lookup racing a put may (block_store.h:
// a put is found once flush() returned); the lock the caller takes to
// order its calls orders the bits too.
//
// Size: twice as many buckets as `expected` hashes, a power of two between
// 2^10 and 2^20, so the bits take at most 128 KiB, which a serving core
// keeps in its caches better than the counters (a lookup reads one word).
// More hashes than that only make "maybe" more frequent.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace kvc {

class HashFilter {
 public:
  explicit HashFilter(uint64_t expected) {
    const uint64_t want = 2 * std::min<uint64_t>(expected, uint64_t(1) << 21);
    uint32_t bits = 10;
    while (bits < 20 && (uint64_t(1) << bits) < want) ++bits;
    shift_ = 64 - bits;
    counts_.assign(size_t(1) << bits, 0);
    words_.reset(new std::atomic<uint64_t>[(size_t(1) << bits) / 64]);
    for (size_t i = 0; i < (size_t(1) << bits) / 64; ++i) words_[i].store(0, std::memory_order_relaxed);
  }

  // The writer (one at a time, under the owner's lock).
  void add(uint64_t hash) {
    const size_t b = bucket(hash);
    if (counts_[b]++ == 0) set_bit(b, true);
  }
  void remove(uint64_t hash) {
    const size_t b = bucket(hash);
    if (--counts_[b] == 0) set_bit(b, false);
  }

  // Any thread, no lock.
  bool maybe_contains(uint64_t hash) const {
    const size_t b = bucket(hash);
    return (words_[b >> 6].load(std::memory_order_relaxed) >> (b & 63)) & 1;
  }

  // Tests (under the owner's lock): the counters and bits are those of
  // exactly `hashes`.
  bool matches(const std::vector<uint64_t>& hashes) const {
    std::vector<uint32_t> want(counts_.size(), 0);
    for (uint64_t h : hashes) ++want[bucket(h)];
    for (size_t b = 0; b < counts_.size(); ++b) {
      const bool bit = (words_[b >> 6].load(std::memory_order_relaxed) >> (b & 63)) & 1;
      if (counts_[b] != want[b] || bit != (want[b] != 0)) return false;
    }
    return true;
  }

 private:
  size_t bucket(uint64_t hash) const {
    return size_t((hash * 0x9E3779B97F4A7C15ull) >> shift_);  // the top bits of a multiplicative mix
  }
  void set_bit(size_t b, bool on) {
    std::atomic<uint64_t>& w = words_[b >> 6];
    const uint64_t m = uint64_t(1) << (b & 63);
    const uint64_t v = w.load(std::memory_order_relaxed);
    w.store(on ? v | m : v & ~m, std::memory_order_relaxed);
  }

  uint32_t shift_ = 64;
  std::vector<uint32_t> counts_;
  std::unique_ptr<std::atomic<uint64_t>[]> words_;
};

}  // namespace kvc
