// Cases of Device::copy_ranges for the tests (the CPU backend and the
// default in test_copy_ranges.cpp, CUDA in tests/gpu/test_copy_ranges_gpu.cpp):
// ranges between a source buffer and a destination buffer, given as
// offsets. Destinations never overlap (the contract); sources may. The
// destination starts as a pattern, so a byte written outside a range, or a
// range byte left unwritten, shows.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace copy_ranges_case {

struct Span {
  uint64_t dst = 0;  // offset in the destination buffer
  uint64_t src = 0;  // offset in the source buffer
  uint64_t bytes = 0;
};

struct Case {
  std::string name;
  uint64_t dst_bytes = 0;  // buffer sizes
  uint64_t src_bytes = 0;
  std::vector<Span> spans;
};

// Destinations one after another from `at`, `gap(i)` bytes apart.
template <class Gap, class Src>
Case lay_out(std::string name, const std::vector<uint64_t>& sizes, Gap gap, Src src_of,
             uint64_t src_bytes) {
  Case c;
  c.name = std::move(name);
  c.src_bytes = src_bytes;
  uint64_t at = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    at += gap(i);
    c.spans.push_back({at, src_of(i, sizes[i]), sizes[i]});
    at += sizes[i];
  }
  c.dst_bytes = at + 64;
  return c;
}

inline std::vector<Case> cases() {
  std::vector<Case> out;
  std::mt19937_64 rng(2026);
  // The snapshot shape, smaller: 256-aligned slots of 2 resource kinds.
  {
    std::vector<uint64_t> sizes;
    for (int r = 0; r < 16; ++r) sizes.push_back(r % 2 == 0 ? 131072 : 20480);
    uint64_t src_at = 0;
    std::vector<uint64_t> src_offsets;
    for (uint64_t s : sizes) {
      src_offsets.push_back(src_at);
      src_at += (s + 255) / 256 * 256;
    }
    out.push_back(lay_out(
        "aligned slots", sizes, [](size_t) { return uint64_t(0); },
        [&](size_t i, uint64_t) { return src_offsets[i]; }, src_at));
  }
  // Odd sizes around the vector width and the CUDA chunk (16 KiB), from
  // and to 16-aligned offsets.
  {
    const std::vector<uint64_t> sizes = {1,     2,     3,     7,     15,        16,   17,
                                         31,    33,    255,   257,   4095,      4097, 16383,
                                         16384, 16385, 32769, 49151, 65536 + 5, 0,    1};
    Case c;
    c.name = "odd sizes";
    uint64_t at = 0, src_at = 0;
    for (uint64_t n : sizes) {
      c.spans.push_back({at, src_at, n});
      at += (n + 15) / 16 * 16 + 16;
      src_at += (n + 15) / 16 * 16;
    }
    c.dst_bytes = at;
    c.src_bytes = src_at + 16;
    out.push_back(c);
  }
  // Misaligned: every pair of residues mod 16 of source and destination
  // (vector widths 16 down to 1 and the head and tail bytes), sizes from
  // 0 to past one chunk.
  {
    std::vector<uint64_t> sizes, src_res, dst_res;
    for (uint64_t d = 0; d < 16; ++d)
      for (uint64_t s = 0; s < 16; ++s) {
        dst_res.push_back(d);
        src_res.push_back(s);
        sizes.push_back(rng() % 3 == 0 ? rng() % 40 : rng() % 20000);
      }
    uint64_t src_at = 0;
    std::vector<uint64_t> src_offsets;
    for (size_t i = 0; i < sizes.size(); ++i) {
      src_at = (src_at + 15) / 16 * 16 + src_res[i];
      src_offsets.push_back(src_at);
      src_at += sizes[i];
    }
    uint64_t at = 0;
    Case c;
    c.name = "misaligned residues";
    for (size_t i = 0; i < sizes.size(); ++i) {
      at = (at + 15) / 16 * 16 + 16 + dst_res[i];
      c.spans.push_back({at, src_offsets[i], sizes[i]});
      at += sizes[i];
    }
    c.dst_bytes = at + 64;
    c.src_bytes = src_at + 64;
    out.push_back(c);
  }
  // Many ranges (CUDA: more than two launches of 128), sizes from 0 up,
  // sources anywhere (overlapping each other), destinations packed with
  // gaps of 0 to 31 bytes.
  {
    const uint64_t src_bytes = 1 << 20;
    std::vector<uint64_t> sizes;
    for (int i = 0; i < 300; ++i) sizes.push_back(i % 17 == 0 ? 0 : rng() % 6000);
    std::vector<uint64_t> gaps, srcs;
    for (size_t i = 0; i < sizes.size(); ++i) {
      gaps.push_back(rng() % 32);
      srcs.push_back(rng() % (src_bytes - sizes[i]));
    }
    out.push_back(lay_out(
        "many ranges", sizes, [&](size_t i) { return gaps[i]; },
        [&](size_t i, uint64_t) { return srcs[i]; }, src_bytes));
  }
  // Large misaligned ranges (hundreds of chunks) among small ones.
  {
    // Span 1: source and destination agree mod 16 (16-byte vectors after
    // a head); span 4: they differ by an odd number (bytes).
    const std::vector<uint64_t> sizes = {3, (5u << 20) + 1, 9, 100, (1u << 20) + 3};
    out.push_back(lay_out(
        "large", sizes, [](size_t i) { return uint64_t(5 + i); },
        [](size_t i, uint64_t) { return uint64_t(3 + i * 11); }, (5u << 20) + 64));
  }
  return out;
}

inline std::vector<uint8_t> random_bytes(uint64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> b(n);
  for (auto& v : b) v = uint8_t(rng());
  return b;
}

// The destination's bytes after the case: `before` with every span's
// source bytes written.
inline std::vector<uint8_t> expected(const Case& c, const std::vector<uint8_t>& src,
                                     std::vector<uint8_t> before) {
  for (const Span& s : c.spans)
    for (uint64_t i = 0; i < s.bytes; ++i) before[s.dst + i] = src[s.src + i];
  return before;
}

}  // namespace copy_ranges_case
