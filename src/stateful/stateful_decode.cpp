// StatefulCache: indirect decode attention. The layer's rows are described
// as the paged decode's "blocks" addressed by position
// (DecodeWork::contiguous_rows): with a beam table, one table entry per
// position (tokens_per_block 1) names the row to read; without one, each
// row reads itself (tokens_per_block 2^31: one entry per row, from an
// identity array). The CPU backend runs the paged decode's arithmetic on
// it; the CUDA backend a kernel of its own that also gets the rows'
// lengths and the beam book's shared prefixes, so that rows reading the
// same history read it once (cuda/stateful_decode_kernel.cuh).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backend/kernel_checks.h"
#include "base/error.h"
#include "stateful/stateful_cache.h"

namespace kvc {

namespace {

DecodeWork decode_work(const RowLayer& r, uint32_t max_len, const StatefulDecodeArgs& a) {
  DecodeWork w;
  LayerSlabs& kv = w.kv;
  kv.base = r.base;
  kv.num_blocks = r.rows;
  kv.block_stride = r.row_stride;
  kv.kv_stride = r.kv_stride;
  kv.token_stride = r.token_stride;
  kv.head_stride = r.head_stride;
  kv.kv_heads = r.kv_heads;
  kv.head_dim = r.head_dim;
  kv.kv_factor = r.kv_factor;
  kv.dtype = r.dtype;
  kv.layer = r.layer;
  w.batch = r.rows;
  w.q_heads = a.q_heads;
  w.q_dtype = a.q_dtype;
  w.table_format = KVC_TABLE_PADDED;
  w.query = a.query;
  w.out = a.out;
  w.max_seq_len = std::max<uint32_t>(max_len, 1);
  w.window = 0;
  w.softmax_scale =
      a.softmax_scale != 0.0f ? a.softmax_scale : 1.0f / std::sqrt(float(r.head_dim));
  w.k_scale = a.k_scale;
  w.v_scale = a.v_scale;
  w.workspace = a.workspace;
  w.workspace_bytes = a.workspace_bytes;
  w.contiguous_rows = true;
  return w;
}

}  // namespace

uint64_t StatefulCache::decode_workspace_bytes(const StatefulDecodeArgs& a) const {
  std::lock_guard<std::mutex> lock(mu_);
  check_layer(a.layer);
  const uint32_t longest = a.max_seq_len != 0 ? a.max_seq_len : max_len(a.layer);
  DecodeWork w = decode_work(row_layer(a.layer), longest, a);
  w.kv.tokens_per_block = 1;
  w.table_stride = w.max_seq_len;
  check_decode_shape(w);
  return dev_->stateful_decode_workspace_bytes(w);
}

void StatefulCache::decode(const StatefulDecodeArgs& a, void* stream) {
  std::lock_guard<std::mutex> lock(mu_);
  check_layer(a.layer);
  DecodeWork w = decode_work(row_layer(a.layer), max_len(a.layer), a);
  w.seq_lens = lengths_dev_ + uint64_t(a.layer) * B_;
  if (book_.active()) {
    w.kv.tokens_per_block = 1;
    w.block_table = table_;
    w.table_stride = table_cap_;
  } else {
    w.kv.tokens_per_block = 1u << 31;
    w.block_table = identity_dev_;
    w.table_stride = 1;
  }
  check_decode_args(w);
  if (w.workspace == nullptr && w.workspace_bytes != 0)
    invalid_argument("workspace is NULL but workspace_bytes is " +
                     std::to_string(w.workspace_bytes));
  const uint64_t need = dev_->stateful_decode_workspace_bytes(w);
  if (w.workspace_bytes < need)
    fail(KVC_ERR_BUFFER_TOO_SMALL,
         "workspace_bytes (" + std::to_string(w.workspace_bytes) + ") is less than the " +
             std::to_string(need) + " bytes this call needs (batch " + std::to_string(B_) +
             ", longest row " + std::to_string(w.max_seq_len) +
             "); see kvc_stateful_decode_workspace_size()");
  StatefulDecodeWork sw;
  sw.decode = w;
  const std::vector<uint32_t> lens(len_.begin() + int64_t(uint64_t(a.layer) * B_),
                                   len_.begin() + int64_t(uint64_t(a.layer + 1) * B_));
  sw.lengths = lens.data();
  sw.common = book_.active() ? book_.common_matrix() : nullptr;
  dev_->stateful_decode(sw, stream);
}

}  // namespace kvc
