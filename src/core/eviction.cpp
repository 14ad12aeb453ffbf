#include "core/eviction.h"

#include <algorithm>
#include <string>

#include "base/error.h"

namespace kvc {

Eviction::Eviction(const GroupLayout& layout, PrefixIndex& index, Residency& residency,
                   CacheCounters& counters, bool manual_clock)
    : layout_(layout),
      index_(index),
      tree_(index.tree()),
      residency_(residency),
      counters_(counters),
      policy_(tree_.id_bound()),
      time_(manual_clock),
      expiry_stride_(1 + uint32_t(layout.windowed.size())),
      expiry_(uint32_t(uint64_t(tree_.id_bound()) * expiry_stride_)) {
  for (size_t k = 0; k < layout.windowed.size(); ++k) window_policies_.emplace_back(tree_.id_bound());
  release_set_.resize(layout.num_groups());
  evicted_.resize(kEvictChunk * layout.num_groups());
}

// ---------------------------------------------------------------------------
// Holding and releasing
// ---------------------------------------------------------------------------

void Eviction::hold_slot(uint32_t node, uint32_t g) {
  if (!residency_.add_ref(g, tree_.block(node, g))) return;
  // Cached: it leaves its queue; its priority is set again on release.
  const int32_t k = layout_.window_slot[g];
  if (k < 0) {
    if (policy_.contains(node)) policy_.remove(node);
    if (!expiry_.empty()) expiry_.cancel(expiry_key(node, 0));
  } else {
    window_policies_[k].remove(node);
    if (!expiry_.empty()) expiry_.cancel(expiry_key(node, uint32_t(k) + 1));
  }
}

void Eviction::hold_node(uint32_t node) {
  for (uint32_t g = 0; g < layout_.num_groups(); ++g)
    if (tree_.block(node, g) != kNoBlock) hold_slot(node, g);
}

void Eviction::hold_anchor(uint32_t node) {
  if (layout_.anchors.empty()) {
    ++index_.holders(node);
    return;
  }
  for (uint32_t g : layout_.anchors) hold_slot(node, g);
}

void Eviction::hold_chain(const uint32_t* nodes, uint64_t n,
                          std::vector<std::vector<uint32_t>>& blocks) {
  if (n > 0 && policy_.contains(nodes[n - 1])) policy_.remove(nodes[n - 1]);
  if (!expiry_.empty())
    for (uint64_t i = 0; i < n; ++i) expiry_.cancel(expiry_key(nodes[i], 0));
  for (uint32_t g = 0; g < layout_.num_groups(); ++g) {
    std::vector<uint32_t>& out = blocks[g];
    const size_t at = out.size();
    out.resize(at + n);
    tree_.gather_blocks(nodes, n, g, out.data() + at);
    residency_.add_refs(g, out.data() + at, n);
  }
}

void Eviction::release_anchor(uint32_t node, BlockRetention r) {
  if (layout_.anchors.empty()) {
    --index_.holders(node);
    erase_if_unused(node);
    return;
  }
  for (uint32_t g = 0; g < layout_.num_groups(); ++g)
    release_set_[g] = layout_.is_windowed(g) ? kNoBlock : tree_.block(node, g);
  release_set(release_set_.data(), 1, r);
}

void Eviction::release_set(const uint32_t* blocks, size_t stride, BlockRetention r) {
  uint32_t cached = kNoNode;
  for (uint32_t g = 0; g < layout_.num_groups(); ++g) {
    const uint32_t b = blocks[g * stride];
    if (b == kNoBlock || !residency_.release_block(g, b)) continue;
    const uint32_t node = residency_.info(g, b).node;
    if (layout_.is_windowed(g)) on_window_cached(node, g, r);
    else cached = node;
  }
  if (cached != kNoNode) on_cached(cached, r);
}

void Eviction::release_node(uint32_t node, BlockRetention r) {
  for (uint32_t g = 0; g < layout_.num_groups(); ++g) release_set_[g] = tree_.block(node, g);
  release_set(release_set_.data(), 1, r);
}

void Eviction::on_cached(uint32_t node, BlockRetention r) {
  TreeNode& t = index_.node(node);
  const uint8_t before = t.priority;
  t.priority = r.priority;
  t.duration_ms = r.duration_ms;
  t.age = ++clock_;
  if (r.duration_ms != kNoDuration && r.priority != kDefaultPriority) {
    // The duration counts from when the block became reusable.
    const uint64_t at = revert_moment(t.reusable_at, r.duration_ms);
    if (at <= time_.now_ms()) t.priority = kDefaultPriority;
    else expiry_.schedule(expiry_key(node, 0), at);
  }
  if (t.priority != before)
    if (EventLog* ev = index_.events()) ev->priority_changed(node, t.priority);
  if (index_.primary_leaf(node)) policy_.push_newest(node, t.priority, t.age);
}

void Eviction::on_window_cached(uint32_t node, uint32_t g, BlockRetention r) {
  const uint32_t k = uint32_t(layout_.window_slot[g]);
  uint32_t priority = r.priority;
  if (r.duration_ms != kNoDuration && r.priority != kDefaultPriority) {
    const uint64_t at = revert_moment(tree_.node(node).reusable_at, r.duration_ms);
    if (at <= time_.now_ms()) priority = kDefaultPriority;
    else expiry_.schedule(expiry_key(node, k + 1), at);
  }
  window_policies_[k].push_newest(node, priority, ++clock_);
}

// ---------------------------------------------------------------------------
// Retention
// ---------------------------------------------------------------------------

void Eviction::mark_published(uint32_t node, uint8_t priority, uint64_t now_ms) {
  TreeNode& t = index_.node(node);
  t.priority = priority;
  t.reusable_at = now_ms;
}

void Eviction::expire_due() {
  if (expiry_.empty()) return;
  const uint64_t now = time_.now_ms();
  while (!expiry_.empty() && expiry_.next_moment() <= now) {
    const uint32_t key = expiry_.next_node();
    expiry_.cancel(key);
    const uint32_t node = key / expiry_stride_;
    const uint32_t k = key % expiry_stride_;
    if (k == 0) {
      TreeNode& t = index_.node(node);
      if (t.priority != kDefaultPriority)
        if (EventLog* ev = index_.events()) ev->priority_changed(node, kDefaultPriority);
      t.priority = kDefaultPriority;
      if (policy_.contains(node)) {
        policy_.remove(node);
        policy_.insert_by_age(node, kDefaultPriority, t.age);
      } else {
        tier_->revert_priority(node);
      }
    } else {
      EvictionPolicy& wp = window_policies_[k - 1];
      const uint64_t age = wp.age(node);
      wp.remove(node);
      wp.insert_by_age(node, kDefaultPriority, age);
    }
  }
}

// ---------------------------------------------------------------------------
// Evicting
// ---------------------------------------------------------------------------

Eviction::Victim Eviction::next_victim(uint32_t pool) const {
  Victim best;
  auto consider = [&](const EvictionPolicy& q, uint32_t group) {
    const uint32_t v = q.victim();
    if (v == kNoNode) return;
    const uint32_t priority = q.priority(v);
    const uint64_t age = q.age(v);
    if (priority < best.priority || (priority == best.priority && age < best.age))
      best = Victim{v, group, priority, age};
  };
  if (layout_.pool_has_anchor[pool]) consider(policy_, kAnchor);
  for (uint32_t g : layout_.pool_windowed[pool])
    consider(window_policies_[uint32_t(layout_.window_slot[g])], g);
  return best;
}

template <bool kTiers>
bool Eviction::requeue_parent(uint32_t parent) {
  if (parent == RadixTree::kRoot) return false;
  // Without tiers (evict_ahead: anchors only, every node primary) a leaf
  // is a node without children and node_ref() its anchor reference.
  if (!(kTiers ? index_.primary_leaf(parent) : tree_.is_leaf(parent))) return false;
  if ((kTiers ? index_.node_ref(parent) : index_.anchor_ref(parent)) != 0) return false;
  const TreeNode& p = tree_.node(parent);
  policy_.insert_by_age(parent, p.priority, p.age);
  return true;
}

template <bool kTiers, class TakeBlocks>
bool Eviction::retire(uint32_t node, PrefixIndex::ScopeRun& run, TakeBlocks&& take_blocks) {
  // A write-through job may still read its blocks: they are freed below.
  if (stores_ != nullptr) stores_->leaving(node);
  if (policy_.contains(node)) policy_.remove(node);  // a deferred node is not queued
  if (!expiry_.empty()) expiry_.cancel(expiry_key(node, 0));
  take_blocks(node);
  const uint32_t parent = tree_.node(node).parent;
  index_.erase(node, run);
  return requeue_parent<kTiers>(parent);
}

void Eviction::evict_node(uint32_t node) {
  PrefixIndex::ScopeRun run;
  retire<true>(node, run, [&](uint32_t n) {
    if (stores_ != nullptr) stores_->offer(n);
    if (index_.tier_children(n) != 0) tier_->drop_children(n);  // useless without it
    for (uint32_t g = 0; g < layout_.num_groups(); ++g) {
      const uint32_t blk = tree_.block(n, g);
      if (blk == kNoBlock) continue;
      if (layout_.is_windowed(g)) {
        // A node without its anchor blocks is useless: its windowed slots go too.
        const uint32_t k = uint32_t(layout_.window_slot[g]);
        window_policies_[k].remove(n);
        expiry_.cancel(expiry_key(n, k + 1));
      }
      residency_.evict_block(g, blk);
    }
  });
  index_.flush(run);
  ++counters_.evicted_blocks;
  // The next victims are most often this parent and its ancestors, or the
  // next oldest leaf.
  const uint32_t next = policy_.victim();
  if (next != kNoNode) tree_.prefetch_erase_path(next, 3);
}

void Eviction::evict_window_slot(uint32_t node, uint32_t g) {
  const uint32_t k = uint32_t(layout_.window_slot[g]);
  window_policies_[k].remove(node);
  expiry_.cancel(expiry_key(node, k + 1));
  residency_.evict_block(g, tree_.block(node, g));
  index_.set_block(node, g, kNoBlock);
  if (EventLog* ev = index_.events()) ev->removed(node, uint64_t(1) << g, tree_.node(node).tier);
  if (layout_.anchors.empty()) erase_if_unused(node);
}

void Eviction::erase_if_unused(uint32_t node) {
  while (node != RadixTree::kRoot) {
    if (tree_.holders(node) != 0 || !tree_.is_leaf(node) || index_.node_has_block(node)) return;
    const uint32_t parent = tree_.node(node).parent;
    index_.erase(node);
    ++counters_.evicted_blocks;
    node = parent;
  }
}

void Eviction::evict_subtree(uint32_t node) {
  // Every descendant of a cached anchor node is cached: leaves first
  // (leaves for primary eviction: children in other tiers go with their parent).
  auto primary_child = [&](uint32_t n) {
    for (uint32_t c = tree_.first_child(n); c != kNoNode; c = tree_.next_sibling(c))
      if (index_.in_primary(c)) return c;
    return kNoNode;
  };
  for (;;) {
    uint32_t leaf = node;
    for (uint32_t c = primary_child(leaf); c != kNoNode; c = primary_child(leaf)) leaf = c;
    evict_node(leaf);
    if (leaf == node) return;
  }
}

void Eviction::empty_page(uint32_t pool, uint32_t page) {
  const uint32_t bpp = residency_.pool(pool).blocks_per_page();
  empty_range_linked(pool, uint64_t(page) * bpp, uint64_t(page + 1) * bpp);
}

void Eviction::empty_range(uint32_t pool, uint64_t from, uint64_t to) {
  // A resize's cut (the tree may not link children): windowed slots go on
  // their own; the nodes of full-attention blocks go with every primary
  // descendant, found by walking each live node's ancestors, deepest first
  // (so each is a leaf when evicted, as evict_subtree does).
  const BlockPool& bp = residency_.pool(pool);
  std::vector<uint8_t> fate(tree_.id_bound(), 0);  // 0 unknown, 1 goes, 2 stays
  bool any = false;
  for (uint64_t id = from; id < to; ++id) {
    const uint32_t node = bp.info(uint32_t(id)).node;
    if (node == kNoNode) continue;
    uint32_t group = UINT32_MAX;
    for (uint32_t g = 0; g < layout_.num_groups() && group == UINT32_MAX; ++g)
      if (layout_.group_pool[g] == pool && tree_.block(node, g) == id) group = g;
    if (layout_.is_windowed(group)) {
      evict_window_slot(node, group);
    } else {
      fate[node] = 1;
      any = true;
    }
  }
  if (!any) return;
  std::vector<std::pair<uint32_t, uint32_t>> doomed;  // (depth, node)
  std::vector<uint32_t> path;
  for (uint32_t n = 1; n < tree_.id_bound(); ++n) {
    if (!tree_.node(n).live || !index_.in_primary(n)) continue;
    uint32_t a = n;
    path.clear();
    while (a != RadixTree::kRoot && fate[a] == 0) {
      path.push_back(a);
      a = tree_.node(a).parent;
    }
    const uint8_t f = a == RadixTree::kRoot ? 2 : fate[a];
    for (uint32_t p : path) fate[p] = f;
    if (fate[n] != 1) continue;
    uint32_t depth = 0;
    for (a = n; a != RadixTree::kRoot; a = tree_.node(a).parent) ++depth;
    doomed.emplace_back(depth, n);
  }
  std::sort(doomed.begin(), doomed.end(), std::greater<>());
  for (const auto& d : doomed)
    if (tree_.node(d.second).live && index_.in_primary(d.second)) evict_node(d.second);
}

void Eviction::empty_range_linked(uint32_t pool, uint64_t from, uint64_t to) {
  const BlockPool& bp = residency_.pool(pool);
  for (uint32_t id = uint32_t(from); id < to; ++id) {
    const uint32_t node = bp.info(id).node;
    if (node == kNoNode) continue;  // free (an evicted subtree may have freed it)
    uint32_t group = UINT32_MAX;
    for (uint32_t g = 0; g < layout_.num_groups() && group == UINT32_MAX; ++g)
      if (layout_.group_pool[g] == pool && tree_.block(node, g) == id) group = g;
    if (layout_.is_windowed(group)) evict_window_slot(node, group);
    else evict_subtree(node);
  }
}

void Eviction::evict_one(uint32_t pool) {
  if (layout_.pool_has_anchor[pool]) anchor_victim();  // victims whose writes are pending deferred
  const Victim v = next_victim(pool);
  if (v.node == kNoNode)  // have_blocks() rules this out
    fail(KVC_ERR_INTERNAL, "pool " + std::to_string(pool) + " has no block to evict");
  if (v.group == kAnchor) evict_node(v.node);
  else evict_window_slot(v.node, v.group);
}

void Eviction::evict_ahead(uint64_t count) {
  expire_due();  // the victim order must be current
  const uint32_t G = layout_.num_groups();
  // Scope references are dropped once per run of victims in one scope.
  PrefixIndex::ScopeRun scopes;
  // The victims most often climb a chain from its leaf: what erasing them
  // touches is warmed kLead victims ahead, one more ancestor per victim
  // (`far`, the last one warmed), and the whole lead again when the next
  // victim is not the parent.
  // Climbing, `far` moves up one ancestor a victim, and reading its parent
  // waits for its line: the node kGuess ids below it, its ancestor when the
  // chain was published in one go (consecutive ids), is fetched too. And
  // retiring a victim reads its parent's anchor block's reference count (a
  // line of the pool's block table): fetched for the node `far` was
  // kLead / 2 victims ago, whose record (the block id) is near by then.
  constexpr int kLead = 6;
  constexpr uint32_t kGuess = 8;
  constexpr uint32_t kRing = 4;  // >= kLead / 2 + 1, a power of two
  static_assert(kRing >= kLead / 2 + 1 && (kRing & (kRing - 1)) == 0, "ring size");
  uint32_t warmed[kRing];  // far, the last kRing victims
  for (uint32_t& w : warmed) w = RadixTree::kRoot;
  const uint32_t ref_group = layout_.ref_group;
  uint32_t v = anchor_victim();
  uint32_t far = v == kNoNode ? RadixTree::kRoot : tree_.prefetch_erase_path(v, kLead);
  for (uint64_t i = 0; i < count; ++i) {
    if (v == kNoNode)  // have_blocks() rules this out
      fail(KVC_ERR_INTERNAL, "no block to evict");
    const uint32_t parent = tree_.node(v).parent;
    const bool climbs = retire<false>(v, scopes, [&](uint32_t n) {
      const uint32_t* blocks = tree_.blocks(n);
      for (uint32_t g = 0; g < G; ++g) evicted_[i * G + g] = blocks[g];
    });
    if (i + 1 == count) break;  // no victim more (anchor_victim may defer or wait)
    v = anchor_victim();
    if (v == kNoNode) continue;
    if (!climbs || v != parent) {
      far = tree_.prefetch_erase_path(v, kLead);
    } else if (far != RadixTree::kRoot) {
      far = tree_.node(far).parent;
      if (far != RadixTree::kRoot) {
        tree_.prefetch_erase_path(far, 0);
        if (far > kGuess) tree_.prefetch_node(far - kGuess);
      }
    }
    warmed[i % kRing] = far;
    const uint32_t older = warmed[(i + kRing - kLead / 2) % kRing];
    if (older != RadixTree::kRoot) {
      const uint32_t blk = tree_.block(older, ref_group);
      if (blk != kNoBlock) __builtin_prefetch(&residency_.info(ref_group, blk));
    }
  }
  index_.flush(scopes);
  for (uint32_t g = 0; g < G; ++g) {
    counters_.groups[g].cached_blocks -= count;
    counters_.groups[g].evicted_blocks += count;
  }
  counters_.evicted_blocks += count;
}

void Eviction::alloc_sets_ahead(std::vector<std::vector<uint32_t>>& blocks, uint64_t first,
                                uint64_t count) {
  // Every eviction frees one block of each group, so this many are needed.
  const uint64_t free = residency_.free_sets();
  uint64_t victims = count > free ? count - free : 0;
  const uint32_t G = layout_.num_groups();
  if (G == 1) {
    // The free blocks, then each victim's block, which alloc_block would
    // push and pop at once.
    uint32_t* out = blocks[0].data() + first;
    for (uint64_t i = 0; i < count - victims; ++i) out[i] = residency_.acquire_free(0);
    for (uint64_t i = count - victims; i < count; i += kEvictChunk) {
      const uint64_t n = std::min(count - i, kEvictChunk);
      evict_ahead(n);
      residency_.evict_into_use(0, evicted_.data(), n);
      std::copy(evicted_.begin(), evicted_.begin() + ptrdiff_t(n), out + i);
    }
  } else {
    const uint32_t* ready = evicted_.data();  // blocks of victims evicted ahead
    const uint32_t* ready_end = ready;
    for (uint64_t i = first; i < first + count; ++i) {
      for (uint32_t g = 0; g < G; ++g) {
        if (residency_.pool_of(g).num_free() == 0) {  // where alloc_block would evict
          if (ready == ready_end) {
            const uint64_t n = std::min(victims, kEvictChunk);
            evict_ahead(n);
            victims -= n;
            ready = evicted_.data();
            ready_end = ready + n * G;
          }
          for (uint32_t h = 0; h < G; ++h) residency_.evict_uncounted(h, ready[h]);
          ready += G;
        }
        blocks[g][i] = residency_.acquire_free(g);
      }
    }
  }
  for (uint32_t g = 0; g < G; ++g) residency_.count_taken(g, count);
}

void Eviction::evict_all() {
  const uint64_t evicted = counters_.evicted_blocks;
  std::vector<uint64_t> group_evicted;
  for (const GroupStats& c : counters_.groups) group_evicted.push_back(c.evicted_blocks);
  for (uint32_t v = policy_.victim(); v != kNoNode; v = policy_.victim()) evict_node(v);
  for (uint32_t g : layout_.windowed) {
    const EvictionPolicy& wp = window_policies_[uint32_t(layout_.window_slot[g])];
    for (uint32_t v = wp.victim(); v != kNoNode; v = wp.victim()) evict_window_slot(v, g);
  }
  tier_->evict_all();
  // A reset is not an eviction.
  counters_.evicted_blocks = evicted;
  for (uint32_t g = 0; g < layout_.num_groups(); ++g)
    counters_.groups[g].evicted_blocks = group_evicted[g];
}

void Eviction::requeue(uint32_t node) {
  const TreeNode& t = tree_.node(node);
  if (!t.live || t.tier != kPrimaryTier || policy_.contains(node)) return;
  if (layout_.anchors.empty() || index_.node_ref(node) != 0 || !index_.primary_leaf(node)) return;
  TreeNode& w = index_.node(node);
  w.age = ++clock_;
  policy_.push_newest(node, w.priority, w.age);
}

// ---------------------------------------------------------------------------
// What tiers do to the queues
// ---------------------------------------------------------------------------

void Eviction::before_move_out(uint32_t node) {
  if (stores_ != nullptr) stores_->leaving(node);
}

void Eviction::on_moved_out(uint32_t node, const uint32_t* slots, bool parent_leaves) {
  // Its primary blocks are free now (not reused before this returns): a
  // write-through job still reading them is waited for.
  if (stores_ != nullptr) stores_->leaving(node);
  if (policy_.contains(node)) policy_.remove(node);
  for (uint32_t g : layout_.windowed) {
    if (slots[g] == kNoBlock) continue;  // an evicted windowed slot stays empty
    const uint32_t k = uint32_t(layout_.window_slot[g]);
    window_policies_[k].remove(node);
    expiry_.cancel(expiry_key(node, k + 1));
  }
  // Its parent may now have no primary child: evictable at its age (its
  // queue entry would be taken out again at once when it leaves next:
  // what that costs, a random line each in the pool and the queue, is
  // saved).
  if (parent_leaves) return;
  const uint32_t parent = tree_.node(node).parent;
  if (parent != RadixTree::kRoot && index_.in_primary(parent) && index_.primary_leaf(parent) &&
      index_.node_ref(parent) == 0 && !policy_.contains(parent)) {
    const TreeNode& p = tree_.node(parent);
    policy_.insert_by_age(parent, p.priority, p.age);
  }
}

void Eviction::on_moved_in(uint32_t node, const uint32_t* blocks) {
  const TreeNode& t = tree_.node(node);
  for (uint32_t g : layout_.windowed)
    if (blocks[g] != kNoBlock)
      window_policies_[uint32_t(layout_.window_slot[g])].insert_by_age(node, t.priority, t.age);
  if (policy_.contains(t.parent)) policy_.remove(t.parent);  // it has a primary child again
  if (index_.primary_leaf(node)) policy_.insert_by_age(node, t.priority, t.age);
}

void Eviction::trial_take_out(uint32_t node, uint32_t group) {
  EvictionPolicy& q = queue(group);
  undo_.emplace_back(node, group, false, q.priority(node), q.age(node));
  q.remove(node);
}

void Eviction::trial_put_in(uint32_t node, uint32_t group) {
  const TreeNode& t = tree_.node(node);
  queue(group).insert_by_age(node, t.priority, t.age);
  undo_.emplace_back(node, group, true, t.priority, t.age);
}

void Eviction::undo_trial() {
  for (size_t i = undo_.size(); i > 0; --i) {
    const Undo& u = undo_[i - 1];
    if (u.inserted) queue(u.group).remove(u.node);
    else queue(u.group).insert_by_age(u.node, u.priority, u.age);
  }
  undo_.clear();
}

}  // namespace kvc
