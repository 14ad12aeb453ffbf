// Writes the KV of every computed token into the cache through kvcache's
// store kernel (every layer, on the cache's device), and optionally reads it
// back with paged attention, as an engine's forward pass would: decode
// attention for the decode rows, prefill attention for the prefill chunks.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "device_memory.h"
#include "step_buffers.h"
#include "sim_config.h"

struct kvc_cache;

namespace sim {

class KvWriter {
 public:
  // Throws std::runtime_error with kvcache's message on failure.
  KvWriter(kvc_cache *cache, const SimConfig &config);

  // Stores one step: `slots[g]` are the slots of layer group g (-1: skip).
  void store(const std::vector<SlotRow> &slots);

  // Decode attention of every layer for the first `batch` rows of the
  // padded block tables `tables[g]` (`stride` entries per row), then
  // prefill attention of every layer for the rows after them: row
  // batch + i computes q_lens[i] new tokens at the end of its
  // seq_lens[batch + i] tokens.
  void attend(const std::vector<TableRows> &tables, uint32_t stride,
              const std::vector<int32_t> &seq_lens, uint32_t batch,
              const std::vector<int32_t> &q_lens);

  // Waits for the device and reports errors of enqueued work.
  void finish();

  // Tokens written (slots other than -1), counted once for all layers.
  uint64_t stored_tokens() const { return stored_tokens_; }
  uint64_t attention_calls() const { return attention_calls_; }
  uint64_t prefill_calls() const { return prefill_calls_; }
  uint64_t attended_queries() const { return attended_queries_; }

 private:
  struct Layer {
    uint32_t group = 0;
    uint32_t kv_heads = 0;
  };
  kvc_cache *cache_;
  bool cuda_ = false;
  int ordinal_ = 0;
  uint32_t head_dim_ = 0;
  uint32_t q_heads_ = 0;
  uint32_t kv_factor_ = 2;
  std::vector<Layer> layers_;
  DeviceBuffer source_;           // K and V rows: a fixed pattern
  std::vector<DeviceBuffer> slots_;  // per group
  std::vector<DeviceBuffer> tables_;  // per group
  DeviceBuffer lens_, query_, out_, workspace_;
  size_t source_tokens_ = 0;
  uint32_t max_kv_heads_ = 0;
  uint64_t stored_tokens_ = 0;
  uint64_t attention_calls_ = 0;
  uint64_t prefill_calls_ = 0;
  uint64_t attended_queries_ = 0;  // query tokens read back (decode + prefill), once for all layers

  void upload_query(size_t rows);
  void prefill(uint32_t first_row, const std::vector<int32_t> &seq_lens,
               const std::vector<int32_t> &q_lens, uint32_t stride);

  void reserve_source(size_t tokens);
};

}  // namespace sim
