// StoreChain's offload at eviction (store_chain.h, "Offload at eviction"):
// a node leaving the tree is sealed into a record and put into the stores
// it was not loaded from; within an OfferBatch a device pool's blocks are
// deferred and copied out together (defer_offer, flush_offers). The
// write-through at commit and the drain are in store_chain.cpp, the lookup
// and onboard in store_chain_onboard.cpp.
#include "core/store_chain.h"

#include <cstring>

#include "core/prefix_index.h"

namespace kvc {

void StoreChain::offer(uint32_t node) {
  if (muted_ || stores_.empty()) return;
  if (!offers_at_eviction()) return;  // written at its commit (or not qualifying then)
  const RadixTree& tree = index_.tree();
  const TreeNode& t = tree.node(node);
  if (t.num_tokens != T_ || t.priority < min_priority_) return;
  const uint32_t G = layout_groups_.num_groups();
  for (uint32_t g = 0; g < G; ++g)
    if (tree.block(node, g) == kNoBlock) return;  // an evicted windowed slot
  // The stores it was loaded from hold it already (the load refreshed it
  // there): neither copied out nor put again.
  const uint8_t held = keys_.held_by(node);
  if (held == uint8_t((1u << stores_.size()) - 1)) return;
  const StoreKey key = keys_.node_key(node);
  // A primary block of device pools: copied out with the batch's others
  // (a copy and a synchronize each cost a GPU cache's add milliseconds:
  // bench/results/2026-11-29-gpu-offers-h200.md); outside a batch, at once.
  if (t.tier == kPrimaryTier && !direct_) {
    defer_offer(node, key, t.priority, held);
    if (batch_depth_ == 0) flush_offers();
    return;
  }
  try {
    copy_out(node, t.tier == kPrimaryTier, offer_record_ + layout_.header_bytes());
  } catch (...) {
    ++dropped_;  // a device that cannot copy: the block is dropped, counted
    return;
  }
  put_offer(key, tree.tokens(node), t.priority, held);
}

void StoreChain::put_offer(const StoreKey& key, const int32_t* tokens, uint32_t priority,
                           uint8_t held) {
  RecordKey rk;
  rk.lookup_hash = key.hash;
  rk.digest = key.digest;
  rk.tokens = tokens;
  seal_record(layout_, rk, priority, offer_record_);
  for (size_t s = 0; s < stores_.size(); ++s)
    if ((held >> s & 1) == 0 && stores_[s]->put(key.hash, priority, offer_record_)) ++offered_[s];
}

void StoreChain::defer_offer(uint32_t node, const StoreKey& key, uint32_t priority,
                             uint8_t held) {
  const RadixTree& tree = index_.tree();
  const uint32_t G = layout_groups_.num_groups();
  if (offer_staging_.empty()) {  // the first deferred offer: its staging
    try {
      for (uint32_t g = 0; g < G; ++g)
        offer_staging_.push_back(
            static_cast<unsigned char*>(device_.allocate_host(offer_chunk_ * group_bytes_[g])));
    } catch (...) {
      for (unsigned char* p : offer_staging_) device_.deallocate_host(p);
      offer_staging_.clear();
      ++dropped_;  // no pinned memory for it: dropped, counted, as a failed copy
      return;
    }
    offer_copies_.resize(G);
    for (auto& c : offer_copies_) c.reserve(offer_chunk_);  // offer() allocates nothing more
    pending_offers_.reserve(offer_chunk_);
    pending_tokens_.reserve(offer_chunk_ * T_);
  }
  if (pending_offers_.size() == offer_chunk_) flush_offers_slow();
  const uint32_t i = uint32_t(pending_offers_.size());
  pending_offers_.push_back(PendingOffer{key, priority, held});
  const int32_t* tokens = tree.tokens(node);
  pending_tokens_.insert(pending_tokens_.end(), tokens, tokens + T_);
  for (uint32_t g = 0; g < G; ++g) offer_copies_[g].push_back(TierCopy{tree.block(node, g), i});
}

void StoreChain::flush_offers_slow() noexcept {
  const uint32_t G = layout_groups_.num_groups();
  const size_t n = pending_offers_.size();
  bool copied = true;
  try {
    for (uint32_t g = 0; g < G; ++g) {
      const uint32_t p = layout_groups_.group_pool[g];
      device_.copy_tier(TierDirection::kOffload, memory_[p]->base(), offer_staging_[g],
                        group_bytes_[g], offer_copies_[g].data(), n, nullptr);
    }
    device_.synchronize(nullptr);
  } catch (...) {
    copied = false;  // the blocks are dropped, counted
    dropped_ += n;
  }
  for (size_t i = 0; i < n && copied; ++i) {
    unsigned char* payload = offer_record_ + layout_.header_bytes();
    for (uint32_t g = 0; g < G; ++g)
      std::memcpy(payload + group_offset_[g], offer_staging_[g] + i * group_bytes_[g],
                  group_bytes_[g]);
    const PendingOffer& o = pending_offers_[i];
    try {
      put_offer(o.key, pending_tokens_.data() + i * T_, o.priority, o.held);
    } catch (...) {
      ++dropped_;  // a store out of memory: dropped, counted
    }
  }
  pending_offers_.clear();
  pending_tokens_.clear();
  for (auto& c : offer_copies_) c.clear();
}

void StoreChain::copy_out(uint32_t node, bool primary, unsigned char* payload) {
  const RadixTree& tree = index_.tree();
  const uint32_t G = layout_groups_.num_groups();
  if (!primary && !host_settled_) {  // host memory: the copies that filled it are done first
    device_.order_after_tier_copies(nullptr);
    device_.synchronize(nullptr);
    host_settled_ = batch_depth_ > 0;  // until the host tier writes host blocks again
  }
  for (uint32_t g = 0; g < G; ++g) {
    const uint32_t p = layout_groups_.group_pool[g];
    const uint32_t blk = tree.block(node, g);
    const unsigned char* from = primary ? memory_[p]->block(blk) : host_memory_[p]->block(blk);
    std::memcpy(payload + group_offset_[g], from, group_bytes_[g]);
  }
}

}  // namespace kvc
