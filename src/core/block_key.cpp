#include "core/block_key.h"

#include <algorithm>
#include <tuple>

namespace kvc {

namespace {

void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(char((v >> (8 * i)) & 0xff));
}

void put_bytes(std::string& out, const std::string& bytes) {
  put_u64(out, bytes.size());
  out.append(bytes);
}

// One tag byte per field kind.
constexpr char kSaltTag = 'S';
constexpr char kLoraTag = 'L';
constexpr char kExtraTag = 'X';

}  // namespace

std::string encode_scope(bool has_salt, const std::string& salt, bool has_lora,
                         uint64_t lora_id) {
  std::string out;
  out.push_back(kSaltTag);
  out.push_back(has_salt ? 1 : 0);
  if (has_salt) put_bytes(out, salt);
  out.push_back(kLoraTag);
  out.push_back(has_lora ? 1 : 0);
  if (has_lora) put_u64(out, lora_id);
  return out;
}

void sort_extra_keys(std::vector<ExtraKey>& keys) {
  std::sort(keys.begin(), keys.end(), [](const ExtraKey& a, const ExtraKey& b) {
    return std::tie(a.offset, a.length, a.data) < std::tie(b.offset, b.length, b.data);
  });
}

bool any_extra_overlaps(const std::vector<ExtraKey>& keys, uint64_t begin, uint64_t end) {
  for (const ExtraKey& k : keys) {
    if (k.offset >= end) break;
    if (k.offset + k.length > begin) return true;
  }
  return false;
}

void encode_block_extras(const std::vector<ExtraKey>& keys, uint64_t begin, uint64_t end,
                         std::string& out) {
  out.clear();
  for (const ExtraKey& k : keys) {
    if (k.offset >= end) break;
    if (k.offset + k.length <= begin) continue;
    out.push_back(kExtraTag);
    put_u64(out, k.offset);
    put_u64(out, k.length);
    put_bytes(out, k.data);
  }
}

}  // namespace kvc
