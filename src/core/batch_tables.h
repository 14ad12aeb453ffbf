// The per-step tables attention kernels take, for a batch of sequences and
// one layer group: padded or CSR block tables, lengths, slot mappings.
// Each function checks every id first and writes only when everything fits;
// it returns the size it needs so the caller can report a short buffer.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/block_manager.h"

namespace kvc {

struct TableSize {
  bool fits = true;
  size_t needed = 0;  // entries (or max blocks per row) required
};

// [count][max_blocks] int32, padded with `pad`; needed = longest row.
TableSize write_block_table(const BlockManager& m, uint32_t group, const uint64_t* ids,
                            size_t count, int32_t* table, size_t max_blocks, int32_t pad);

// FlashInfer CSR; needed = total blocks.
TableSize write_block_table_csr(const BlockManager& m, uint32_t group, const uint64_t* ids,
                                size_t count, int32_t* indptr, int32_t* indices,
                                size_t indices_capacity, int32_t* last_page_len);

void write_sequence_lengths(const BlockManager& m, const uint64_t* ids, size_t count,
                            int32_t* lengths);

// Slots of the tokens added since the last call for `group` (-1 for reused
// ones); advances the cursors only when everything fits.
TableSize write_slot_mapping(BlockManager& m, uint32_t group, const uint64_t* ids, size_t count,
                             int64_t* slots, size_t capacity, int32_t* new_tokens);

}  // namespace kvc
