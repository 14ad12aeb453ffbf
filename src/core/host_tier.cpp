// The secondary (host) tier operations of the cache manager: planning a
// call's evictions (which primary victims are offloaded, which dropped,
// which host blocks make room), the batched copies each way, and the moves
// of nodes between the tiers. The rules are in host_tier.h.
#include "core/host_tier.h"

#include "core/block_manager.h"
#include "base/error.h"

namespace kvc {

HostTier::HostTier(const std::vector<uint64_t>& pool_blocks, uint32_t id_bound,
                   uint32_t min_priority_)
    : policy(pool_blocks.empty() ? 0 : id_bound),  // no queue links without a tier
      host_children(id_bound, 0),
      min_priority(min_priority_) {
  for (uint64_t n : pool_blocks) pools.emplace_back(n);
  if (enabled()) {
    excluded.assign(id_bound, 0);
    gone_primary.assign(id_bound, 0);
    gone_host.assign(id_bound, 0);
  }
}

// ---------------------------------------------------------------------------
// Counts
// ---------------------------------------------------------------------------

uint64_t BlockManager::count_in_host(const std::vector<uint32_t>& nodes, uint32_t partial) const {
  if (!host_.enabled()) return 0;
  uint64_t n = 0;
  for (uint32_t node : nodes) n += in_host_tier(node) ? 1 : 0;
  if (partial != kNoNode && in_host_tier(partial)) ++n;
  return n;
}

uint64_t BlockManager::host_free_sets() const {
  uint64_t n = UINT64_MAX;
  for (size_t p = 0; p < host_.pools.size(); ++p)
    n = std::min<uint64_t>(n, host_.pools[p].num_free() / pool_groups_[p]);
  return n;
}

uint64_t BlockManager::set_bytes() const {
  uint64_t bytes = 0;
  for (const LayerGroup& g : grouping_.groups) bytes += g.geometry.block_bytes;
  return bytes;
}

// ---------------------------------------------------------------------------
// Planning: which nodes the call evicts, and how
// ---------------------------------------------------------------------------

// Picks the victims that free enough primary blocks in every pool for
// `sets` block sets, in the order alloc_block() would evict them one by one
// (evict_one: the lowest (priority, age) among the anchor queue and the
// windowed groups' queues of a pool still short), the nodes the call holds
// excepted: their anchor entries, and their windowed slots the call takes
// (positions >= window_begin[g]; every slot of `partial`). An anchor victim
// frees every block it has, its queued windowed slots with it. Decides each
// anchor victim's fate (offload or drop) and the host nodes evicted to make
// room for the offloads, counted in blocks per pool (a node whose windowed
// slot is empty has fewer). Only the queues change while it looks ahead,
// and every such change is undone before it returns.
void BlockManager::plan_victims(uint64_t sets, const std::vector<uint32_t>& held,
                                uint32_t partial, const int64_t* window_begin) {
  const size_t P = pools_.size();
  host_.short_blocks.resize(P);
  bool short_any = false;
  for (size_t p = 0; p < P; ++p) {
    host_.short_blocks[p] = int64_t(sets * pool_groups_[p]) - int64_t(pools_[p].num_free());
    short_any |= host_.short_blocks[p] > 0;
  }
  if (!short_any) return;
  expire_due();  // the victim order must be current
  host_.host_room.resize(P);
  for (size_t p = 0; p < P; ++p) host_.host_room[p] = int64_t(host_.pools[p].num_free());
  host_.freed.resize(P);

  auto queue = [&](uint32_t q) -> EvictionPolicy& {
    return q == HostTier::kPrimaryQueue ? policy_
           : q == HostTier::kHostQueue  ? host_.policy
                                        : window_policies_[q - HostTier::kWindowQueue];
  };
  auto take_out = [&](uint32_t n, uint32_t q) {
    EvictionPolicy& e = queue(q);
    host_.undo.push_back({n, q, false, e.priority(n), e.age(n)});
    e.remove(n);
  };
  auto put_in = [&](uint32_t n, uint32_t q) {
    const TreeNode& t = tree_.node(n);
    queue(q).insert_by_age(n, t.priority, t.age);
    host_.undo.push_back({n, q, true, t.priority, t.age});
  };
  auto touch = [&](uint32_t n) {
    if (!host_.excluded[n] && host_.gone_primary[n] == 0 && host_.gone_host[n] == 0)
      host_.touched.push_back(n);
  };
  auto slot_queue = [&](uint32_t g) { return HostTier::kWindowQueue + uint32_t(window_slot_[g]); };
  auto exclude = [&](uint32_t n, int64_t position) {
    touch(n);
    host_.excluded[n] = 1;
    if (policy_.contains(n)) take_out(n, HostTier::kPrimaryQueue);
    if (host_.policy.contains(n)) take_out(n, HostTier::kHostQueue);
    for (uint32_t g : windowed_)
      if ((position < 0 || window_begin == nullptr || position >= window_begin[g]) &&
          queue(slot_queue(g)).contains(n))
        take_out(n, slot_queue(g));
  };
  auto undo_all = [&] {
    for (size_t i = host_.undo.size(); i > 0; --i) {
      const HostTier::Undo& u = host_.undo[i - 1];
      if (u.inserted) queue(u.queue).remove(u.node);
      else queue(u.queue).insert_by_age(u.node, u.priority, u.age);
    }
    host_.undo.clear();
    for (uint32_t n : host_.touched) {
      host_.excluded[n] = 0;
      host_.gone_primary[n] = 0;
      host_.gone_host[n] = 0;
    }
    host_.touched.clear();
  };
  // Host nodes leave the tree until every pool has room for `freed` blocks.
  auto make_host_room = [&]() {
    for (;;) {
      size_t q = 0;
      while (q < P && host_.freed[q] <= host_.host_room[q]) ++q;
      if (q == P) return true;
      const uint32_t h = host_.policy.victim();
      if (h == kNoNode) return false;
      take_out(h, HostTier::kHostQueue);
      host_.host_victims.push_back(h);
      for (uint32_t g = 0; g < num_groups(); ++g)
        if (tree_.block(h, g) != kNoBlock) ++host_.host_room[group_pool_[g]];
      const uint32_t hp = tree_.node(h).parent;
      touch(hp);
      ++host_.gone_host[hp];
      if (hp != RadixTree::kRoot && in_host_tier(hp) && !host_.excluded[hp] &&
          tree_.node(hp).num_children == host_.gone_host[hp])
        put_in(hp, HostTier::kHostQueue);
    }
  };

  for (size_t b = 0; b < held.size(); ++b) exclude(held[b], int64_t(b));
  if (partial != kNoNode) exclude(partial, -1);

  for (;;) {
    size_t p = 0;
    while (p < P && host_.short_blocks[p] <= 0) ++p;
    if (p == P) break;
    uint32_t best = kNoNode, best_queue = 0, best_group = 0, best_priority = UINT32_MAX;
    uint64_t best_age = 0;
    auto consider = [&](uint32_t q, uint32_t g) {
      const EvictionPolicy& e = queue(q);
      const uint32_t n = e.victim();
      if (n == kNoNode) return;
      if (e.priority(n) < best_priority || (e.priority(n) == best_priority && e.age(n) < best_age))
        best = n, best_queue = q, best_group = g, best_priority = e.priority(n), best_age = e.age(n);
    };
    if (pool_has_anchor_[p]) consider(HostTier::kPrimaryQueue, 0);
    for (uint32_t g : pool_windowed_[p]) consider(slot_queue(g), g);
    if (best == kNoNode) {  // have_blocks() rules this out
      undo_all();
      fail(KVC_ERR_INTERNAL, "pool " + std::to_string(p) + " has no block to evict");
    }
    take_out(best, best_queue);
    if (best_queue != HostTier::kPrimaryQueue) {  // a windowed slot, on its own
      host_.slot_victims.push_back({best, best_group});
      --host_.short_blocks[p];
      continue;
    }
    const uint32_t v = best;
    for (size_t q = 0; q < P; ++q) host_.freed[q] = 0;
    for (uint32_t g = 0; g < num_groups(); ++g) {
      if (windowed(g)) {
        if (!queue(slot_queue(g)).contains(v)) continue;  // empty (a cached node's slot is never in use)
        take_out(v, slot_queue(g));
      }
      ++host_.freed[group_pool_[g]];
    }
    for (size_t q = 0; q < P; ++q) host_.short_blocks[q] -= host_.freed[q];
    const TreeNode& t = tree_.node(v);
    const bool offload = t.priority >= host_.min_priority && make_host_room();
    if (offload)
      for (size_t q = 0; q < P; ++q) host_.host_room[q] -= host_.freed[q];
    host_.victims.push_back({v, offload});
    const uint32_t parent = t.parent;
    if (parent == RadixTree::kRoot) continue;
    touch(parent);
    ++host_.gone_primary[parent];
    const TreeNode& pt = tree_.node(parent);
    if (!in_host_tier(parent) && !host_.excluded[parent] && node_ref(parent) == 0 &&
        pt.num_children - host_.host_children[parent] == host_.gone_primary[parent])
      put_in(parent, HostTier::kPrimaryQueue);
  }
  undo_all();
}

// ---------------------------------------------------------------------------
// The hook: onboard what the call holds, make room, copy in batches
// ---------------------------------------------------------------------------

void BlockManager::prepare_sets(uint64_t sets, const std::vector<uint32_t>& held,
                                uint32_t partial, const int64_t* window_begin, void* stream) {
  if (!host_.enabled() || sets == 0) return;
  device_.order_after_tier_copies(stream);
  const uint32_t G = num_groups();
  host_.onboards.clear();
  for (uint32_t n : held)
    if (in_host_tier(n)) host_.onboards.push_back(n);
  if (partial != kNoNode && in_host_tier(partial)) host_.onboards.push_back(partial);
  host_.victims.clear();
  host_.slot_victims.clear();
  host_.host_victims.clear();
  plan_victims(sets, held, partial, window_begin);

  // 1. Windowed slots evicted on their own. Without anchor groups a node
  // left with nothing leaves the tree: the call's own nodes must stay.
  if (!host_.slot_victims.empty()) {
    const bool guard = anchors_.empty();
    if (guard) {
      for (uint32_t n : held) ++tree_.holders(n);
      if (partial != kNoNode) ++tree_.holders(partial);
    }
    for (const HostTier::SlotVictim& v : host_.slot_victims) evict_window_slot(v.node, v.group);
    if (guard) {
      for (uint32_t n : held) --tree_.holders(n);
      if (partial != kNoNode) --tree_.holders(partial);
    }
  }

  // Room in the host tier: its victims leave the tree.
  for (uint32_t h : host_.host_victims) evict_host_node(h);

  // 2. Offloads: every copy of the call in one batch, into fresh host sets.
  host_.batch.reset(pools_.size());
  host_.dest.clear();
  for (const HostTier::Victim& v : host_.victims) {
    if (!v.offload) continue;
    for (uint32_t g = 0; g < G; ++g) {
      const uint32_t p = group_pool_[g];
      const uint32_t from = tree_.block(v.node, g);
      if (from == kNoBlock) {  // a windowed slot already evicted
        host_.dest.push_back(kNoBlock);
        continue;
      }
      const uint32_t hb = host_.pools[p].acquire_free();
      host_.dest.push_back(hb);
      host_.batch.add(p, from, hb);
    }
  }
  if (!host_.dest.empty()) {
    try {
      host_.batch.submit(device_, TierDirection::kOffload, memory_, host_memory_, stream);
    } catch (...) {
      // The victims stay where they were; their destinations go back.
      for (size_t i = 0; i < host_.dest.size(); i += G) release_host_blocks(&host_.dest[i]);
      throw;
    }
  }

  // 3. The victims, in eviction order: offloaded or dropped.
  size_t k = 0;
  for (const HostTier::Victim& v : host_.victims) {
    if (v.offload) offload_node(v.node, &host_.dest[G * k++]);
    else evict_node(v.node);
  }

  // 4. Onboards: the held host nodes come back into fresh primary sets.
  if (host_.onboards.empty()) return;
  host_.batch.reset(pools_.size());
  host_.dest.clear();
  for (uint32_t n : host_.onboards) {
    for (uint32_t g = 0; g < G; ++g) {
      const uint32_t p = group_pool_[g];
      const uint32_t from = tree_.block(n, g);
      if (from == kNoBlock) {
        host_.dest.push_back(kNoBlock);
        continue;
      }
      const uint32_t b = pools_[p].acquire_free();
      host_.dest.push_back(b);
      host_.batch.add(p, b, from);
    }
  }
  try {
    host_.batch.submit(device_, TierDirection::kOnboard, memory_, host_memory_, stream);
  } catch (...) {
    for (size_t i = 0; i < host_.dest.size(); i += G) release_primary_blocks(&host_.dest[i]);
    throw;
  }
  for (size_t i = 0; i < host_.onboards.size(); ++i) onboard_node(host_.onboards[i], &host_.dest[G * i]);
}

// ---------------------------------------------------------------------------
// Moves
// ---------------------------------------------------------------------------

void BlockManager::release_host_blocks(const uint32_t* blocks) {
  for (uint32_t g = 0; g < num_groups(); ++g)
    if (blocks[g] != kNoBlock) host_.pools[group_pool_[g]].release(blocks[g]);
}

void BlockManager::release_primary_blocks(const uint32_t* blocks) {
  for (uint32_t g = 0; g < num_groups(); ++g)
    if (blocks[g] != kNoBlock) pools_[group_pool_[g]].release(blocks[g]);
}

void BlockManager::offload_node(uint32_t node, const uint32_t* host_blocks) {
  policy_.remove(node);
  TreeNode& t = tree_.node(node);
  for (uint32_t g = 0; g < num_groups(); ++g) {
    if (host_blocks[g] == kNoBlock) continue;  // an evicted windowed slot stays empty
    if (windowed(g)) {  // its own queue holds it while primary
      const uint32_t k = uint32_t(window_slot_[g]);
      window_policies_[k].remove(node);
      expiry_.cancel(expiry_key(node, k + 1));
    }
    --group_counters_[g].cached_blocks;
    BlockPool& host = host_.pools[group_pool_[g]];
    pools_[group_pool_[g]].evict(tree_.block(node, g));
    host.set_node(host_blocks[g], node);
    host.release(host_blocks[g]);  // cached
    tree_.set_block(node, g, host_blocks[g]);
  }
  t.tier = kHostTier;
  const uint32_t parent = t.parent;
  ++host_.host_children[parent];
  // Its parent may now have no primary child: evictable at its age.
  if (parent != RadixTree::kRoot && !in_host_tier(parent) && primary_leaf(parent) &&
      node_ref(parent) == 0 && !policy_.contains(parent)) {
    const TreeNode& p = tree_.node(parent);
    policy_.insert_by_age(parent, p.priority, p.age);
  }
  if (tree_.is_leaf(node)) host_.policy.insert_by_age(node, t.priority, t.age);
  ++host_.counters.offloaded_blocks;
  host_.counters.offloaded_bytes += set_bytes();
}

void BlockManager::onboard_node(uint32_t node, const uint32_t* blocks) {
  if (host_.policy.contains(node)) host_.policy.remove(node);
  TreeNode& t = tree_.node(node);
  for (uint32_t g = 0; g < num_groups(); ++g) {
    if (blocks[g] == kNoBlock) continue;
    BlockPool& pool = pools_[group_pool_[g]];
    host_.pools[group_pool_[g]].evict(tree_.block(node, g));
    pool.set_node(blocks[g], node);
    pool.release(blocks[g]);  // cached
    ++group_counters_[g].cached_blocks;
    tree_.set_block(node, g, blocks[g]);
    if (windowed(g)) window_policies_[uint32_t(window_slot_[g])].insert_by_age(node, t.priority, t.age);
  }
  t.tier = kPrimaryTier;
  const uint32_t parent = t.parent;
  --host_.host_children[parent];
  if (policy_.contains(parent)) policy_.remove(parent);  // it has a primary child again
  if (primary_leaf(node)) policy_.insert_by_age(node, t.priority, t.age);
  ++host_.counters.onboarded_blocks;
  host_.counters.onboarded_bytes += set_bytes();
}

bool BlockManager::adopt_host_node(Sequence& s, uint64_t b, uint32_t node) {
  if (lead_group(s, b) == UINT32_MAX || !holds_alone(s, b)) return false;
  if (host_.policy.contains(node)) host_.policy.remove(node);
  expiry_.cancel(expiry_key(node, 0));  // in use from now on
  for (uint32_t g = 0; g < num_groups(); ++g) {
    if (tree_.block(node, g) != kNoBlock) host_.pools[group_pool_[g]].evict(tree_.block(node, g));
    if (s.blocks[g][b] != kNoBlock) pools_[group_pool_[g]].set_node(s.blocks[g][b], node);
    tree_.set_block(node, g, s.blocks[g][b]);
  }
  if (anchors_.empty()) ++tree_.holders(node);  // the sequence names it
  TreeNode& t = tree_.node(node);
  t.tier = kPrimaryTier;
  --host_.host_children[t.parent];  // the parent is held: not queued
  s.nodes[b] = node;
  return true;
}

void BlockManager::evict_host_node(uint32_t node) {
  // Post-order over its subtree (host nodes only), without recursion.
  uint32_t n = node;
  for (;;) {
    while (tree_.first_child(n) != kNoNode) n = tree_.first_child(n);
    const TreeNode& t = tree_.node(n);
    const uint32_t parent = t.parent;
    const bool last = n == node;
    if (host_.policy.contains(n)) host_.policy.remove(n);
    expiry_.cancel(expiry_key(n, 0));
    for (uint32_t g = 0; g < num_groups(); ++g)
      if (tree_.block(n, g) != kNoBlock) host_.pools[group_pool_[g]].evict(tree_.block(n, g));
    --host_.host_children[parent];
    scopes_.unref(t.scope);
    tree_.erase(n);
    ++counters_.evicted_blocks;
    if (last) {
      // A host parent left without children becomes evictable at its age.
      if (parent != RadixTree::kRoot && in_host_tier(parent) && tree_.is_leaf(parent)) {
        const TreeNode& p = tree_.node(parent);
        host_.policy.insert_by_age(parent, p.priority, p.age);
      }
      return;
    }
    n = parent;
  }
}

void BlockManager::drop_host_children(uint32_t node) {
  for (uint32_t c = tree_.first_child(node); c != kNoNode;) {
    const uint32_t next = tree_.next_sibling(c);
    if (in_host_tier(c)) evict_host_node(c);
    c = next;
  }
}

}  // namespace kvc
