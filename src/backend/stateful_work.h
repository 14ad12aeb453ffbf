// The resolved form of the stateful mode's device work (src/stateful),
// handed to a Device: one layer's rows in their buffer, and what an append,
// a beam table reorder or a row gather does. Both backends take the same
// structs. Host arrays are read in the call (the CUDA backend passes them
// in kernel parameters), so nothing here needs a host-to-device copy.
#pragma once

#include <cstdint>

#include "backend/kernel_work.h"
#include "kvcache/config.h"

namespace kvc {

// One layer of a stateful cache. Element (row r, kv k, head h, position t,
// dim d) is at base + r*row_stride + k*kv_stride + h*head_stride +
// t*token_stride + d*elem_size bytes.
struct RowLayer {
  void* base = nullptr;
  uint64_t row_stride = 0;
  uint64_t kv_stride = 0;
  uint64_t head_stride = 0;
  uint64_t token_stride = 0;
  uint32_t rows = 0;
  uint32_t capacity = 0;
  uint32_t kv_heads = 0;
  uint32_t head_dim = 0;
  uint32_t kv_factor = 0;
  kvc_dtype_t dtype = 0;
  uint32_t layer = 0;
};

// Rows a single CUDA launch of the stateful kernels takes in its
// parameters; a stateful cache has at most this many rows.
constexpr uint32_t kStatefulMaxRows = 1024;

// Append: row r gets counts[r] positions from the source at positions[r]
// and on; lengths[r] becomes positions[r] + counts[r]; with a table, its
// entries for those positions become r.
struct StatefulAppendWork {
  RowLayer kv;
  kvc_dtype_t src_dtype = 0;
  const void* key = nullptr;
  const void* value = nullptr;  // == key when kv_factor is 1
  uint64_t src_row_stride = 0;  // bytes, in the source's layout
  uint64_t src_head_stride = 0;
  uint64_t src_token_stride = 0;
  uint32_t num_tokens = 0;       // positions per row in the source
  float k_scale = 1.0f;
  float v_scale = 1.0f;
  const uint32_t* positions = nullptr;  // host [rows]
  const uint32_t* counts = nullptr;     // host [rows]
  int32_t* lengths = nullptr;           // device [rows]
  int32_t* table = nullptr;             // device [rows][table_stride] or NULL
  uint32_t table_stride = 0;
};

// Beam table reorder, in place: for each listed row, entries [begin, end)
// of row dst[i] become those of row src[i] as they were before the call
// (every listed read happens before any write of the same position).
// Lengths of every layer are set: lengths[l * rows + r] = new_lengths[r].
struct TableReorderWork {
  int32_t* table = nullptr;
  uint32_t table_stride = 0;
  uint32_t rows = 0;
  uint32_t count = 0;               // listed rows
  const uint32_t* dst = nullptr;    // host [count]
  const uint32_t* src = nullptr;    // host [count]
  const uint32_t* begin = nullptr;  // host [count]
  const uint32_t* end = nullptr;    // host [count]
  int32_t* lengths = nullptr;       // device [num_layers][rows]
  uint32_t num_layers = 0;
  const uint32_t* new_lengths = nullptr;  // host [rows]
};

// Gather: positions [0, length) of logical rows first_row .. first_row +
// num_rows - 1 go to dst rows 0 .. num_rows - 1, position t of logical row
// b read from src row table[b * table_stride + t] (b itself without a
// table). src and dst have the same dtype, heads and head_dim; dst may have
// other strides. They must not overlap.
struct RowGatherWork {
  RowLayer src;
  RowLayer dst;
  const int32_t* table = nullptr;
  uint32_t table_stride = 0;
  uint32_t first_row = 0;
  uint32_t num_rows = 0;
  uint32_t length = 0;
};

// Decode attention of one stateful layer: the paged decode's arguments
// (DecodeWork::contiguous_rows) and what the host knows of the rows, so a
// backend may read K/V that several rows share once for all of them:
// lengths[r] (the layer's), and with a beam table common[a * rows + b], a
// length over which the table rows of a and b agree (BeamBook; only the
// entries off the diagonal are read). Each row must get the result of
// decoding it alone, whatever the sharing.
struct StatefulDecodeWork {
  DecodeWork decode;
  const uint32_t* lengths = nullptr;  // host [rows]
  const uint32_t* common = nullptr;   // host [rows][rows], or NULL without a table
};

}  // namespace kvc
