#include "cuda/kernel_errors.h"

namespace kvc {

std::string describe_kernel_error(const KernelErrorRecord& r) {
  const std::string layer = " (layer " + std::to_string(r.layer) + "): ";
  switch (r.code) {
    case kSlotOutOfRange:
      return "store_kv" + layer + "slot_mapping[" + std::to_string(r.index) + "] = " +
             std::to_string(r.value) + " is outside [-1, " + std::to_string(r.limit) +
             "); the token was not stored";
    case kSeqLenOutOfRange:
      return "decode_attention" + layer + "seq_lens[" + std::to_string(r.index) + "] = " +
             std::to_string(r.value) + " is outside [0, max_seq_len " + std::to_string(r.limit) +
             "]; the sequence's output is zero";
    case kBlockOutOfRange:
      return "decode_attention" + layer + "block table entry " + std::to_string(r.aux) +
             " of sequence " + std::to_string(r.index) + " is " + std::to_string(r.value) +
             ", outside [0, " + std::to_string(r.limit) + "); its tokens were left out";
    case kTableTooShort:
      return "decode_attention" + layer + "indptr gives sequence " + std::to_string(r.index) +
             " " + std::to_string(r.value) + " blocks, fewer than the " +
             std::to_string(r.limit) + " its length spans; the sequence's output is zero";
    case kPrefillBlockOutOfRange:
      return "prefill_attention" + layer + "block table entry " + std::to_string(r.aux) +
             " of sequence " + std::to_string(r.index) + " is " + std::to_string(r.value) +
             ", outside [0, " + std::to_string(r.limit) +
             "); its tokens were read as zero keys and values";
    case kPrefillTableTooShort:
      return "prefill_attention" + layer + "indptr gives sequence " + std::to_string(r.index) +
             " " + std::to_string(r.value) + " blocks, fewer than the " +
             std::to_string(r.limit) + " its kv_len spans; the sequence's output is zero";
    default:
      return "a kernel recorded unknown error code " + std::to_string(r.code);
  }
}

}  // namespace kvc
