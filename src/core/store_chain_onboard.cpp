// StoreChain's onboard side (store_chain.h, "Onboard"): an add's lookup of
// the prompt's blocks past the tree's match in the stores (stage, fill,
// check_run) and the copy of the records found into the sequence's fresh
// blocks (onboard, copy_in). The offload side: write-through at commit and
// the drain in store_chain.cpp, eviction's offer in store_chain_offer.cpp.
#include "core/store_chain.h"

#include <algorithm>
#include <cstring>

#include "core/sequence.h"

namespace kvc {

// ---------------------------------------------------------------------------
// Onboard
// ---------------------------------------------------------------------------

uint64_t StoreChain::check_run(size_t s, uint64_t begin, uint64_t got) {
  for (uint64_t i = begin; i < begin + got; ++i) {
    RecordKey key;
    key.lookup_hash = chunk_keys_[i].hash;
    key.digest = chunk_keys_[i].digest;
    key.tokens = look_.tokens + (look_.first + i) * T_;
    // Summed by the store as it read the record (BlockStore::load_summed).
    const RecordCheck c =
        check_record_summed(layout_, key, staged(i), layout_.record_bytes(), chunk_sums_[i]);
    if (c != RecordCheck::kOk) {
      stores_[s]->reject(key.lookup_hash, c);
      return i - begin;
    }
    chunk_store_[i] = uint8_t(s);
  }
  return got;
}

uint64_t StoreChain::fill(uint64_t begin, uint64_t count) {
  for (uint64_t i = begin; i < begin + count; ++i) chunk_hashes_[i] = chunk_keys_[i].hash;
  uint64_t pos = begin;
  count += begin;
  while (pos < count) {
    // Each run starts at the first store: the disk before the remote one.
    uint64_t advanced = 0;
    for (size_t s = 0; s < stores_.size() && advanced == 0; ++s) {
      const uint64_t got = stores_[s]->load_summed(&chunk_hashes_[pos], count - pos,
                                                   &chunk_ptrs_[pos], &chunk_sums_[pos]);
      if (got > 0 && look_.digest_pending) {
        // A hit on the lookup's first block: its digest, to check the record.
        keys_.prompt_keys(look_.parent, *look_.scope_bytes, *look_.extras, look_.tokens,
                          look_.first, 1, chunk_keys_.data());
        look_.digest_pending = false;
      }
      advanced = check_run(s, pos, std::min<uint64_t>(got, count - pos));
    }
    if (advanced == 0) break;
    pos += advanced;
  }
  return pos - begin;
}

uint64_t StoreChain::stage(uint32_t parent, const std::string& scope_bytes,
                           const std::vector<ExtraKey>& extras, const int32_t* tokens,
                           uint64_t first, uint64_t want) {
  look_ = Lookup{};
  if (stores_.empty() || want == 0) return 0;
  look_.scope_bytes = &scope_bytes;
  look_.extras = &extras;
  look_.tokens = tokens;
  look_.first = look_.begin = first;
  look_.end = first + want;
  look_.parent = keys_.node_key(parent);
  const uint64_t n = std::min(chunk_, want);
  // The first block alone first: most prompts past the tree's match are new,
  // and a miss then costs one portable hash and one lookup, not a chunk of
  // keys; its SHA-256 digest is made only on a hit (fill()).
  keys_.prompt_keys(look_.parent, scope_bytes, extras, tokens, first, 1, chunk_keys_.data(),
                    /*digests=*/false);
  look_.digest_pending = true;
  look_.staged = fill(0, 1);
  look_.digest_pending = false;
  if (look_.staged == 1 && n > 1) {
    keys_.prompt_keys(chunk_keys_[0], scope_bytes, extras, tokens, first + 1, n - 1,
                      chunk_keys_.data() + 1);
    look_.staged += fill(1, n - 1);
  }
  look_.done = look_.staged < n;
  return look_.staged;
}

bool StoreChain::copy_in(uint64_t count, uint64_t position,
                         const std::vector<std::vector<uint32_t>>& blocks, void* stream) {
  flush_offers();  // the fresh blocks may be ones a deferred offer reads
  const size_t header = layout_.header_bytes();
  try {
    // After every earlier tier copy on another stream: an offer's copy out
    // of these blocks (an earlier call's) reads them until it is done.
    if (!direct_) device_.order_after_tier_copies(stream);
    for (uint32_t g = 0; g < layout_groups_.num_groups(); ++g) {
      const uint32_t p = layout_groups_.group_pool[g];
      const uint64_t bytes = group_bytes_[g];
      if (direct_) {
        for (uint64_t i = 0; i < count; ++i)
          std::memcpy(memory_[p]->block(blocks[g][position + i]),
                      staged(i) + header + group_offset_[g], bytes);
        continue;
      }
      // One copy_tier per group: the chunk's blocks gathered in its staging.
      copies_.clear();
      for (uint64_t i = 0; i < count; ++i) {
        std::memcpy(group_staging_[g] + i * bytes, staged(i) + header + group_offset_[g], bytes);
        copies_.push_back(TierCopy{blocks[g][position + i], uint32_t(i)});
      }
      device_.copy_tier(TierDirection::kOnboard, memory_[p]->base(), group_staging_[g], bytes,
                        copies_.data(), copies_.size(), stream);
    }
  } catch (...) {
    return false;
  }
  return true;
}

uint64_t StoreChain::onboard(const std::vector<std::vector<uint32_t>>& blocks,
                             const std::vector<ExtraKey>& extras, void* stream) {
  look_.extras = &extras;
  loaded_from_.clear();
  uint64_t total = 0;
  while (look_.staged > 0) {
    if (!copy_in(look_.staged, look_.first, blocks, stream)) break;
    for (uint64_t i = 0; i < look_.staged; ++i) {
      ++onboarded_[chunk_store_[i]];
      loaded_from_.push_back(chunk_store_[i]);
    }
    total += look_.staged;
    const uint64_t next = look_.first + look_.staged;
    if (look_.done || next >= look_.end) break;
    device_.synchronize(stream);  // the staging records are read again
    const StoreKey last = chunk_keys_[look_.staged - 1];
    look_.first = next;
    const uint64_t n = std::min(chunk_, look_.end - next);
    keys_.prompt_keys(last, *look_.scope_bytes, *look_.extras, look_.tokens, next, n,
                      chunk_keys_.data());
    look_.staged = fill(0, n);
    look_.done = look_.staged < n;
  }
  if (total > 0) {
    try {
      device_.synchronize(stream);  // the next call overwrites the staging records
    } catch (...) {
    }
  }
  look_ = Lookup{};
  return total;
}

void StoreChain::mark_loaded(const Sequence& s, uint64_t first) {
  const uint64_t end = std::min<uint64_t>(first + loaded_from_.size(), s.published);
  for (uint64_t b = first; b < end; ++b)
    keys_.mark_held(s.nodes[b], uint8_t(1u << loaded_from_[b - first]));
}

}  // namespace kvc
