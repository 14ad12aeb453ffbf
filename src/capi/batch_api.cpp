// Batch shims: argument checks, the cache lock, the short-buffer report.
#include "capi/cache_access.h"
#include "core/batch_tables.h"
#include "kvcache/batch.h"

using kvc::capi::cache_of;
using kvc::capi::guarded;
using kvc::capi::refused;
using kvc::capi::require;
using kvc::capi::require_array;

namespace {

// Told without an exception: asking with a small buffer first is a normal
// way to learn the size.
kvc_status_t too_small(const char* buffer, size_t have, size_t needed, const char* unit) {
  kvc::capi::set_last_error(std::string(buffer) + " holds " + std::to_string(have) + " " + unit +
                            " but the batch needs " + std::to_string(needed));
  return KVC_ERR_BUFFER_TOO_SMALL;
}

}  // namespace

extern "C" {

KVC_API kvc_status_t kvc_batch_extend(kvc_cache_t* cache, const uint64_t* ids,
                                      const int32_t* tokens, size_t count, void* stream) {
  return guarded([&]() -> kvc_status_t {
    kvc::Cache& c = cache_of(cache);
    require_array(ids, count, "ids", "count");
    require_array(tokens, count, "tokens", "count");
    kvc::Refusal refusal;
    if (!c.extend_batch(ids, tokens, count, stream, &refusal)) return refused(refusal);
    return KVC_OK;
  });
}

KVC_API kvc_status_t kvc_batch_block_table(const kvc_cache_t* cache, uint32_t group,
                                           const uint64_t* ids, size_t count, int32_t* table,
                                           size_t max_blocks, int32_t pad,
                                           size_t* blocks_needed) {
  return guarded([&]() -> kvc_status_t {
    const kvc::Cache& c = cache_of(cache);
    require_array(ids, count, "ids", "count");
    if (count > 0 && max_blocks > 0) require(table, "table");
    if (max_blocks != 0 && count > SIZE_MAX / max_blocks)
      kvc::invalid_argument("count * max_blocks overflows: count " + std::to_string(count) +
                            ", max_blocks " + std::to_string(max_blocks));
    const kvc::TableSize size = c.block_table(group, ids, count, table, max_blocks, pad);
    if (blocks_needed != nullptr) *blocks_needed = size.needed;
    if (!size.fits) return too_small("table rows (max_blocks)", max_blocks, size.needed, "blocks");
    return KVC_OK;
  });
}

KVC_API kvc_status_t kvc_batch_block_table_csr(const kvc_cache_t* cache, uint32_t group,
                                               const uint64_t* ids, size_t count,
                                               int32_t* indptr, int32_t* indices,
                                               size_t indices_capacity, int32_t* last_page_len,
                                               size_t* num_indices) {
  return guarded([&]() -> kvc_status_t {
    const kvc::Cache& c = cache_of(cache);
    require_array(ids, count, "ids", "count");
    require(indptr, "indptr");
    require_array(indices, indices_capacity, "indices", "indices_capacity");
    require_array(last_page_len, count, "last_page_len", "count");
    const kvc::TableSize size =
        c.block_table_csr(group, ids, count, indptr, indices, indices_capacity, last_page_len);
    if (num_indices != nullptr) *num_indices = size.needed;
    if (!size.fits) return too_small("indices", indices_capacity, size.needed, "entries");
    return KVC_OK;
  });
}

KVC_API kvc_status_t kvc_batch_sequence_lengths(const kvc_cache_t* cache, const uint64_t* ids,
                                                size_t count, int32_t* lengths) {
  return guarded([&] {
    const kvc::Cache& c = cache_of(cache);
    require_array(ids, count, "ids", "count");
    require_array(lengths, count, "lengths", "count");
    c.sequence_lengths(ids, count, lengths);
  });
}

KVC_API kvc_status_t kvc_batch_slot_mapping(kvc_cache_t* cache, uint32_t group,
                                            const uint64_t* ids, size_t count, int64_t* slots,
                                            size_t capacity, size_t* num_slots,
                                            int32_t* new_tokens) {
  return guarded([&]() -> kvc_status_t {
    kvc::Cache& c = cache_of(cache);
    require_array(ids, count, "ids", "count");
    require_array(slots, capacity, "slots", "capacity");
    const kvc::TableSize size = c.slot_mapping(group, ids, count, slots, capacity, new_tokens);
    if (num_slots != nullptr) *num_slots = size.needed;
    if (!size.fits) return too_small("slots", capacity, size.needed, "entries");
    return KVC_OK;
  });
}

}  // extern "C"
