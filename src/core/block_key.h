// What identifies a block's content: its parent, its token ids and the
// sequence's scope (cache salt, LoRA adapter) plus the extra keys (e.g.
// multimodal item hashes) that overlap it. Scopes and extra keys are encoded
// with domain tags and length prefixes so that no two of them alias: an
// absent salt differs from an empty one, and salt "X" from LoRA "X".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kvc {

// An extra key covering tokens [offset, offset + length) of a sequence.
struct ExtraKey {
  uint64_t offset = 0;
  uint64_t length = 0;
  std::string data;
};

// Encoded scope of a sequence: the bytes the scope table interns.
std::string encode_scope(bool has_salt, const std::string& salt, bool has_lora,
                         uint64_t lora_id);

// Sorts extra keys by (offset, length, data) so the encoding of a block does
// not depend on the order the caller listed them in.
void sort_extra_keys(std::vector<ExtraKey>& keys);

// Replaces `out` with the encoding of every key overlapping tokens
// [begin, end); empty when none does. Keys must be sorted.
void encode_block_extras(const std::vector<ExtraKey>& keys, uint64_t begin, uint64_t end,
                         std::string& out);

// True if some key overlaps tokens [begin, end).
bool any_extra_overlaps(const std::vector<ExtraKey>& keys, uint64_t begin, uint64_t end);

}  // namespace kvc
