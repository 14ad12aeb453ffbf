// Block transfer between caches (kvcache/transfer.h): the facade's export
// and import calls. An export holds a sequence's published blocks
// (Sequences::hold_published) and carries the key blob (transfer_keys.h).
// An import checks a peer's blob (its scope check and tokens) against the
// receiver's own tokens and options before anything changes, then adds the sequence the blocks go
// to (reusing what this cache already holds, reserving the rest all or
// nothing); completing it is a commit of the imported tokens, so the
// blocks are published under the prompt's keys exactly as a commit
// publishes them.
#include <algorithm>
#include <string>

#include "base/error.h"
#include "core/block_record.h"
#include "core/cache.h"
#include "core/transfer_keys.h"

namespace kvc {

namespace {

using Lock = std::lock_guard<std::mutex>;

}  // namespace

BlockExport Cache::export_sequence(uint64_t id, uint64_t num_tokens) {
  if (config_.mixed_kv_geometry())
    fail(KVC_ERR_UNSUPPORTED,
         "block export from a cache with KV resources of different geometries (head_dim, "
         "dtype, kv_factor, layout) is not supported yet");
  BlockExport ex;
  ExportHold hold;
  {
    Lock lock(mutex_);
    manager_->hold_published(id, num_tokens, hold);
  }
  try {
    const uint32_t G = manager_->num_groups();
    const uint32_t T = config_.tokens_per_block;
    ex.hold = hold.key;
    ex.seq_id = id;
    ex.num_blocks = hold.num_blocks;
    ex.num_groups = G;
    ex.block_ids.resize(size_t(G) * hold.num_blocks);
    for (uint64_t b = 0; b < hold.num_blocks; ++b)
      for (uint32_t g = 0; g < G; ++g)
        ex.block_ids[g * hold.num_blocks + b] = int32_t(hold.blocks[b * G + g]);
    TransferKeys k;
    k.fingerprint = geometry_fingerprint(config_, grouping_);
    k.tokens_per_block = T;
    k.num_blocks = hold.num_blocks;
    k.tokens = std::move(hold.tokens);
    // The scope check and the portable hashes: no chain digest per block
    // (transfer_keys.h says why the receiver needs none).
    fill_transfer_keys(config_.event_hash_seed, hold.scope_bytes, hold.extras, k);
    ex.keys = encode_transfer_keys(k);
  } catch (...) {
    release_export(hold.key);
    throw;
  }
  return ex;
}

void Cache::release_export(uint64_t hold) {
  Lock lock(mutex_);
  manager_->release_hold(hold);
}

bool Cache::import_begin(uint64_t id, const int32_t* tokens, uint64_t num_tokens,
                         const SequenceOptions& options, const void* keys, size_t keys_size,
                         BlockImport* out, Refusal* refusal) {
  // Plan, without the lock: the blob against this cache's geometry, then
  // against the keys rebuilt from the receiver's own tokens and options.
  Sequences::check_options(options);
  if (config_.mixed_kv_geometry())
    fail(KVC_ERR_UNSUPPORTED,
         "block import into a cache with KV resources of different geometries (head_dim, "
         "dtype, kv_factor, layout) is not supported yet");
  if (!config_.resources.empty())
    fail(KVC_ERR_UNSUPPORTED,
         "block import into a cache with state resources (" +
             std::to_string(config_.resources.size()) +
             ") is not supported: state snapshots do not travel with the blocks");
  if (!config_.block_reuse)
    fail(KVC_ERR_UNSUPPORTED,
         "block reuse is off for this cache: an import publishes blocks into the prefix tree "
         "(kvc_config_set_block_reuse(config, true))");
  const uint32_t T = config_.tokens_per_block;
  const auto* blob = static_cast<const unsigned char*>(keys);
  const uint64_t fingerprint = geometry_fingerprint(config_, grouping_);
  const uint64_t num_blocks = check_transfer_frame(blob, keys_size, fingerprint, T);
  if (num_blocks == 0) invalid_argument("the key blob names no block");
  if (num_tokens < num_blocks * T)
    invalid_argument("num_tokens (" + std::to_string(num_tokens) + ") is shorter than the " +
                     std::to_string(num_blocks * T) + " tokens of the key blob's " +
                     std::to_string(num_blocks) + " blocks");
  std::vector<ExtraKey> extras = options.extra_keys;
  sort_extra_keys(extras);
  const std::string scope =
      encode_scope(options.has_salt, options.salt, options.has_lora, options.lora_id);
  // One digest per blob and the tokens: the blob's portable hashes are
  // not checked.
  check_transfer_keys(blob, num_blocks, T, transfer_scope_check(scope, extras, num_blocks * T),
                      tokens);
  const uint32_t G = manager_->num_groups();
  BlockImport im;
  im.seq_id = id;
  im.num_blocks = num_blocks;
  im.num_groups = G;
  im.block_ids.reserve(size_t(G) * num_blocks);
  // Apply: the add reserves every block the prompt does not reuse, or
  // nothing.
  Lock lock(mutex_);
  uint64_t cached = 0;
  if (!manager_->try_add_uncounted(id, tokens, num_tokens, options, nullptr, &cached)) {
    *refusal = manager_->refusal();
    return false;
  }
  const Sequence& s = manager_->sequence(id);
  im.first_block = std::min<uint64_t>(cached / T, num_blocks);
  for (uint32_t g = 0; g < G; ++g)
    for (uint64_t b = im.first_block; b < im.num_blocks; ++b)
      im.block_ids.push_back(s.blocks[g][b] == kNoBlock ? -1 : int32_t(s.blocks[g][b]));
  *out = std::move(im);
  return true;
}

void Cache::import_complete(const BlockImport& im) {
  Lock lock(mutex_);
  const Sequence* s = manager_->find_sequence(im.seq_id);
  if (s == nullptr)
    fail(KVC_ERR_NOT_FOUND, "sequence " + std::to_string(im.seq_id) +
                                " (the import's) was removed before the import completed");
  manager_->commit(im.seq_id, im.num_blocks * config_.tokens_per_block);
}

void Cache::import_abort(const BlockImport& im) {
  Lock lock(mutex_);
  if (manager_->find_sequence(im.seq_id) != nullptr) manager_->remove(im.seq_id);
}

}  // namespace kvc
