// SHA-256 (FIPS 180-4), small and portable, for the chain digest of stored
// blocks (block_record.h): a block that another process (or an adversary
// writing to a shared store) names must not collide with ours, which a
// 64- or 128-bit non-cryptographic hash does not promise. Plain C++, no
// dependency; the test vectors are in tests/cpp/test_block_record.cpp.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kvc {

struct Sha256Digest {
  uint8_t bytes[32] = {};
  bool operator==(const Sha256Digest& o) const;
  bool operator!=(const Sha256Digest& o) const { return !(*this == o); }
};

class Sha256 {
 public:
  // portable: never the SHA extensions (tests compare both).
  explicit Sha256(bool portable = false);
  void update(const void* data, size_t size);
  Sha256Digest finish();  // the object is spent afterwards

 private:
  void compress(const uint8_t* block);
  void compress_portable(const uint8_t* block);
  uint32_t h_[8];
  uint8_t buf_[64];
  uint64_t total_ = 0;  // bytes fed
  size_t used_ = 0;     // bytes in buf_
  bool portable_ = false;
};

// Whether Sha256 uses the CPU's SHA extensions (x86 SHA-NI) here.
bool sha256_hardware();

Sha256Digest sha256(const void* data, size_t size);

}  // namespace kvc
