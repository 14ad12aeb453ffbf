// The host tier's plan of a call's evictions: which primary victims free
// the blocks the call needs, in the order allocation would evict them one
// by one (Eviction::next_victim), which of them are offloaded and which
// dropped, and which host nodes leave the tree to make room for the
// offloads. Without windowed groups it reads the queues in order and writes
// none (PlanQueue); with them it looks ahead by changing the queues (its
// own, and Eviction's through the trial calls) and undoes every change
// before it returns. Builds that check (debug, fuzz: KVC_CHECK_PLANS) make
// both plans of a model without windowed groups and require the same one.
#include <string>

#include "base/error.h"
#include "core/host_tier.h"

// Debug builds check the read-only plan against the trial plan (the fuzz
// build defines it too).
#if !defined(NDEBUG) && !defined(KVC_CHECK_PLANS)
#define KVC_CHECK_PLANS
#endif

namespace kvc {

void HostTier::PlanQueue::start(const EvictionPolicy& q) {
  queue_ = &q;
  added_.clear();
  seq_ = 0;
  priority_ = q.lowest_priority(0);
  node_ = priority_ <= kMaxPriority ? q.oldest(priority_) : kNoNode;
}

template <class Skip, class Fetch>
uint32_t HostTier::PlanQueue::take(Skip&& skip, Fetch&& fetch) {
  // The cursor's next entry not held, across the lists by priority.
  for (;;) {
    while (node_ != kNoNode && skip(node_)) node_ = queue_->next(node_);
    if (node_ != kNoNode || priority_ > kMaxPriority) break;
    priority_ = queue_->lowest_priority(priority_ + 1);
    node_ = priority_ <= kMaxPriority ? queue_->oldest(priority_) : kNoNode;
  }
  // An added entry goes first only with a lower key: insert_by_age puts it
  // after every queued entry of its key.
  if (!added_.empty()) {
    const Added& top = added_.front();
    if (node_ == kNoNode || top.priority < priority_ ||
        (top.priority == priority_ && top.age < queue_->age(node_))) {
      const uint32_t n = top.node;
      pop_top();
      return n;
    }
  }
  const uint32_t n = node_;
  if (n != kNoNode) {
    node_ = queue_->next(n);
    // The next turn reads its line (age, next): fetched while this victim
    // is planned.
    if (node_ != kNoNode) {
      queue_->prefetch(node_);
      fetch(node_);
    }
  }
  return n;
}

// The heap's moves are written out field by field: std::push_heap and
// pop_heap pass the moved entry through a stack temporary read back as one
// wide load, which fails store forwarding and waits for every older store.
void HostTier::PlanQueue::add(uint32_t node, uint32_t priority, uint64_t age) {
  const uint64_t seq = ++seq_;
  size_t i = added_.size();
  added_.emplace_back(priority, node, age, seq);
  while (i > 0) {  // sift up: parents after the new entry move down
    const size_t up = (i - 1) / 2;
    const Added& u = added_[up];
    if (!after(u.priority, u.age, u.seq, priority, age, seq)) break;
    added_[i] = u;
    i = up;
  }
  put(added_[i], priority, node, age, seq);
}

void HostTier::PlanQueue::pop_top() {
  const size_t n = added_.size() - 1;  // the last entry sifts down from the top
  if (n == 0) {
    added_.pop_back();
    return;
  }
  const Added& last = added_[n];
  const uint32_t priority = last.priority, node = last.node;
  const uint64_t age = last.age, seq = last.seq;
  size_t i = 0;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= n) break;
    if (c + 1 < n && after(added_[c], added_[c + 1])) ++c;
    const Added& d = added_[c];
    if (!after(priority, age, seq, d.priority, d.age, d.seq)) break;
    added_[i] = d;
    i = c;
  }
  put(added_[i], priority, node, age, seq);
  added_.pop_back();
}

// Picks the victims that free enough primary blocks in every pool for
// r.sets block sets, in the order alloc_block() would evict them one by one
// (evict_one: the lowest (priority, age) among the anchor queue and the
// windowed groups' queues of a pool still short), the nodes the call holds
// excepted: their anchor entries, and their windowed slots the call takes
// (positions >= window_begin[g]; every slot of `partial`). An anchor victim
// frees every block it has, its queued windowed slots with it. Decides each
// anchor victim's fate (offload or drop) and the host nodes evicted to make
// room for the offloads, counted in blocks per pool (a node whose windowed
// slot is empty has fewer).
void HostTier::plan_victims(const Reservation& r) {
  if (!layout_.windowed.empty()) {
    plan<false>(r);
    return;
  }
  plan<true>(r);
#ifdef KVC_CHECK_PLANS
  // The same plan by the queue changes: same victims, fates, host victims.
  const std::vector<Victim> victims = victims_;
  const std::vector<uint32_t> host_victims = host_victims_;
  victims_.clear();
  host_victims_.clear();
  plan<false>(r);
  bool same =
      victims.size() == victims_.size() && host_victims == host_victims_ && slot_victims_.empty();
  for (size_t i = 0; same && i < victims.size(); ++i)
    same = victims[i].node == victims_[i].node && victims[i].offload == victims_[i].offload;
  if (!same)
    fail(KVC_ERR_INTERNAL,
         "host tier plan: the read-only plan (" + std::to_string(victims.size()) + " victims, " +
             std::to_string(host_victims.size()) + " host victims) differs from the trial plan (" +
             std::to_string(victims_.size()) + ", " + std::to_string(host_victims_.size()) + ")");
#endif
}

template <bool kRead>
void HostTier::plan(const Reservation& r) {
  const size_t P = residency_.num_pools();
  const uint32_t G = layout_.num_groups();
  const std::vector<uint32_t>& held = *r.held;
  const uint32_t partial = r.partial;
  const int64_t* window_begin = r.window_begin;
  short_blocks_.resize(P);
  bool short_any = false;
  for (size_t p = 0; p < P; ++p) {
    short_blocks_[p] =
        int64_t(r.sets * layout_.pool_groups[p]) - int64_t(residency_.pool(p).num_free());
    short_any |= short_blocks_[p] > 0;
  }
  if (!short_any) return;
  eviction_.expire_due();  // the victim order must be current
  host_room_.resize(P);
  for (size_t p = 0; p < P; ++p) host_room_[p] = int64_t(pools_[p].num_free());
  freed_.resize(P);

  constexpr uint32_t kAnchor = Eviction::kAnchor;
  if (kRead) {
    anchor_plan_.start(eviction_.policy());
    host_plan_.start(policy_);
  }
  auto held_node = [&](uint32_t n) { return is_excluded(n); };
  // A victim's turn reads its node first (parent, priority).
  auto fetch_node = [&](uint32_t n) { tree_.prefetch_node(n); };
  auto take_out_host = [&](uint32_t n) {
    undo_.emplace_back(n, false, policy_.priority(n), policy_.age(n));
    policy_.remove(n);
  };
  auto put_in_host = [&](uint32_t n) {
    const TreeNode& t = tree_.node(n);
    policy_.insert_by_age(n, t.priority, t.age);
    undo_.emplace_back(n, true, t.priority, t.age);
  };
  auto touch = [&](uint32_t n) {
    if (marks_[n].none()) touched_.push_back(n);
  };
  auto exclude = [&](uint32_t n, int64_t position) {
    excluded_bits_[n >> 6] |= uint64_t(1) << (n & 63);
    if (kRead) return;  // the queues' readers skip it
    if (eviction_.queued(n, kAnchor)) eviction_.trial_take_out(n, kAnchor);
    if (policy_.contains(n)) take_out_host(n);
    for (uint32_t g : layout_.windowed)
      if ((position < 0 || window_begin == nullptr || position >= window_begin[g]) &&
          eviction_.queued(n, g))
        eviction_.trial_take_out(n, g);
  };
  auto undo_all = [&] {
    if (kRead) {
      anchor_plan_.finish();
      host_plan_.finish();
    }
    eviction_.undo_trial();
    for (size_t i = undo_.size(); i > 0; --i) {
      const Undo& u = undo_[i - 1];
      if (u.inserted) policy_.remove(u.node);
      else policy_.insert_by_age(u.node, u.priority, u.age);
    }
    undo_.clear();
    for (uint32_t n : touched_) marks_[n] = Marks();
    touched_.clear();
    for (uint32_t n : held) excluded_bits_[n >> 6] = 0;
    if (partial != kNoNode) excluded_bits_[partial >> 6] = 0;
  };
  const bool no_windows = layout_.windowed.empty();
  // The pool whose block line holds a node's anchor reference count.
  const BlockPool* ref_pool =
      layout_.anchors.empty() ? nullptr : &residency_.pool(layout_.group_pool[layout_.ref_group]);
  // Host nodes leave the tree until every pool has room for `freed` blocks.
  auto make_host_room = [&]() {
    for (;;) {
      size_t q = 0;
      while (q < P && freed_[q] <= host_room_[q]) ++q;
      if (q == P) return true;
      const uint32_t h = kRead ? host_plan_.take(held_node, fetch_node) : policy_.victim();
      if (h == kNoNode) return false;
      if (!kRead) take_out_host(h);
      host_victims_.push_back(h);
      if (no_windows) {  // every slot of a host node is full: its record is not read
        for (size_t k = 0; k < P; ++k) host_room_[k] += int64_t(layout_.pool_groups[k]);
      } else {
        for (uint32_t g = 0; g < G; ++g)
          if (tree_.block(h, g) != kNoBlock) ++host_room_[layout_.group_pool[g]];
      }
      const uint32_t hp = tree_.node(h).parent;
      // Host victims climb chains too (see plan_anchor_victim).
      if (hp + 1 == h && hp > kChainAhead) tree_.prefetch_node(hp - kChainAhead);
      if (hp == RadixTree::kRoot || !in_host(hp)) continue;  // its host children are not counted
      const TreeNode& hpt = tree_.node(hp);
      // An only child: its parent is left without children (its marks, a
      // random line each, are read for parents of several children only).
      uint32_t gone = 1;
      if (hpt.num_children != 1) {
        touch(hp);
        gone = ++marks_[hp].gone_host;
      }
      if (!is_excluded(hp) && hpt.num_children == gone) {
        if (kRead) host_plan_.add(hp, hpt.priority, hpt.age);
        else put_in_host(hp);
        // The next host victim is most often hp: fetch its parent's node.
        if (hpt.parent != RadixTree::kRoot) tree_.prefetch_node(hpt.parent);
      }
    }
  };

  // An anchor victim taken out, its blocks counted in freed_: its fate,
  // and its parent may become evictable.
  auto plan_anchor_victim = [&](uint32_t v) {
    const TreeNode& t = tree_.node(v);
    // What the parent's turn below reads, fetched before the host room is
    // made (its own misses overlap them): the parent's node and its anchor
    // block's pool line (the record's line was fetched a victim ahead).
    if (t.parent != RadixTree::kRoot) {
      tree_.prefetch_node(t.parent);
      index_.prefetch_tier_children(t.parent);
      const uint32_t b = ref_pool != nullptr ? tree_.block(t.parent, layout_.ref_group) : kNoBlock;
      if (b != kNoBlock) ref_pool->prefetch(b);
      // A chain published in one go has consecutive ids, and the plan
      // climbs it: the ancestors a few turns ahead are then parent - k.
      // Their node and record lines are fetched kChainAhead turns ahead,
      // their anchor blocks' pool lines (a random line each) half as far.
      if (t.parent + 1 == v && t.parent > kChainAhead) {
        const uint32_t far = t.parent - kChainAhead, near = t.parent - kChainAhead / 2;
        tree_.prefetch_node(far);
        tree_.prefetch_blocks(far);
        index_.prefetch_tier_children(far);
        if (ref_pool != nullptr) ref_pool->prefetch_maybe(tree_.block(near, layout_.ref_group));
      }
    }
    const bool offload = t.priority >= min_priority_ && make_host_room();
    if (offload)
      for (size_t q = 0; q < P; ++q) host_room_[q] -= freed_[q];
    victims_.emplace_back(v, offload);
    const uint32_t parent = t.parent;
    if (parent == RadixTree::kRoot) return;
    const TreeNode& pt = tree_.node(parent);
    const uint32_t primary_children = pt.num_children - index_.tier_children(parent);
    // An only primary child: no marks needed (as for host parents above).
    uint32_t gone = 1;
    if (primary_children != 1) {
      touch(parent);
      gone = ++marks_[parent].gone_primary;
    }
    // node_ref (record, then block table) last: the rest rules most out.
    if (!in_host(parent) && !is_excluded(parent) && primary_children == gone &&
        index_.node_ref(parent) == 0) {
      if (kRead) anchor_plan_.add(parent, pt.priority, pt.age);
      else eviction_.trial_put_in(parent, kAnchor);
      // The next victim is most often this parent: fetch what its turn
      // reads of its own parent (node, record) one victim ahead.
      if (pt.parent != RadixTree::kRoot) {
        tree_.prefetch_node(pt.parent);
        tree_.prefetch_blocks(pt.parent);
        index_.prefetch_tier_children(pt.parent);
      }
    }
  };

  for (size_t b = 0; b < held.size(); ++b) exclude(held[b], int64_t(b));
  if (partial != kNoNode) exclude(partial, -1);

  for (;;) {
    size_t p = 0;
    while (p < P && short_blocks_[p] <= 0) ++p;
    if (p == P) break;
    if (kRead) {
      // Without windowed groups every pool evicts the anchor queue's
      // victim, which frees a block of each group.
      const uint32_t v = anchor_plan_.take(held_node, fetch_node);
      if (v == kNoNode) {  // have_blocks() rules this out
        undo_all();
        fail(KVC_ERR_INTERNAL, "pool " + std::to_string(p) + " has no block to evict");
      }
      for (size_t q = 0; q < P; ++q) {
        freed_[q] = int64_t(layout_.pool_groups[q]);
        short_blocks_[q] -= freed_[q];
      }
      plan_anchor_victim(v);
      continue;
    }
    const Eviction::Victim best = eviction_.next_victim(uint32_t(p));
    if (best.node == kNoNode) {  // have_blocks() rules this out
      undo_all();
      fail(KVC_ERR_INTERNAL, "pool " + std::to_string(p) + " has no block to evict");
    }
    if (best.group != kAnchor) {  // a windowed slot, on its own
      slot_victims_.emplace_back(best.node, best.group);
      eviction_.trial_take_out(best.node, best.group);
      --short_blocks_[p];
      continue;
    }
    // (best is read field by field: next_victim may write its node alone,
    // and one wide read of both would wait for every store before it.)
    const uint32_t v = best.node;
    eviction_.trial_take_out(v, kAnchor);
    for (size_t q = 0; q < P; ++q) freed_[q] = 0;
    for (uint32_t g = 0; g < G; ++g) {
      if (layout_.is_windowed(g)) {
        if (!eviction_.queued(v, g)) continue;  // empty (a cached node's slot is never in use)
        eviction_.trial_take_out(v, g);
      }
      ++freed_[layout_.group_pool[g]];
    }
    for (size_t q = 0; q < P; ++q) short_blocks_[q] -= freed_[q];
    plan_anchor_victim(v);
  }
  undo_all();
}

}  // namespace kvc
