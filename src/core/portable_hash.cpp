#include "core/portable_hash.h"

#include <cstring>

#ifndef XXH_INLINE_ALL
#define XXH_INLINE_ALL
#endif
#include <xxhash.h>

namespace kvc {

namespace {

#if !(defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__)
// Little-endian writers: the hashed bytes are the same on every host.
inline unsigned char* put_u64(unsigned char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
  return p + 8;
}
inline unsigned char* put_u32(unsigned char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
  return p + 4;
}
#endif

}  // namespace

uint64_t PortableHasher::scope_digest(const std::string& scope_bytes) const {
  return XXH3_64bits_withSeed(scope_bytes.data(), scope_bytes.size(), seed_);
}

uint64_t PortableHasher::extra_digest(const std::string& extra_bytes) const {
  return extra_bytes.empty() ? 0 : XXH3_64bits_withSeed(extra_bytes.data(), extra_bytes.size(), seed_);
}

uint64_t PortableHasher::block(uint64_t parent_hash, uint64_t scope_digest, uint64_t extra_digest,
                               const int32_t* tokens, uint32_t num_tokens) const {
  // Header and tokens in one buffer; blocks of up to 1024 tokens
  // (CacheConfig's bound) fit on the stack.
  constexpr uint32_t kMax = 1024;
  unsigned char buf[28 + 4 * kMax];
  const uint32_t n = num_tokens < kMax ? num_tokens : kMax;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  // The host's layout is the little-endian one: copy whole fields.
  const uint64_t head[3] = {parent_hash, scope_digest, extra_digest};
  std::memcpy(buf, head, 24);
  std::memcpy(buf + 24, &num_tokens, 4);
  // 16 bytes at a time: a memcpy of n * 4 bytes compiles to `rep movsq`
  // here (GCC, -O3), whose start-up cost was 2/3 of a 16-token block's
  // hash (2048 blocks of 16 tokens, this function alone on the 2-core VM:
  // about 110 us -> 30-70 us).
  unsigned char* p = buf + 28;
  uint32_t i = 0;
  for (; i + 4 <= n; i += 4) std::memcpy(p + 4 * size_t(i), tokens + i, 16);
  for (; i < n; ++i) std::memcpy(p + 4 * size_t(i), tokens + i, 4);
  p += 4 * size_t(n);
#else
  unsigned char* p = put_u64(buf, parent_hash);
  p = put_u64(p, scope_digest);
  p = put_u64(p, extra_digest);
  p = put_u32(p, num_tokens);
  for (uint32_t i = 0; i < n; ++i) p = put_u32(p, static_cast<uint32_t>(tokens[i]));
#endif
  return XXH3_64bits_withSeed(buf, size_t(p - buf), seed_);
}

void PortableHasher::prompt(const int32_t* tokens, uint64_t n, uint32_t tokens_per_block,
                            const std::string& scope_bytes, const std::vector<ExtraKey>& extras,
                            uint64_t* out) const {
  const uint64_t scope = scope_digest(scope_bytes);
  std::string extra;
  uint64_t parent = 0;
  for (uint64_t b = 0; b < n / tokens_per_block; ++b) {
    const uint64_t begin = b * tokens_per_block;
    encode_block_extras(extras, begin, begin + tokens_per_block, extra);
    parent = block(parent, scope, extra_digest(extra), tokens + begin, tokens_per_block);
    out[b] = parent;
  }
}

bool scope_lora(const std::string& s, uint64_t* lora_id) {
  // 'S', has_salt [, u64 size, bytes], 'L', has_lora [, u64 id]
  size_t at = 2;
  if (s.size() >= 2 && s[1] != 0) {
    uint64_t size = 0;
    for (int i = 0; i < 8; ++i) size |= uint64_t(static_cast<unsigned char>(s[at + i])) << (8 * i);
    at += 8 + size;
  }
  if (at + 2 > s.size() || s[at + 1] == 0) return false;
  uint64_t id = 0;
  for (int i = 0; i < 8; ++i) id |= uint64_t(static_cast<unsigned char>(s[at + 2 + i])) << (8 * i);
  *lora_id = id;
  return true;
}

}  // namespace kvc
