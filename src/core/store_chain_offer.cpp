// StoreChain's offload at eviction (store_chain.h, "Offload at eviction"):
// a node leaving the tree is sealed into a record and put into the stores
// it was not loaded from; a device pool's blocks are deferred, copied out
// together into a slot's staging (defer_offer, flush_offers) and sealed
// and put by the offer worker (put_slot). The
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
    copy_out(node, t.tier == kPrimaryTier, offer_record_.get() + layout_.header_bytes());
  } catch (...) {
    ++dropped_;  // a device that cannot copy: the block is dropped, counted
    return;
  }
  put_record(offer_record_, key, tree.tokens(node), t.priority, held);
}

void StoreChain::put_record(std::unique_ptr<unsigned char[]>& record, const StoreKey& key,
                            const int32_t* tokens, uint32_t priority, uint8_t held) noexcept {
  RecordKey rk;
  rk.lookup_hash = key.hash;
  rk.digest = key.digest;
  rk.tokens = tokens;
  seal_record(layout_, rk, priority, record.get());
  for (size_t s = stores_.size(); s-- > 0;) {
    if (held >> s & 1) continue;
    try {
      const bool took = s == 0 ? stores_[s]->put_buffer(key.hash, priority, record)
                               : stores_[s]->put(key.hash, priority, record.get());
      if (took) offered_[s].fetch_add(1, std::memory_order_relaxed);
    } catch (...) {
      ++dropped_;  // a store out of memory: dropped, counted
    }
  }
}

bool StoreChain::claim_slot() noexcept {
  OfferSlot& slot = slots_[fill_];
  if (slot.task != 0) {  // out: filled again once its task is done
    if (offer_tasks_->done() < slot.task) {
      // Every slot out: an earlier call's is dropped (the caller counts
      // it), this batch's own burst (or an offer outside a batch) waits
      // (store_chain.h, offload).
      if (batch_depth_ > 0 && slot.batch != batch_serial_) return false;
      ++offer_waits_;
      offer_tasks_->wait_done(slot.task);
    }
    slot.task = 0;
  }
  slot.batch = batch_depth_ > 0 ? batch_serial_ : 0;
  std::fill(slot.due.begin(), slot.due.end(), 0);
  if (!slot.staging.empty()) return true;
  try {  // its first use (a CPU cache's tests)
    stage_slot(slot);
  } catch (...) {
    return false;
  }
  return true;
}

void StoreChain::stage_slot(OfferSlot& slot) {
  const uint32_t G = layout_groups_.num_groups();
  try {
    for (uint32_t g = 0; g < G; ++g)
      slot.staging.push_back(
          static_cast<unsigned char*>(device_.allocate_host(offer_chunk_ * group_bytes_[g])));
    slot.fence = device_.create_fence();
    slot.offers.reserve(offer_chunk_);  // offer() allocates nothing more
    slot.tokens.reserve(offer_chunk_ * T_);
  } catch (...) {
    for (unsigned char* p : slot.staging) device_.deallocate_host(p);
    slot.staging.clear();
    device_.destroy_fence(slot.fence);
    slot.fence = nullptr;
    throw;
  }
}

void StoreChain::open_offer_slots() {
  const uint32_t G = layout_groups_.num_groups();
  try {
    slots_.resize(kOfferSlots);
    for (OfferSlot& slot : slots_) slot.due.assign(stores_.size(), 0);
    offer_copies_.resize(G);
    for (auto& c : offer_copies_) c.reserve(offer_chunk_);
    if (!offer_tasks_) offer_tasks_ = open_background_tasks();
    task_record_.reset(new unsigned char[layout_.record_bytes()]);
  } catch (...) {
    slots_.clear();
    offer_tasks_.reset();
    throw;
  }
}

void StoreChain::defer_offer(uint32_t node, const StoreKey& key, uint32_t priority,
                             uint8_t held) {
  const RadixTree& tree = index_.tree();
  const uint32_t G = layout_groups_.num_groups();
  if (slots_.empty()) {  // the first deferred offer (a CPU cache's tests)
    try {
      open_offer_slots();
    } catch (...) {
      ++dropped_;  // no memory or thread for it: dropped, counted, as a failed copy
      return;
    }
  }
  if (pending_ == 0 && !claim_slot()) {
    // Every slot out since an earlier call, or no pinned memory for it:
    // dropped, counted.
    ++dropped_;
    return;
  }
  OfferSlot& slot = slots_[fill_];
  const uint32_t i = uint32_t(pending_++);
  slot.offers.push_back(PendingOffer{key, priority, held});
  for (size_t s = 0; s < slot.due.size(); ++s) slot.due[s] += (held >> s & 1) ^ 1;
  const int32_t* tokens = tree.tokens(node);
  slot.tokens.insert(slot.tokens.end(), tokens, tokens + T_);
  for (uint32_t g = 0; g < G; ++g) offer_copies_[g].push_back(TierCopy{tree.block(node, g), i});
  if (pending_ == offer_chunk_) flush_offers_slow();
}

void StoreChain::flush_offers_slow() noexcept {
  const uint32_t G = layout_groups_.num_groups();
  OfferSlot& slot = slots_[fill_];
  const size_t n = pending_;
  pending_ = 0;
  // The copies go on the call's stream, after every earlier tier copy (an
  // onboard into one of these blocks on another stream), so that the
  // call's and its caller's later work on that stream, which may write into
  // the blocks, comes after them. Outside a call's batch the blocks may be
  // reused on any stream: the copies are waited for here.
  bool copied = true;
  try {
    device_.order_after_tier_copies(batch_stream_);
    for (uint32_t g = 0; g < G; ++g) {
      const uint32_t p = layout_groups_.group_pool[g];
      device_.copy_tier(TierDirection::kOffload, memory_[p]->base(), slot.staging[g],
                        group_bytes_[g], offer_copies_[g].data(), n, batch_stream_);
    }
    device_.record_fence(slot.fence, batch_stream_);
    if (batch_depth_ == 0) copied = device_.wait_fence(slot.fence);
  } catch (...) {
    copied = false;
  }
  for (auto& c : offer_copies_) c.clear();
  if (!copied) {  // the blocks are dropped, counted
    drop_slot(slot);
    return;
  }
  const size_t at = fill_;
  try {
    slot.task = offer_tasks_->post([this, at] { put_slot(at); });
  } catch (...) {  // no memory to queue it: the blocks are dropped, counted
    drop_slot(slot);
    return;
  }
  posted_ = slot.task;
  fill_ = (fill_ + 1) % kOfferSlots;
}

void StoreChain::drop_slot(OfferSlot& slot) noexcept {
  dropped_ += slot.offers.size();
  slot.offers.clear();
  slot.tokens.clear();
  std::fill(slot.due.begin(), slot.due.end(), 0);
}

void StoreChain::put_slot(size_t at) noexcept {
  // The worker's thread: the slot is its own until the task is done (the
  // serving thread neither fills nor frees it before done() says so).
  OfferSlot& slot = slots_[at];
  const size_t n = slot.offers.size();
  if (!device_.wait_fence(slot.fence)) {
    dropped_ += n;  // a device that failed: the copies' bytes are undefined
  } else {
    const uint32_t G = layout_groups_.num_groups();
    for (size_t i = 0; i < n; ++i) {
      unsigned char* payload = task_record_.get() + layout_.header_bytes();
      for (uint32_t g = 0; g < G; ++g)
        std::memcpy(payload + group_offset_[g], slot.staging[g] + i * group_bytes_[g],
                    group_bytes_[g]);
      const PendingOffer& o = slot.offers[i];
      put_record(task_record_, o.key, slot.tokens.data() + i * T_, o.priority, o.held);
    }
  }
  slot.offers.clear();
  slot.tokens.clear();
}

void StoreChain::finish_offers() noexcept {
  if (offer_tasks_ && posted_ > 0) offer_tasks_->wait_done(posted_);
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
