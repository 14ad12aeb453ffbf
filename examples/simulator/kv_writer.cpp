#include "kv_writer.h"

#include <kvcache/kvcache.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace sim {
namespace {

void check(kvc_status_t s, const char *what) {
  if (s != KVC_OK)
    throw std::runtime_error(std::string(what) + ": " + kvc_status_string(s) + ": " +
                             kvc_last_error_message());
}

// bf16 bits of a small value that varies with the element, so that the
// stored KV is not a constant (the kernels copy bytes; any pattern works).
uint16_t pattern_bf16(size_t i) {
  static const uint16_t values[8] = {0x3f80, 0xbf00, 0x3e80, 0x3f40,
                                     0xbe00, 0x3f00, 0xbf40, 0x3d80};
  return values[(i * 2654435761u) >> 29 & 7];
}

}  // namespace

KvWriter::KvWriter(kvc_cache *cache, const SimConfig &config) : cache_(cache) {
  kvc_cache_desc_t d = KVC_CACHE_DESC_INIT;
  check(kvc_cache_describe(cache, &d), "kvc_cache_describe");
  cuda_ = d.device_kind == KVC_DEVICE_CUDA;
  ordinal_ = d.device_ordinal;
  kv_factor_ = d.kv_factor;
  q_heads_ = config.model.q_heads;
  for (uint32_t l = 0; l < d.num_layers; ++l) {
    kvc_layer_view_t v = KVC_LAYER_VIEW_INIT;
    check(kvc_cache_layer_view(cache, l, &v), "kvc_cache_layer_view");
    layers_.push_back({v.group, v.kv_heads});
    head_dim_ = v.head_dim;
    max_kv_heads_ = std::max(max_kv_heads_, v.kv_heads);
  }
  source_ = DeviceBuffer(cuda_, ordinal_);
  for (uint32_t g = 0; g < d.num_groups; ++g) {
    slots_.emplace_back(cuda_, ordinal_);
    tables_.emplace_back(cuda_, ordinal_);
  }
  for (DeviceBuffer *b : {&lens_, &query_, &out_, &workspace_})
    *b = DeviceBuffer(cuda_, ordinal_);
}

void KvWriter::reserve_source(size_t tokens) {
  if (tokens <= source_tokens_) return;
  // Grow in steps so that a long run reallocates only a few times.
  size_t n = std::max<size_t>(tokens, source_tokens_ * 2);
  n = std::max<size_t>(n, 1024);
  const size_t elems = n * max_kv_heads_ * head_dim_;
  std::vector<uint16_t> host(elems);
  for (size_t i = 0; i < elems; ++i) host[i] = pattern_bf16(i);
  source_.reserve(elems * sizeof(uint16_t));
  source_.upload(host.data(), elems * sizeof(uint16_t));
  source_tokens_ = n;
}

void KvWriter::store(const std::vector<SlotRow> &slots) {
  size_t most = 0;
  for (const auto &s : slots) most = std::max(most, s.size());
  if (most == 0) return;
  reserve_source(most);
  for (size_t g = 0; g < slots.size(); ++g) {
    slots_[g].reserve(slots[g].size() * sizeof(int64_t));
    slots_[g].upload(slots[g].data(), slots[g].size() * sizeof(int64_t));
  }
  for (uint32_t l = 0; l < layers_.size(); ++l) {
    const SlotRow &s = slots[layers_[l].group];
    if (s.empty()) continue;
    kvc_store_args_t a = KVC_STORE_ARGS_INIT;
    a.layer = l;
    a.num_tokens = static_cast<uint32_t>(s.size());
    a.src_dtype = KVC_DTYPE_BF16;
    // K and V read the same pattern: the bytes copied are what is measured.
    a.key = source_.data();
    a.value = kv_factor_ == 2 ? source_.data() : nullptr;
    a.slot_mapping = static_cast<const int64_t *>(slots_[layers_[l].group].data());
    check(kvc_store_kv(cache_, &a, nullptr), "kvc_store_kv");
  }
  for (int64_t slot : slots.front()) stored_tokens_ += slot >= 0;
}

void KvWriter::upload_query(size_t rows) {
  const size_t q_elems = rows * q_heads_ * head_dim_;
  if (query_.size() < q_elems * 2) {
    std::vector<uint16_t> host(q_elems);
    for (size_t i = 0; i < q_elems; ++i) host[i] = pattern_bf16(i + 7);
    query_.reserve(q_elems * 2);
    query_.upload(host.data(), q_elems * 2);
  }
  out_.reserve(q_elems * 2);
}

void KvWriter::attend(const std::vector<TableRows> &tables, uint32_t stride,
                      const std::vector<int32_t> &seq_lens, uint32_t batch,
                      const std::vector<int32_t> &q_lens) {
  const size_t rows = static_cast<size_t>(batch) + q_lens.size();
  if (rows == 0) return;
  const size_t table_bytes = rows * stride * sizeof(int32_t);
  for (size_t g = 0; g < tables.size(); ++g) {
    tables_[g].reserve(table_bytes);
    tables_[g].upload(tables[g].data(), table_bytes);
  }
  if (!q_lens.empty()) prefill(batch, seq_lens, q_lens, stride);
  if (batch == 0) return;
  int32_t longest = *std::max_element(seq_lens.begin(), seq_lens.begin() + batch);
  upload_query(batch);
  lens_.reserve(batch * sizeof(int32_t));
  lens_.upload(seq_lens.data(), batch * sizeof(int32_t));
  for (uint32_t l = 0; l < layers_.size(); ++l) {
    const uint32_t g = layers_[l].group;
    kvc_decode_args_t a = KVC_DECODE_ARGS_INIT;
    a.layer = l;
    a.batch = batch;
    a.q_heads = q_heads_;
    a.q_dtype = KVC_DTYPE_BF16;
    a.table_format = KVC_TABLE_PADDED;
    a.query = query_.data();
    a.out = out_.data();
    a.seq_lens = static_cast<const int32_t *>(lens_.data());
    a.block_table = static_cast<const int32_t *>(tables_[g].data());
    a.table_stride = stride;
    a.max_seq_len = static_cast<uint32_t>(longest);
    uint64_t ws = 0;
    check(kvc_decode_workspace_size(cache_, &a, &ws), "kvc_decode_workspace_size");
    if (ws) {
      workspace_.reserve(ws);
      a.workspace = workspace_.data();
      a.workspace_bytes = workspace_.size();
    }
    check(kvc_decode_attention(cache_, &a, nullptr), "kvc_decode_attention");
    ++attention_calls_;
  }
  attended_queries_ += batch;
}

// Prefill attention of the chunks in table rows first_row.. (their query
// rows packed one after another; the lengths are host arrays).
void KvWriter::prefill(uint32_t first_row, const std::vector<int32_t> &seq_lens,
                       const std::vector<int32_t> &q_lens, uint32_t stride) {
  std::vector<int32_t> qo_indptr(1, 0), kv_lens;
  int32_t longest = 1;
  for (size_t i = 0; i < q_lens.size(); ++i) {
    qo_indptr.push_back(qo_indptr.back() + q_lens[i]);
    kv_lens.push_back(seq_lens[first_row + i]);
    longest = std::max(longest, kv_lens.back());
  }
  const uint32_t total_q = static_cast<uint32_t>(qo_indptr.back());
  if (total_q == 0) return;
  upload_query(total_q);
  for (uint32_t l = 0; l < layers_.size(); ++l) {
    const uint32_t g = layers_[l].group;
    kvc_prefill_args_t a = KVC_PREFILL_ARGS_INIT;
    a.layer = l;
    a.batch = static_cast<uint32_t>(q_lens.size());
    a.total_q = total_q;
    a.q_heads = q_heads_;
    a.q_dtype = KVC_DTYPE_BF16;
    a.table_format = KVC_TABLE_PADDED;
    a.query = query_.data();
    a.out = out_.data();
    a.qo_indptr = qo_indptr.data();
    a.kv_lens = kv_lens.data();
    a.block_table = static_cast<const int32_t *>(tables_[g].data()) + size_t(first_row) * stride;
    a.table_stride = stride;
    a.max_kv_len = static_cast<uint32_t>(longest);
    uint64_t ws = 0;
    check(kvc_prefill_workspace_size(cache_, &a, &ws), "kvc_prefill_workspace_size");
    if (ws) {
      workspace_.reserve(ws);
      a.workspace = workspace_.data();
      a.workspace_bytes = workspace_.size();
    }
    check(kvc_prefill_attention(cache_, &a, nullptr), "kvc_prefill_attention");
    ++prefill_calls_;
  }
  attended_queries_ += total_q;
}

void KvWriter::finish() {
  kvc_status_t async = KVC_OK;
  check(kvc_cache_get_async_error(cache_, nullptr, &async), "kvc_cache_get_async_error");
  check(async, "kernel work");
  device_synchronize(cuda_, ordinal_);
}

}  // namespace sim
