// The program's arguments: sequence ids (mostly live ones), tokens,
// prompts that share prefixes with earlier ones, and batches of ids.
#include <algorithm>

#include "fuzz_ops.h"

namespace kvc_fuzz {

uint64_t Program::read_id() {
  static const uint64_t kHostile[8] = {UINT64_MAX, uint64_t(1) << 63, 8, 1000,
                                       uint64_t(1) << 32, 0xFFFFFFFF, 9, UINT64_MAX - 1};
  const uint8_t b = in_.u8();
  return b >= 0xF8 ? kHostile[b & 7] : b % 8;
}

// Mostly a live sequence of the current cache.
uint64_t Program::live_id() {
  const uint8_t b = in_.u8();
  const auto& seqs = c().seqs;
  if (seqs.empty() || b >= 0xE0) return read_id();
  auto it = seqs.begin();
  std::advance(it, b % seqs.size());
  return it->first;
}

int32_t Program::small_token() {
  static const int32_t kTokens[8] = {1, 2, 3, 0, -1, 7, INT32_MIN, INT32_MAX};
  const uint8_t b = in_.u8();
  return b < 0xF0 ? int32_t(b % 4) : kTokens[b & 7];
}

void Program::remember(const std::vector<int32_t>& tokens) {
  if (tokens.empty()) return;
  if (recent_.size() < 16) recent_.push_back(tokens);
  else recent_[recent_next_++ % 16] = tokens;
}

// Prompts that share prefixes: a document's first tokens (with one token
// changed or not), a recent prompt or a live or removed sequence's tokens
// (prompt and generated), or a few small tokens; then a short tail.
std::vector<int32_t> Program::prompt() {
  if (!forced_prompt_.empty()) {
    std::vector<int32_t> forced;
    forced.swap(forced_prompt_);
    return forced;
  }
  const uint8_t b = in_.u8();
  std::vector<int32_t> t;
  const uint32_t mode = b & 3;
  const auto& seqs = c().seqs;
  if (mode == 2 && !(recent_.empty() && seqs.empty())) {
    const uint32_t k = in_.below(uint32_t(recent_.size() + seqs.size()));
    const std::vector<int32_t>* from = nullptr;
    if (k < recent_.size()) {
      from = &recent_[k];
    } else {
      auto it = seqs.begin();
      std::advance(it, k - recent_.size());
      from = &it->second.tokens;
    }
    const uint8_t cut = in_.u8();  // mostly all of it
    const uint64_t n = cut < 0xC0 ? from->size() : std::min<uint64_t>(from->size(), 1 + cut % 64);
    t.assign(from->begin(), from->begin() + long(n));
  } else if (mode == 3) {
    for (uint32_t n = 1 + in_.below(20); n > 0; --n) t.push_back(small_token());
  } else {
    // Mostly prompts the cache can hold.
    const uint32_t room = uint32_t(std::min<uint64_t>(250, c().desc.token_capacity * 3 / 2 + 2));
    const int32_t doc = 1000 * int32_t(1 + ((b >> 2) & 3));
    for (uint32_t i = 0, n = 1 + in_.below(room); i < n; ++i) t.push_back(doc + int32_t(i));
    // Mode 1: one token changed, so prompts part inside a block (a block
    // with the same parent and first token but other tokens).
    if (mode == 1) t[in_.below(uint32_t(t.size()))] = small_token();
  }
  for (uint32_t k = (b >> 4) & 3; k > 0; --k) t.push_back(small_token());
  if (t.empty()) t.push_back(1);
  return t;
}

// Ids of a batch call: live sequences, sometimes one twice or unknown.
std::vector<uint64_t> Program::batch_ids(bool* unknown, bool* repeated) {
  std::vector<uint64_t> ids;
  *unknown = *repeated = false;
  for (uint32_t k = in_.below(5); k > 0; --k) {
    const uint64_t id = live_id();
    if (find(id) == nullptr) *unknown = true;
    if (std::find(ids.begin(), ids.end(), id) != ids.end()) *repeated = true;
    ids.push_back(id);
  }
  return ids;
}

}  // namespace kvc_fuzz
