// The prefix index: the radix tree of published blocks, the interned scopes
// their keys name, the count of each node's children living in another tier
// than the primary one, and the lookup of a prompt's reusable prefix. Every
// key it finds or links is built by a KeyBuilder (key_builder.h), the one
// place keys and hashes are made.
//
// A node holds one block slot per layer group (block_manager.h explains
// anchor and windowed groups); what a slot's block is (free, cached, in
// use) is Residency's, when a node is evicted is Eviction's, and which tier
// holds its blocks is its tier's (TreeNode::tier).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/block_key.h"
#include "core/block_pool.h"
#include "core/cache_config.h"
#include "core/event_log.h"
#include "core/group_layout.h"
#include "core/radix_tree.h"
#include "core/residency.h"
#include "core/scope_table.h"
#include "core/snapshot_gate.h"
#include "core/store_keys.h"

namespace kvc {

struct BlockKey;
class KeyBuilder;

// What a prompt can reuse: full blocks (their nodes, root first) and a
// block matched token by token after them.
struct PrefixMatch {
  std::vector<uint32_t> full;
  uint32_t partial = kNoNode;  // node matched token by token
  uint32_t partial_tokens = 0;
  bool in_place = false;       // take the partial node's blocks (copy on partial reuse off)
};

class PrefixIndex {
 public:
  // Room for `max_nodes` nodes. track_children: the tree links children
  // (walked by tiers and page moves).
  PrefixIndex(const CacheConfig& config, const GroupLayout& layout, const Residency& residency,
              uint32_t max_nodes, bool track_children);

  const RadixTree& tree() const { return tree_; }
  const ScopeTable& scopes() const { return scopes_; }

  // --- Keys and lookups ---------------------------------------------------
  // The keys of scope `scope`'s blocks (key_builder.h).
  KeyBuilder keys(uint32_t scope) const;
  // The key of a block under `parent` (defined with key_builder.h).
  BlockKey key(uint32_t parent, uint32_t scope, const int32_t* tokens, uint32_t num_tokens,
               const std::string& extra) const;
  uint32_t find(const BlockKey& key) const;
  // The reusable prefix of a prompt of n tokens in `scope` (ScopeTable::kNone:
  // nothing) with sorted extra keys; changes nothing (not even ages). Full
  // blocks every group can use (a windowed group needs the blocks covering
  // its window before the reuse point), then, with partial reuse, the
  // longest token-by-token match of the next block. The last prompt token is
  // never reused.
  void match(const int32_t* tokens, uint64_t n, uint32_t scope, const std::vector<ExtraKey>& extras,
             PrefixMatch& m) const;

  // --- Nodes --------------------------------------------------------------
  // Links a new node with `blocks` (one per group) for `key` and references
  // its scope. The key must be absent and the tree not full.
  uint32_t insert(const BlockKey& key, const uint32_t* blocks);
  // RadixTree::insert_plain (a full block without extra keys under a
  // parent that is not the root, published with `priority` at `now_ms`)
  // WITHOUT its scope reference: the caller adds the references of a run of
  // such inserts at once (ref_scope(scope, n)) before anything reads them.
  KVC_ALWAYS_INLINE uint32_t insert_plain(uint32_t parent, uint32_t scope, const int32_t* tokens,
                                          uint64_t hash, const uint32_t* blocks, uint8_t priority,
                                          uint64_t now_ms) {
    return tree_.insert_plain(parent, scope, tokens, hash, blocks, priority, now_ms);
  }
  // Unlinks a leaf and drops its scope reference; with events on, the
  // blocks it held are REMOVED.
  void erase(uint32_t node) {
    check_unstamped(node, "erased");
    if (events_ != nullptr) emit_removed(node);
    if (store_keys_ != nullptr) store_keys_->forget(node);
    if (gate_ != nullptr) gate_->dropped(node);
    scopes_.unref(tree_.node(node).scope);
    tree_.erase(node);
  }
  // erase() of a run of nodes, the scope references dropped once per run of
  // one scope (eviction's fast path); flush() when the run ends.
  struct ScopeRun {
    uint32_t scope = ScopeTable::kNone;
    uint32_t refs = 0;
  };
  void erase(uint32_t node, ScopeRun& run) {
    const uint32_t scope = tree_.node(node).scope;
    if (scope != run.scope) {
      flush(run);
      run.scope = scope;
    }
    ++run.refs;
    check_unstamped(node, "erased");
    if (events_ != nullptr) emit_removed(node);
    if (store_keys_ != nullptr) store_keys_->forget(node);
    if (gate_ != nullptr) gate_->dropped(node);
    tree_.erase(node);
  }
  void flush(ScopeRun& run) {
    if (run.refs != 0) scopes_.unref(run.scope, run.refs);
    run.refs = 0;
  }
  // What eviction, retention and tiers keep in a node (priority, age,
  // retention, tier), and the slots that change with evictions and moves.
  TreeNode& node(uint32_t n) { return tree_.node(n); }
  const TreeNode& node(uint32_t n) const { return tree_.node(n); }
  void set_block(uint32_t n, uint32_t g, uint32_t blk) {
    check_unstamped(n, "given another block");
    tree_.set_block(n, g, blk);
  }
  // Moves a node to another tier (TreeNode::tier and its record's copy).
  void set_tier(uint32_t n, uint8_t tier) { tree_.set_tier(n, tier); }
  uint32_t& holders(uint32_t n) { return tree_.holders(n); }
  // Children of `node` that live in another tier.
  uint32_t tier_children(uint32_t node) const { return tier_children_[node]; }
  void prefetch_tier_children(uint32_t node) const { __builtin_prefetch(&tier_children_[node]); }
  void add_tier_child(uint32_t parent) { ++tier_children_[parent]; }
  void drop_tier_child(uint32_t parent) { --tier_children_[parent]; }

  // --- Events -------------------------------------------------------------
  // The event log (event_log.h), or nullptr with events off; set once.
  void set_events(EventLog* events) { events_ = events; }
  EventLog* events() const { return events_; }
  // The block stores' node keys (store_keys.h), forgotten as nodes leave;
  // nullptr without stores; set once.
  void set_store_keys(StoreKeys* keys) { store_keys_ = keys; }
  // The write-through stamps (StoreChain::stamps(): per node, its write
  // job's number, 0 for none), or nullptr without a record writer; set
  // once. Debug, sanitizer and fuzz builds (KVC_CHECK_WRITE_STAMPS) refuse
  // (KVC_ERR_INTERNAL) to erase a stamped node or rename one of its blocks:
  // every path that does must call StoreChain::leaving() first (the rule,
  // store_chain.h), since the writer reads the node's record and blocks
  // until its job is finished. Checked on the stamp, not on the writer's
  // progress, so that a path that forgets leaving() fails even when the
  // writer happened to be done.
  void set_write_stamps(const std::vector<uint64_t>* stamps) { stamps_ = stamps; }
  // The state snapshots of a cache with state resources (snapshot_gate.h),
  // or nullptr; set once. With them, match() ends the reuse at the deepest
  // full block whose node has a snapshot (windows permitting) and matches
  // no partial block; a node leaving the tree drops its snapshot.
  void set_snapshot_gate(SnapshotGate* gate) { gate_ = gate; }
  const std::string& scope_bytes(uint32_t scope) const { return scopes_.bytes(scope); }
  uint64_t scope_digest(uint32_t scope) const { return scopes_.digest(scope); }

  // --- Scopes -------------------------------------------------------------
  uint32_t find_scope(const std::string& bytes) const { return scopes_.find(bytes); }
  uint32_t intern_scope(const std::string& bytes) { return scopes_.intern(bytes); }
  void ref_scope(uint32_t scope) { scopes_.ref(scope); }
  void ref_scope(uint32_t scope, uint32_t n) { scopes_.ref(scope, n); }
  void unref_scope(uint32_t scope) { scopes_.unref(scope); }

  // --- Node state read from the pools -------------------------------------
  bool in_primary(uint32_t node) const { return tree_.node(node).tier == kPrimaryTier; }
  // A primary node with no primary child (its children are all in other
  // tiers): a leaf for primary eviction.
  bool primary_leaf(uint32_t node) const {
    return tree_.node(node).num_children == tier_children_[node];
  }
  // Anchor reference count of a node (0: cached; nodes of other tiers are
  // never in use); in a model without full groups, whether anything holds
  // one of its slots or names it.
  uint32_t node_ref(uint32_t node) const {
    if (!in_primary(node)) return 0;
    if (!layout_.anchors.empty()) return anchor_ref(node);
    return windowed_node_ref(node);
  }
  // node_ref of a primary node in a model with anchor groups.
  uint32_t anchor_ref(uint32_t node) const {
    return residency_.info(layout_.ref_group, tree_.block(node, layout_.ref_group)).ref;
  }
  // Bit g set: the node holds a block of group g (events name groups so;
  // a cache with events has at most 64 groups).
  uint64_t group_mask(uint32_t node) const {
    uint64_t m = 0;
    for (uint32_t g = 0; g < layout_.num_groups(); ++g)
      if (tree_.block(node, g) != kNoBlock) m |= uint64_t(1) << g;
    return m;
  }
  bool node_has_block(uint32_t node) const {
    for (uint32_t g = 0; g < layout_.num_groups(); ++g)
      if (tree_.block(node, g) != kNoBlock) return true;
    return false;
  }

  // The checker (prefix_index_check.cpp): every live node findable by its
  // own key with its hash rebuilt, links and child counts, holders equal to
  // `holders` (the sequences naming each node), scope references equal to
  // `scope_refs` (sequences, which the caller counted, plus tree nodes).
  void check(const std::vector<uint32_t>& holders, std::vector<uint64_t> scope_refs) const;

 private:
  uint32_t windowed_node_ref(uint32_t node) const;
  void emit_removed(uint32_t node) {
    events_->removed(node, group_mask(node), tree_.node(node).tier);
  }
  // Shortens m.full to the longest prefix every windowed group can reuse
  // (the blocks covering the window before the reuse point present).
  void trim_to_windows(PrefixMatch& m) const;

  const CacheConfig& cfg_;
  const GroupLayout& layout_;
  const Residency& residency_;
  RadixTree tree_;
  ScopeTable scopes_;
  BigArray<uint32_t> tier_children_;  // per node
  EventLog* events_ = nullptr;
  StoreKeys* store_keys_ = nullptr;
  const std::vector<uint64_t>* stamps_ = nullptr;  // write-through stamps (set_write_stamps)
  // The rule of set_write_stamps() on `node` before erase or set_block;
  // compiled out of release builds (nothing then reads the arguments).
  void check_unstamped([[maybe_unused]] uint32_t node, [[maybe_unused]] const char* what) const {
#if !defined(NDEBUG) || defined(KVC_CHECK_WRITE_STAMPS)
    if (stamps_ != nullptr && node < stamps_->size() && (*stamps_)[node] != 0)
      stamped_node_changed(node, what);
#endif
  }
  [[noreturn]] void stamped_node_changed(uint32_t node, const char* what) const;
  SnapshotGate* gate_ = nullptr;
  // Lookup scratch (lookups change nothing, so they may run in const calls).
  mutable std::string extra_scratch_;
  mutable std::vector<int64_t> last_missing_;  // per windowed group
};

}  // namespace kvc
