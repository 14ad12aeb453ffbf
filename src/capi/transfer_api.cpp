// Block transfer shims (kvcache/transfer.h): handle checks and conversions;
// the kvc::Cache facade locks and does the work (core/cache_transfer.cpp).
#include <cstring>
#include <memory>
#include <string>

#include "capi/cache_access.h"
#include "capi/sequence_options.h"
#include "kvcache/transfer.h"

using kvc::capi::cache_of;
using kvc::capi::guarded;
using kvc::capi::options_of;
using kvc::capi::refused;
using kvc::capi::require;
using kvc::capi::require_array;

// An export or import keeps its cache's `alive` token weakly: once the
// cache is destroyed (its holds and sequences went with it) the handle only
// describes and frees itself.
struct kvc_export {
  kvc_cache_t* cache = nullptr;
  std::weak_ptr<const bool> alive;
  uint32_t tokens_per_block = 0;
  kvc::BlockExport data;
};

struct kvc_import {
  enum class State { kOpen, kCompleted, kAborted };
  kvc_cache_t* cache = nullptr;
  std::weak_ptr<const bool> alive;
  uint32_t tokens_per_block = 0;
  State state = State::kOpen;
  kvc::BlockImport data;
};

namespace {

void check_group(uint32_t group, uint32_t num_groups) {
  if (group >= num_groups)
    kvc::invalid_argument("group must be < num_groups (" + std::to_string(num_groups) + "), got " +
                          std::to_string(group));
}

// Copies `n` ids of group `group` from `all` (n per group) into the caller's
// buffer.
void write_ids(const std::vector<int32_t>& all, uint64_t n, uint32_t group, int32_t* ids,
               size_t capacity, size_t* count, const char* what) {
  require(count, "count");
  require_array(ids, capacity, "ids", "capacity");
  *count = size_t(n);
  if (capacity < n)
    kvc::fail(KVC_ERR_BUFFER_TOO_SMALL, "ids holds " + std::to_string(capacity) + " entries but " +
                                            what + " has " + std::to_string(n) + " blocks");
  if (n > 0) std::memcpy(ids, all.data() + group * n, n * sizeof(int32_t));
}

const char* kImportEnded[] = {"open", "already completed", "already aborted"};

void require_open(const kvc_import_t* imp, const char* call) {
  if (imp->state != kvc_import::State::kOpen)
    kvc::fail(KVC_ERR_INVALID_STATE, std::string(call) + ": the import of sequence " +
                                         std::to_string(imp->data.seq_id) + " is " +
                                         kImportEnded[int(imp->state)]);
  if (imp->alive.expired())
    kvc::fail(KVC_ERR_INVALID_STATE, std::string(call) + ": the import's cache was destroyed");
}

}  // namespace

extern "C" {

KVC_API void kvc_transfer_desc_init(kvc_transfer_desc_t* desc) { kvc::capi::init_sized(desc); }

KVC_API kvc_status_t kvc_cache_export_sequence(kvc_cache_t* cache, uint64_t seq_id,
                                               uint64_t num_tokens, kvc_export_t** out) {
  return guarded([&] {
    kvc::Cache& c = cache_of(cache);
    require(out, "out");
    auto e = std::make_unique<kvc_export>();
    e->cache = cache;
    e->alive = cache->alive;
    e->tokens_per_block = c.config().tokens_per_block;
    e->data = c.export_sequence(seq_id, num_tokens);
    *out = e.release();
  });
}

KVC_API void kvc_export_release(kvc_export_t* exp) {
  if (exp == nullptr) return;
  // The hold is this export's: releasing it cannot fail.
  if (!exp->alive.expired())
    (void)guarded([&] { exp->cache->impl->release_export(exp->data.hold); });
  delete exp;
}

KVC_API kvc_status_t kvc_export_describe(const kvc_export_t* exp, kvc_transfer_desc_t* out) {
  return guarded([&] {
    require(exp, "exp");
    kvc_transfer_desc_t d{};
    d.num_groups = exp->data.num_groups;
    d.tokens_per_block = exp->tokens_per_block;
    d.seq_id = exp->data.seq_id;
    d.num_blocks = exp->data.num_blocks;
    d.num_tokens = exp->data.num_blocks * exp->tokens_per_block;
    d.keys_bytes = exp->data.keys.size();
    kvc::capi::write_sized(out, d, "out");
  });
}

KVC_API kvc_status_t kvc_export_block_ids(const kvc_export_t* exp, uint32_t group, int32_t* ids,
                                          size_t capacity, size_t* count) {
  return guarded([&] {
    require(exp, "exp");
    check_group(group, exp->data.num_groups);
    write_ids(exp->data.block_ids, exp->data.num_blocks, group, ids, capacity, count, "the export");
  });
}

KVC_API kvc_status_t kvc_export_keys(const kvc_export_t* exp, void* buf, size_t capacity,
                                     size_t* size) {
  return guarded([&] {
    require(exp, "exp");
    require(size, "size");
    require_array(static_cast<const char*>(buf), capacity, "buf", "capacity");
    const std::string& keys = exp->data.keys;
    *size = keys.size();
    if (capacity < keys.size())
      kvc::fail(KVC_ERR_BUFFER_TOO_SMALL, "buf holds " + std::to_string(capacity) +
                                              " bytes but the key blob takes " +
                                              std::to_string(keys.size()));
    std::memcpy(buf, keys.data(), keys.size());
  });
}

KVC_API kvc_status_t kvc_cache_import_begin(kvc_cache_t* cache, uint64_t seq_id,
                                            const int32_t* tokens, size_t num_tokens,
                                            const kvc_sequence_options_t* options, const void* keys,
                                            size_t keys_size, kvc_import_t** out) {
  return guarded([&]() -> kvc_status_t {
    kvc::Cache& c = cache_of(cache);
    require(out, "out");
    require_array(tokens, num_tokens, "tokens", "num_tokens");
    require(keys, "keys");
    const kvc::SequenceOptions o = options_of(options);
    auto imp = std::make_unique<kvc_import>();
    imp->cache = cache;
    imp->alive = cache->alive;
    imp->tokens_per_block = c.config().tokens_per_block;
    kvc::Refusal refusal;
    if (!c.import_begin(seq_id, tokens, num_tokens, o, keys, keys_size, &imp->data, &refusal))
      return refused(refusal);
    *out = imp.release();
    return KVC_OK;
  });
}

KVC_API kvc_status_t kvc_import_describe(const kvc_import_t* imp, kvc_transfer_desc_t* out) {
  return guarded([&] {
    require(imp, "imp");
    kvc_transfer_desc_t d{};
    d.num_groups = imp->data.num_groups;
    d.tokens_per_block = imp->tokens_per_block;
    d.seq_id = imp->data.seq_id;
    d.num_blocks = imp->data.num_blocks;
    d.first_block = imp->data.first_block;
    d.num_tokens = imp->data.num_blocks * imp->tokens_per_block;
    kvc::capi::write_sized(out, d, "out");
  });
}

KVC_API kvc_status_t kvc_import_block_ids(const kvc_import_t* imp, uint32_t group, int32_t* ids,
                                          size_t capacity, size_t* count) {
  return guarded([&] {
    require(imp, "imp");
    check_group(group, imp->data.num_groups);
    write_ids(imp->data.block_ids, imp->data.num_blocks - imp->data.first_block, group, ids,
              capacity, count, "the import");
  });
}

KVC_API kvc_status_t kvc_import_complete(kvc_import_t* imp, uint64_t blocks_written) {
  return guarded([&] {
    require(imp, "imp");
    require_open(imp, "kvc_import_complete");
    const uint64_t expected = imp->data.num_blocks - imp->data.first_block;
    if (blocks_written != expected)
      kvc::invalid_argument("blocks_written is " + std::to_string(blocks_written) +
                            " but the import of sequence " + std::to_string(imp->data.seq_id) +
                            " expects " + std::to_string(expected) + " (positions " +
                            std::to_string(imp->data.first_block) + " to " +
                            std::to_string(imp->data.num_blocks) + "); the import stays open");
    try {
      imp->cache->impl->import_complete(imp->data);
    } catch (const kvc::Error& e) {
      if (e.status() == KVC_ERR_NOT_FOUND) imp->state = kvc_import::State::kAborted;
      throw;
    }
    imp->state = kvc_import::State::kCompleted;
  });
}

KVC_API kvc_status_t kvc_import_abort(kvc_import_t* imp) {
  return guarded([&] {
    require(imp, "imp");
    require_open(imp, "kvc_import_abort");
    imp->cache->impl->import_abort(imp->data);
    imp->state = kvc_import::State::kAborted;
  });
}

KVC_API void kvc_import_destroy(kvc_import_t* imp) {
  if (imp == nullptr) return;
  if (imp->state == kvc_import::State::kOpen && !imp->alive.expired())
    (void)guarded([&] { imp->cache->impl->import_abort(imp->data); });
  delete imp;
}

}  // extern "C"

// ---------------------------------------------------------------------------
// Sharing pool memory with another process (core/pool_share.cpp)

extern "C" {

KVC_API void kvc_pool_share_init(kvc_pool_share_t* share) { kvc::capi::init_sized(share); }

KVC_API void kvc_share_chunk_init(kvc_share_chunk_t* chunk) {
  kvc::capi::init_sized(chunk);
  if (chunk != nullptr) chunk->fd = -1;
}

KVC_API kvc_status_t kvc_cache_describe_pool_share(const kvc_cache_t* cache, uint32_t rank,
                                                   uint32_t pool, kvc_pool_share_t* out) {
  return guarded([&] {
    const kvc::Cache& c = cache_of(cache);
    require(out, "out");
    const kvc::SharedMemory m = c.shared_pool(rank, pool);
    kvc_pool_share_t d{};
    d.device_ordinal = m.ordinal;
    d.rank = rank;
    d.pool = pool;
    d.handle_type = KVC_SHARE_HANDLE_POSIX_FD;
    d.num_chunks = m.chunks.size();
    d.granularity = m.granularity;
    d.reserved_bytes = m.reserved_bytes;
    for (const kvc::SharedChunk& k : m.chunks) d.mapped_bytes += k.size;
    kvc::capi::write_sized(out, d, "out");
  });
}

KVC_API kvc_status_t kvc_cache_export_pool_chunk(const kvc_cache_t* cache, uint32_t rank,
                                                 uint32_t pool, uint64_t chunk,
                                                 kvc_share_chunk_t* out) {
  return guarded([&] {
    const kvc::Cache& c = cache_of(cache);
    require(out, "out");
    if (out->struct_size < sizeof(uint32_t))
      kvc::invalid_argument("out->struct_size must be set (use its _init function), got " +
                            std::to_string(out->struct_size));
    kvc::SharedChunk where;
    kvc_share_chunk_t d{};
    d.fd = c.export_pool_chunk(rank, pool, chunk, &where);
    d.index = chunk;
    d.offset = where.offset;
    d.size = where.size;
    kvc::capi::write_sized(out, d, "out");
  });
}

}  // extern "C"
