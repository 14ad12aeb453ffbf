// The fuzzer's input bytes, read front to back. An exhausted input reads
// zeros, so every prefix of an input is an input (libFuzzer's mutations
// stay meaningful) and the program simply ends with it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kvc_fuzz {

class Input {
 public:
  Input(const uint8_t* data, size_t size) : p_(data), n_(size) {}

  bool empty() const { return n_ == 0; }
  uint8_t u8() {
    if (n_ == 0) return 0;
    --n_;
    return *p_++;
  }
  uint32_t u16() { return uint32_t(u8()) | uint32_t(u8()) << 8; }
  // A value in [0, n).
  uint32_t below(uint32_t n) { return n == 0 ? 0 : u8() % n; }
  bool one_in(uint32_t n) { return below(n) == 0; }

 private:
  const uint8_t* p_;
  size_t n_;
};

// Longest sequence the library accepts (int32 lengths in kernel tables).
constexpr uint64_t kMaxTokens = 0x7fffffff;

// Hostile counts: each one makes the sequence overlong, some by wrapping
// `length + n` around 2^64 to a small number.
inline uint64_t hostile_count(Input& in, uint64_t length) {
  switch (in.below(6)) {
    case 0: return kMaxTokens + 1;
    case 1: return UINT64_MAX;
    case 2: return UINT64_MAX - length + 1;  // length + n wraps to 0
    case 3: return UINT64_MAX - length + 3;  // ... to 2
    case 4: return kMaxTokens - length + 1;  // one past the limit
    default: return uint64_t(1) << 63;
  }
}

}  // namespace kvc_fuzz
