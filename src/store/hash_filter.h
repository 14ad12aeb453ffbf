// A counting filter of 64-bit hashes whose read side takes no lock: the
// disk store's answer to "do I hold anything under this hash?" for the
// serving call's lookup (disk_store.h), which is most often a miss (a new
// prompt's first block). A "maybe" costs the caller the store's lock, which
// the store's writer and worker take at every put: on a busy store a
// serving call waited there for milliseconds (bench/results/
// 2026-11-30-disk-lookup-lock-vm-2cpu.md), so a "maybe" must be rare for a
// hash the store does not hold, however many records it holds.
//
// Two stages, each a count per position and a bit per position (count
// non-zero), both written by one thread at a time (the owner's lock) and
// read, bits only, from any thread without it:
// - the first: one bit per bucket of the hash, twice as many buckets as
//   `expected` hashes, a power of two between 2^10 and 2^20, so its bits
//   take at most 128 KiB, which a serving core keeps in its caches (a
//   lookup reads one word). Past half a million hashes most of its bits are
//   set.
// - the second, asked only when the first says maybe: a blocked Bloom
//   filter, k = 4 bits in one 64-bit word (one line read), 16 bits per
//   expected hash (a power of two between 2^10 and 2^25 bits: at most
//   4 MiB, with one byte of count per bit), so a hash it does not hold is a
//   "maybe" about once in 500 at `expected` hashes held.
// A clear bit in either: no such hash was added and not removed; both set:
// maybe. A count that reaches 255 stays there (its bit stays set: "maybe",
// never a false "no"). A reader racing an add may miss it, as a lookup
// racing a put may (block_store.h: a put is found once flush() returned);
// the lock the caller takes to order its calls orders the bits too.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <vector>

namespace kvc {

class HashFilter {
 public:
  explicit HashFilter(uint64_t expected) {
    const uint64_t want = std::min<uint64_t>(expected, uint64_t(1) << 21);
    shift_ = 64 - log2_within(2 * want, 10, 20);
    counts_.assign(size_t(1) << (64 - shift_), 0);
    words_ = zeroed_words(counts_.size() / 64);
    block_shift_ = 64 - (log2_within(16 * want, 10, 25) - 6);  // words of 64 bits
    block_positions_ = size_t(64) << (64 - block_shift_);
    // calloc: pages of counts never written are never touched.
    block_counts_.reset(static_cast<uint8_t*>(std::calloc(block_positions_, 1)));
    if (!block_counts_) throw std::bad_alloc();
    blocks_ = zeroed_words(block_positions_ / 64);
  }

  // The writer (one at a time, under the owner's lock).
  void add(uint64_t hash) {
    const size_t b = bucket(hash);
    if (counts_[b]++ == 0) set_bit(words_[b >> 6], b & 63, true);
    const Block k = block(hash);
    for (uint64_t m = k.mask; m != 0; m &= m - 1) {
      uint8_t& c = block_counts_[k.word * 64 + size_t(__builtin_ctzll(m))];
      if (c == kStuck) continue;
      if (c++ == 0) set_bit(blocks_[k.word], size_t(__builtin_ctzll(m)), true);
    }
  }
  void remove(uint64_t hash) {
    const size_t b = bucket(hash);
    if (--counts_[b] == 0) set_bit(words_[b >> 6], b & 63, false);
    const Block k = block(hash);
    for (uint64_t m = k.mask; m != 0; m &= m - 1) {
      uint8_t& c = block_counts_[k.word * 64 + size_t(__builtin_ctzll(m))];
      if (c == kStuck) continue;
      if (--c == 0) set_bit(blocks_[k.word], size_t(__builtin_ctzll(m)), false);
    }
  }

  // Any thread, no lock.
  bool maybe_contains(uint64_t hash) const {
    const size_t b = bucket(hash);
    if (((words_[b >> 6].load(std::memory_order_relaxed) >> (b & 63)) & 1) == 0) return false;
    const Block k = block(hash);
    return (blocks_[k.word].load(std::memory_order_relaxed) & k.mask) == k.mask;
  }

  // Tests (under the owner's lock): the counters and bits of both stages
  // are those of exactly `hashes` (a stuck count: any, its bit set).
  bool matches(const std::vector<uint64_t>& hashes) const {
    std::vector<uint32_t> want(counts_.size(), 0), want_blocks(block_positions_, 0);
    for (uint64_t h : hashes) {
      ++want[bucket(h)];
      const Block k = block(h);
      for (uint64_t m = k.mask; m != 0; m &= m - 1)
        ++want_blocks[k.word * 64 + size_t(__builtin_ctzll(m))];
    }
    for (size_t b = 0; b < counts_.size(); ++b)
      if (counts_[b] != want[b] || bit(words_, b) != (want[b] != 0)) return false;
    for (size_t b = 0; b < block_positions_; ++b) {
      const uint32_t c = block_counts_[b];
      if (c != kStuck && c != want_blocks[b]) return false;  // a stuck count is any
      if (bit(blocks_, b) != (c != 0)) return false;
    }
    return true;
  }

 private:
  static constexpr uint8_t kStuck = 255;
  struct Block {
    size_t word;
    uint64_t mask;  // 1 to 4 bits
  };
  static uint32_t log2_within(uint64_t want, uint32_t lo, uint32_t hi) {
    uint32_t bits = lo;
    while (bits < hi && (uint64_t(1) << bits) < want) ++bits;
    return bits;
  }
  static std::unique_ptr<std::atomic<uint64_t>[]> zeroed_words(size_t n) {
    std::unique_ptr<std::atomic<uint64_t>[]> w(new std::atomic<uint64_t>[n]);
    for (size_t i = 0; i < n; ++i) w[i].store(0, std::memory_order_relaxed);
    return w;
  }
  static bool bit(const std::unique_ptr<std::atomic<uint64_t>[]>& w, size_t b) {
    return (w[b >> 6].load(std::memory_order_relaxed) >> (b & 63)) & 1;
  }
  static void set_bit(std::atomic<uint64_t>& w, size_t b, bool on) {
    const uint64_t m = uint64_t(1) << b;
    const uint64_t v = w.load(std::memory_order_relaxed);
    w.store(on ? v | m : v & ~m, std::memory_order_relaxed);
  }
  // The first stage's bucket: the top bits of a multiplicative mix.
  size_t bucket(uint64_t hash) const { return size_t((hash * 0x9E3779B97F4A7C15ull) >> shift_); }
  // The second stage's word and bits: the top bits of a full mix (the
  // splitmix64 finalizer, so independent of the first stage's bucket)
  // choose the word, its four low 6-bit fields the bits.
  Block block(uint64_t hash) const {
    uint64_t z = hash;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    const uint64_t mask = (uint64_t(1) << (z & 63)) | (uint64_t(1) << ((z >> 6) & 63)) |
                          (uint64_t(1) << ((z >> 12) & 63)) | (uint64_t(1) << ((z >> 18) & 63));
    return Block{size_t(z >> block_shift_), mask};
  }

  uint32_t shift_ = 64;
  std::vector<uint32_t> counts_;
  std::unique_ptr<std::atomic<uint64_t>[]> words_;
  uint32_t block_shift_ = 64;
  size_t block_positions_ = 0;
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t[], Free> block_counts_;
  std::unique_ptr<std::atomic<uint64_t>[]> blocks_;
};

}  // namespace kvc
