#pragma once
// Lower-case hexadecimal of a 64-bit value, zero-padded to `digits`: the
// spelling of fingerprints and hashes in file names and Redis keys, which
// other processes read back, so every store spells them the same way.
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <string>

namespace kvc {

inline std::string hex_digits(uint64_t v, int digits) {
  char b[24];
  std::snprintf(b, sizeof b, "%0*" PRIx64, digits, v);
  return b;
}

inline std::string hex16(uint64_t v) { return hex_digits(v, 16); }

}  // namespace kvc
