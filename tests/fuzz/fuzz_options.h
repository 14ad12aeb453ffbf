// Sequence options decoded from the input: the bytes passed to the library
// (struct_size may be shorter or longer than the struct, fields may break
// the header's rules) and what the library must make of them: whether it
// must refuse them, and the effective scope, extra keys and priorities.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <kvcache/kvcache.h>

#include "fuzz_input.h"

namespace kvc_fuzz {

struct ExtraKeyModel {
  uint64_t offset = 0;
  uint64_t length = 0;
  std::string data;
};

class Options {
 public:
  // Reads one options value from the input.
  static std::unique_ptr<Options> decode(Input& in);

  // What to pass to kvc_sequence_add / kvc_cache_probe (NULL: defaults).
  const kvc_sequence_options_t* ptr() const {
    return null_ ? nullptr : reinterpret_cast<const kvc_sequence_options_t*>(buf_.data());
  }

  // The header's rules are broken: the call must fail with
  // KVC_ERR_INVALID_ARGUMENT.
  bool invalid = false;
  // A documented precondition the library need not check (ranges listed
  // out of token order): OK and KVC_ERR_INVALID_ARGUMENT are both right.
  bool unchecked_precondition = false;
  // Effective values (meaningful when !invalid).
  uint32_t prompt_priority = KVC_DEFAULT_PRIORITY;
  uint32_t decode_priority = KVC_DEFAULT_PRIORITY;
  bool has_salt = false;
  std::string salt;
  bool has_lora = false;
  uint64_t lora_id = 0;
  std::vector<ExtraKeyModel> extras;  // sorted by (offset, length, data)

  // Hash of the scope (salt, LoRA): the seed of every position's content.
  uint64_t scope_hash() const;
  // A small number per scope the decoder makes (0..27), for feedback.
  uint32_t scope_index() const;
  // One-line description for traces and failure reports.
  std::string describe() const;
  // C statements declaring `oN` as passed (fuzz_emit.h), and the argument
  // that passes it ("&oN" or "NULL").
  std::string c_decl(int n) const;
  std::string c_arg(int n) const { return null_ ? "NULL" : "&o" + std::to_string(n); }

 private:
  void finish();

  bool null_ = false;
  kvc_sequence_options_t raw_{};  // the struct's fields as set, whatever struct_size
  int nonzero_tail_ = -1;
  std::vector<uint64_t> buf_;  // the struct's bytes (8-byte aligned), struct_size of them
  std::string salt_store_;
  std::vector<std::string> key_data_;
  std::vector<kvc_extra_key_t> keys_;
  std::vector<kvc_retention_range_t> ranges_;
};

uint64_t mix64(uint64_t x);

}  // namespace kvc_fuzz
