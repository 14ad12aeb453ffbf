// Byte geometry of one block of a layer group. A block is
// [layer][kv] slabs; each slab is [tokens][heads][dim] (NHD) or
// [heads][tokens][dim] (HND). Copying "the first n tokens" of a block copies,
// in each contiguous run of rows, the first n rows: a run is a (layer, kv)
// slab in NHD and a (layer, kv, head) sub-slab in HND.
#pragma once

#include <cstdint>

namespace kvc {

struct BlockGeometry {
  uint64_t block_bytes = 0;       // whole block
  uint32_t tokens_per_block = 0;  // rows per run
  uint64_t num_runs = 0;          // runs of tokens_per_block rows per block
  uint64_t row_bytes = 0;         // bytes of one token row inside a run
  uint64_t run_bytes() const { return row_bytes * tokens_per_block; }
};

}  // namespace kvc
