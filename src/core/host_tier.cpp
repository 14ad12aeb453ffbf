// The host tier's moves: a call's preparation (onboard what it holds, make
// room, offload what qualifies, every copy of one direction in one batch),
// the moves of single nodes between the tiers, and the tier's own eviction.
// The rules are in host_tier.h; the plan is in host_tier_plan.cpp.
#include "core/host_tier.h"

#include "base/error.h"

namespace kvc {

HostTier::HostTier(const GroupLayout& layout, const LayerGrouping& grouping, PrefixIndex& index,
                   Residency& residency, Eviction& eviction, CacheCounters& counters,
                   const RankPools& ranks, uint32_t min_priority)
    : layout_(layout),
      grouping_(grouping),
      index_(index),
      tree_(index.tree()),
      residency_(residency),
      eviction_(eviction),
      cache_counters_(counters),
      ranks_(ranks),
      policy_(index.tree().id_bound()),
      min_priority_(min_priority) {
  for (const auto& m : ranks.host_pools(0)) pools_.emplace_back(m->num_blocks(), m->num_blocks());
  marks_ = BigArray<Marks>(tree_.id_bound());
  excluded_bits_.assign((uint64_t(tree_.id_bound()) + 63) / 64, 0);
}

uint64_t HostTier::count_held(const std::vector<uint32_t>& nodes, uint32_t partial) const {
  uint64_t n = 0;
  for (uint32_t node : nodes) n += matched_in_host(node) ? 1 : 0;
  if (partial != kNoNode && matched_in_host(partial)) ++n;
  return n;
}

void HostTier::add_stats(CacheStats& s) const {
  s.host = counters_;
  for (const BlockPool& p : pools_) {
    s.host_blocks += p.capacity();
    s.host_free_blocks += p.num_free();
    s.host_cached_blocks += p.num_cached();
  }
}

uint64_t HostTier::set_bytes() const {
  uint64_t bytes = 0;
  for (const LayerGroup& g : grouping_.groups) bytes += g.geometry.block_bytes;
  return bytes;
}

// ---------------------------------------------------------------------------
// A call's preparation: onboard what it holds, make room, copy in batches
// ---------------------------------------------------------------------------

void HostTier::prepare(const Reservation& r, void* stream) {
  if (r.sets == 0) return;
  ranks_.order_after_tier_copies(stream);
  const uint32_t G = layout_.num_groups();
  const std::vector<uint32_t>& held = *r.held;
  const uint32_t partial = r.partial;
  onboards_.clear();
  for (uint32_t n : held)
    if (matched_in_host(n)) onboards_.push_back(n);
  if (partial != kNoNode && matched_in_host(partial)) onboards_.push_back(partial);
  victims_.clear();
  slot_victims_.clear();
  host_victims_.clear();
  plan_victims(r);

  // 1. Windowed slots evicted on their own. Without anchor groups a node
  // left with nothing leaves the tree: the call's own nodes must stay.
  if (!slot_victims_.empty()) {
    const bool guard = layout_.anchors.empty();
    if (guard) {
      for (uint32_t n : held) ++index_.holders(n);
      if (partial != kNoNode) ++index_.holders(partial);
    }
    for (const SlotVictim& v : slot_victims_) eviction_.evict_window_slot(v.node, v.group);
    if (guard) {
      for (uint32_t n : held) --index_.holders(n);
      if (partial != kNoNode) --index_.holders(partial);
    }
  }

  // Room in the host tier: its victims leave the tree. The list is known:
  // each one's record and table slots are fetched kAhead victims ahead,
  // its host blocks' pool lines half as far (they need the record).
  for (size_t i = 0; i < host_victims_.size(); ++i) {
    if (i + kAhead < host_victims_.size()) tree_.prefetch_erase(host_victims_[i + kAhead]);
    if (i + kAhead / 2 < host_victims_.size()) prefetch_host_blocks(host_victims_[i + kAhead / 2]);
    evict_node(host_victims_[i]);
  }

  // 2. Offloads: every copy of the call in one batch, into fresh host sets.
  batch_.reset(residency_.num_pools());
  dest_.clear();
  for (size_t i = 0; i < victims_.size(); ++i) {
    if (i + kAhead < victims_.size()) tree_.prefetch_blocks(victims_[i + kAhead].node);
    const Victim& v = victims_[i];
    if (!v.offload) continue;
    for (uint32_t g = 0; g < G; ++g) {
      const uint32_t p = layout_.group_pool[g];
      const uint32_t from = tree_.block(v.node, g);
      if (from == kNoBlock) {  // a windowed slot already evicted
        dest_.push_back(kNoBlock);
        continue;
      }
      const uint32_t hb = pools_[p].acquire_free();
      dest_.push_back(hb);
      batch_.add(p, from, hb);
    }
  }
  if (!dest_.empty()) {
    // A host node offered from now on waits for these copies (StoreChain).
    if (stores_ != nullptr) stores_->host_blocks_written();
    try {
      batch_.submit(ranks_, TierDirection::kOffload, stream);
    } catch (...) {
      // The victims stay where they were; their destinations go back.
      for (size_t i = 0; i < dest_.size(); i += G) release_blocks(&dest_[i]);
      throw;
    }
  }

  // 3. The victims, in eviction order: offloaded or dropped.
  // Each offload's primary and host pool lines fetched kAhead victims ahead.
  size_t k = 0;                    // victim i's destinations: dest_[G * k]
  size_t ahead = 0, k_ahead = 0;   // the next victim to fetch, its destinations
  size_t near = 0;                 // the next victim whose parent's pool line to fetch
  for (size_t i = 0; i < victims_.size(); ++i) {
    for (; ahead < victims_.size() && ahead <= i + kAhead; ++ahead)
      if (victims_[ahead].offload)
        prefetch_offload(victims_[ahead].node, &dest_[G * k_ahead++], victim_after(ahead));
    for (; near < victims_.size() && near <= i + kAhead / 2; ++near)
      if (victims_[near].offload) prefetch_parent_ref(victims_[near].node, victim_after(near));
    const Victim& v = victims_[i];
    if (v.offload) offload_node(v.node, &dest_[G * k++], victim_after(i));
    else eviction_.evict_node(v.node);
  }

  // 4. Onboards: the held host nodes come back into fresh primary sets,
  // which may be blocks the victims dropped in 3 left: their deferred
  // offers are copied out first (StoreChain::offer).
  if (onboards_.empty()) return;
  if (stores_ != nullptr) stores_->flush_offers();
  batch_.reset(residency_.num_pools());
  dest_.clear();
  for (uint32_t n : onboards_) {
    for (uint32_t g = 0; g < G; ++g) {
      const uint32_t p = layout_.group_pool[g];
      const uint32_t from = tree_.block(n, g);
      if (from == kNoBlock) {
        dest_.push_back(kNoBlock);
        continue;
      }
      const uint32_t b = residency_.take_free(p);
      dest_.push_back(b);
      batch_.add(p, b, from);
    }
  }
  try {
    batch_.submit(ranks_, TierDirection::kOnboard, stream);
  } catch (...) {
    for (size_t i = 0; i < dest_.size(); i += G) residency_.return_taken(&dest_[i]);
    throw;
  }
  for (size_t i = 0; i < onboards_.size(); ++i) onboard_node(onboards_[i], &dest_[G * i]);
}

// ---------------------------------------------------------------------------
// Moves
// ---------------------------------------------------------------------------

void HostTier::prefetch_host_blocks(uint32_t node) const {
  // evict_node's drop_tier_child: the parent's count (the node's line is
  // near: prefetch_erase read it kAhead / 2 victims ago).
  index_.prefetch_tier_children(tree_.node(node).parent);
  for (uint32_t g = 0; g < layout_.num_groups(); ++g) {
    const uint32_t b = tree_.block(node, g);
    if (b != kNoBlock) pools_[layout_.group_pool[g]].prefetch(b);
  }
}

void HostTier::prefetch_offload(uint32_t node, const uint32_t* host_blocks, uint32_t next) const {
  // on_moved_out: the node's queue links, its parent's node, tier-children
  // count and record (whether the parent becomes evictable: not read when
  // the parent leaves next).
  const uint32_t parent = tree_.node(node).parent;
  tree_.prefetch_node(parent);
  eviction_.policy().prefetch(node);
  index_.prefetch_tier_children(parent);
  if (parent != next) {
    eviction_.policy().prefetch_queued(parent);
    tree_.prefetch_blocks(parent);
  }
  for (uint32_t g = 0; g < layout_.num_groups(); ++g) {
    if (host_blocks[g] == kNoBlock) continue;
    const uint32_t p = layout_.group_pool[g];
    residency_.pool(p).prefetch(tree_.block(node, g));
    pools_[p].prefetch(host_blocks[g]);
  }
}

void HostTier::prefetch_parent_ref(uint32_t node, uint32_t next) const {
  if (layout_.anchors.empty()) return;
  const uint32_t parent = tree_.node(node).parent;
  if (parent == RadixTree::kRoot || parent == next || !index_.in_primary(parent)) return;
  const uint32_t g = layout_.ref_group;
  const uint32_t b = tree_.block(parent, g);
  if (b != kNoBlock) residency_.pool(layout_.group_pool[g]).prefetch(b);
}

void HostTier::release_blocks(const uint32_t* blocks) {
  for (uint32_t g = 0; g < layout_.num_groups(); ++g)
    if (blocks[g] != kNoBlock) pools_[layout_.group_pool[g]].release(blocks[g]);
}

void HostTier::offload_node(uint32_t node, const uint32_t* host_blocks, uint32_t next) {
  // A write-through job still out reads the node's block ids from its
  // record: it finishes before they name host blocks.
  eviction_.before_move_out(node);
  TreeNode& t = index_.node(node);
  for (uint32_t g = 0; g < layout_.num_groups(); ++g) {
    if (host_blocks[g] == kNoBlock) continue;  // an evicted windowed slot stays empty
    BlockPool& host = pools_[layout_.group_pool[g]];
    residency_.drop_cached(g, tree_.block(node, g));
    host.set_node(host_blocks[g], node);
    host.release(host_blocks[g]);  // cached
    index_.set_block(node, g, host_blocks[g]);
  }
  index_.set_tier(node, kHostTier);
  if (EventLog* ev = index_.events())
    ev->tier_changed(node, KVC_TIER_HOST, index_.group_mask(node), t.priority);
  index_.add_tier_child(t.parent);
  eviction_.on_moved_out(node, host_blocks, t.parent == next);
  if (tree_.is_leaf(node)) policy_.insert_by_age(node, t.priority, t.age);
  ++counters_.offloaded_blocks;
  counters_.offloaded_bytes += set_bytes();
}

void HostTier::onboard_node(uint32_t node, const uint32_t* blocks) {
  if (policy_.contains(node)) policy_.remove(node);
  TreeNode& t = index_.node(node);
  for (uint32_t g = 0; g < layout_.num_groups(); ++g) {
    if (blocks[g] == kNoBlock) continue;
    pools_[layout_.group_pool[g]].evict(tree_.block(node, g));
    residency_.cache_taken(g, blocks[g], node);
    index_.set_block(node, g, blocks[g]);
  }
  index_.set_tier(node, kPrimaryTier);
  if (EventLog* ev = index_.events())
    ev->tier_changed(node, KVC_TIER_PRIMARY, index_.group_mask(node), t.priority);
  index_.drop_tier_child(t.parent);
  eviction_.on_moved_in(node, blocks);
  ++counters_.onboarded_blocks;
  counters_.onboarded_bytes += set_bytes();
}

void HostTier::adopt(uint32_t node, const uint32_t* blocks) {
  if (policy_.contains(node)) policy_.remove(node);
  eviction_.cancel_expiry(node);  // in use from now on
  for (uint32_t g = 0; g < layout_.num_groups(); ++g) {
    if (tree_.block(node, g) != kNoBlock) pools_[layout_.group_pool[g]].evict(tree_.block(node, g));
    if (blocks[g] != kNoBlock) residency_.set_node(g, blocks[g], node);
    index_.set_block(node, g, blocks[g]);
  }
  if (layout_.anchors.empty()) ++index_.holders(node);  // the sequence names it
  TreeNode& t = index_.node(node);
  index_.set_tier(node, kPrimaryTier);
  if (EventLog* ev = index_.events())
    ev->tier_changed(node, KVC_TIER_PRIMARY, index_.group_mask(node), t.priority);
  index_.drop_tier_child(t.parent);  // the parent is held: not queued
}

// ---------------------------------------------------------------------------
// The tier's own eviction
// ---------------------------------------------------------------------------

void HostTier::evict_node(uint32_t node) {
  // Post-order over its subtree (host nodes only), without recursion.
  uint32_t n = node;
  for (;;) {
    while (tree_.first_child(n) != kNoNode) n = tree_.first_child(n);
    const uint32_t parent = tree_.node(n).parent;
    const bool last = n == node;
    if (policy_.contains(n)) policy_.remove(n);
    eviction_.cancel_expiry(n);
    if (stores_ != nullptr) stores_->offer(n);  // the next tier down
    for (uint32_t g = 0; g < layout_.num_groups(); ++g)
      if (tree_.block(n, g) != kNoBlock) pools_[layout_.group_pool[g]].evict(tree_.block(n, g));
    index_.drop_tier_child(parent);
    index_.erase(n);
    ++cache_counters_.evicted_blocks;
    if (last) {
      // A host parent left without children becomes evictable at its age.
      if (parent != RadixTree::kRoot && in_host(parent) && tree_.is_leaf(parent)) {
        const TreeNode& p = tree_.node(parent);
        policy_.insert_by_age(parent, p.priority, p.age);
      }
      return;
    }
    n = parent;
  }
}

void HostTier::drop_children(uint32_t node) {
  for (uint32_t c = tree_.first_child(node); c != kNoNode;) {
    const uint32_t next = tree_.next_sibling(c);
    if (in_host(c)) evict_node(c);
    c = next;
  }
}

void HostTier::evict_all() {
  for (uint32_t v = policy_.victim(); v != kNoNode; v = policy_.victim()) evict_node(v);
}

void HostTier::revert_priority(uint32_t node) {
  if (!policy_.contains(node)) return;
  policy_.remove(node);
  policy_.insert_by_age(node, kDefaultPriority, tree_.node(node).age);
}

}  // namespace kvc
