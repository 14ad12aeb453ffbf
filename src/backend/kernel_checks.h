// Host-side argument checks of the kernels, shared by both backends so that
// a bad call fails the same way on CPU and CUDA. Each throws
// Error(KVC_ERR_INVALID_ARGUMENT, ...) (or UNSUPPORTED / BUFFER_TOO_SMALL)
// naming the argument and the value at fault.
#pragma once

#include <cstddef>

#include "backend/device.h"
#include "backend/kernel_work.h"

namespace kvc {

// Checks of everything readable without touching the data arrays.
void check_store_args(const StoreKvWork& w);
// The shape of a decode call (layer, heads, dtypes, table format and
// stride, max_seq_len), without its pointers: all the workspace size needs.
void check_decode_shape(const DecodeWork& w);
// check_decode_shape() and the pointers.
void check_decode_args(const DecodeWork& w);

// The shape of a prefill call (layer, heads, dtypes, table format and
// stride, total_q, max_kv_len), without its pointers.
void check_prefill_shape(const PrefillWork& w);
// check_prefill_shape(), the pointers and the host arrays qo_indptr and
// kv_lens (monotone, totals, q_len <= kv_len <= max_kv_len).
void check_prefill_args(const PrefillWork& w);
// A CPU cache's block table (ids in range, CSR rows long enough).
void check_prefill_tables(const PrefillWork& w);

// Checks of the values inside host arrays (a CPU cache's slots, lengths and
// tables), done before anything is written so a failed call changes nothing.
void check_store_slots(const StoreKvWork& w);
void check_decode_tables(const DecodeWork& w);

// Block ids in [0, num_blocks); no destination written twice or also read.
void check_block_copies(const BlockCopy* copies, size_t count, uint64_t num_blocks);

// Blocks a sequence of `len` tokens spans.
inline uint64_t blocks_for(uint64_t len, uint32_t tokens_per_block) {
  return (len + tokens_per_block - 1) / tokens_per_block;
}

}  // namespace kvc
