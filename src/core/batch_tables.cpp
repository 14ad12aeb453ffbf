#include "core/batch_tables.h"

#include <algorithm>
#include <string>

#include "base/error.h"

namespace kvc {

namespace {

void check_group(const BlockManager& m, uint32_t group) {
  if (group >= m.num_groups())
    invalid_argument("group must be < num_groups (" + std::to_string(m.num_groups()) + "), got " +
                     std::to_string(group));
}

const Sequence& lookup(const BlockManager& m, const uint64_t* ids, size_t i) {
  const Sequence* s = m.find_sequence(ids[i]);
  if (s == nullptr)
    fail(KVC_ERR_NOT_FOUND, "ids[" + std::to_string(i) + "]: no sequence " +
                                std::to_string(ids[i]) + " in this cache");
  return *s;
}

}  // namespace

TableSize write_block_table(const BlockManager& m, uint32_t group, const uint64_t* ids,
                            size_t count, int32_t* table, size_t max_blocks, int32_t pad) {
  check_group(m, group);
  TableSize size;
  for (size_t i = 0; i < count; ++i) {
    const Sequence& s = lookup(m, ids, i);
    if (s.num_blocks() > size.needed) size.needed = s.num_blocks();
  }
  if (size.needed > max_blocks) {
    size.fits = false;
    return size;
  }
  for (size_t i = 0; i < count; ++i) {
    const Sequence& s = *m.find_sequence(ids[i]);
    int32_t* row = table + i * max_blocks;
    const auto& blocks = s.blocks[group];
    size_t b = 0;
    for (; b < blocks.size(); ++b) row[b] = blocks[b] == kNoBlock ? pad : int32_t(blocks[b]);
    for (; b < max_blocks; ++b) row[b] = pad;
  }
  return size;
}

TableSize write_block_table_csr(const BlockManager& m, uint32_t group, const uint64_t* ids,
                                size_t count, int32_t* indptr, int32_t* indices,
                                size_t indices_capacity, int32_t* last_page_len) {
  check_group(m, group);
  TableSize size;
  for (size_t i = 0; i < count; ++i) size.needed += lookup(m, ids, i).num_blocks();
  if (size.needed > size_t(INT32_MAX))
    invalid_argument("the batch holds " + std::to_string(size.needed) +
                     " blocks, more than an int32 indptr can address");
  if (size.needed > indices_capacity) {
    size.fits = false;
    return size;
  }
  const uint32_t T = m.tokens_per_block();
  int32_t at = 0;
  indptr[0] = 0;
  for (size_t i = 0; i < count; ++i) {
    const Sequence& s = *m.find_sequence(ids[i]);
    for (uint32_t b : s.blocks[group]) indices[at++] = b == kNoBlock ? 0 : int32_t(b);
    indptr[i + 1] = at;
    last_page_len[i] = s.length() == 0 ? 0 : int32_t((s.length() - 1) % T + 1);
  }
  return size;
}

void write_sequence_lengths(const BlockManager& m, const uint64_t* ids, size_t count,
                            int32_t* lengths) {
  for (size_t i = 0; i < count; ++i) lookup(m, ids, i);
  for (size_t i = 0; i < count; ++i) lengths[i] = int32_t(m.find_sequence(ids[i])->length());
}

TableSize write_slot_mapping(BlockManager& m, uint32_t group, const uint64_t* ids, size_t count,
                             int64_t* slots, size_t capacity, int32_t* new_tokens) {
  check_group(m, group);
  Sequence* const* seqs = m.claim_batch(ids, count);
  TableSize size;
  for (size_t i = 0; i < count; ++i) {
    const Sequence& s = *seqs[i];
    size.needed += s.length() - s.slot_cursor[group];
    // The block the first new slot reads, for the loop below.
    if (s.slot_cursor[group] < s.length())
      __builtin_prefetch(s.blocks[group].data() + s.slot_cursor[group] / m.tokens_per_block());
  }
  if (size.needed > capacity) {
    size.fits = false;
    return size;
  }
  const uint64_t T = m.tokens_per_block();
  size_t at = 0;
  for (size_t i = 0; i < count; ++i) {
    Sequence& s = *seqs[i];
    const auto& blocks = s.blocks[group];
    const uint64_t from = s.slot_cursor[group];
    const uint64_t end = s.length();
    // Reused tokens (before s.cached) have no slot; then block by block (a
    // prefill chunk is thousands of tokens: no division per token).
    uint64_t pos = from;
    for (const uint64_t reused = std::min(s.cached, end); pos < reused; ++pos) slots[at++] = -1;
    while (pos < end) {
      const uint64_t b = pos / T;
      const uint64_t stop = std::min(end, (b + 1) * T);
      const uint32_t blk = blocks[b];  // kNoBlock: a windowed group released it
      if (blk == kNoBlock) {
        for (; pos < stop; ++pos) slots[at++] = -1;
      } else {
        const int64_t first = int64_t(blk) * int64_t(T) - int64_t(b * T);  // + pos
        for (; pos < stop; ++pos) slots[at++] = first + int64_t(pos);
      }
    }
    if (new_tokens != nullptr) new_tokens[i] = int32_t(s.length() - from);
    s.slot_cursor[group] = s.length();
  }
  return size;
}

}  // namespace kvc
