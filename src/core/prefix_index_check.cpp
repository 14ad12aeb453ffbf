// The prefix index's part of the invariant checker: every live node hangs
// under a live full block, is found by its own key with its hash rebuilt by
// the KeyBuilder, counts its children and its children in other tiers
// exactly, holds one block of every full group (equal reference counts
// across them) marked as its own, and is named by exactly its holders;
// every block the pools mark as a node's sits in that node's slot; scope
// references are exactly the sequences' plus the nodes'.
#include <string>
#include <vector>

#include "base/error.h"
#include "core/key_builder.h"
#include "core/prefix_index.h"

namespace kvc {

namespace {

[[noreturn]] void broken(const std::string& what) {
  fail(KVC_ERR_INTERNAL, "cache invariant broken: " + what);
}

}  // namespace

void PrefixIndex::check(const std::vector<uint32_t>& holders,
                        std::vector<uint64_t> scope_refs) const {
  const uint32_t G = layout_.num_groups();
  const uint32_t T = layout_.T;
  scope_refs.resize(scopes_.id_bound(), 0);
  uint32_t live = 0;
  std::vector<uint32_t> children(tree_.id_bound(), 0), tier_children(tree_.id_bound(), 0);
  for (uint32_t n = 1; n < tree_.id_bound(); ++n) {
    const TreeNode& t = tree_.node(n);
    if (!t.live) continue;
    ++live;
    const std::string who = "tree node " + std::to_string(n);
    if (t.parent >= tree_.id_bound() || !tree_.node(t.parent).live) broken(who + " has a dead parent");
    if (t.parent != RadixTree::kRoot && tree_.node(t.parent).num_tokens != T)
      broken(who + " hangs under a partial block");
    ++children[t.parent];
    if (t.tier != kPrimaryTier) ++tier_children[t.parent];
    if (!scopes_.live(t.scope)) broken(who + " refers to a dead scope");
    ++scope_refs[t.scope];
    if (tree_.holders(n) != holders[n])
      broken(who + " has " + std::to_string(tree_.holders(n)) + " holders but " +
             std::to_string(holders[n]) + " sequences name it");
    const BlockKey key =
        keys(t.scope).key(t.parent, tree_.node(t.parent).hash, tree_.tokens(n), t.num_tokens, t.extra);
    if (key.hash != t.hash) broken(who + " has a stale hash");
    if (tree_.find(key) != n) broken(who + " is not found by its own key");
    if (t.tier != kPrimaryTier) continue;  // its tier checks its blocks
    uint32_t ref0 = 0;
    bool first_anchor = true, any_block = false;
    for (uint32_t g = 0; g < G; ++g) {
      const uint32_t id = tree_.block(n, g);
      const BlockPool& pool = residency_.pool_of(g);
      if (id == kNoBlock) {
        if (!layout_.is_windowed(g)) broken(who + " lacks its block of full group " + std::to_string(g));
        continue;
      }
      any_block = true;
      if (id >= pool.id_bound() || !pool.owns(id) || pool.info(id).node != n)
        broken(who + " holds a block not marked as its own");
      if (layout_.is_windowed(g)) continue;
      if (first_anchor) ref0 = pool.info(id).ref, first_anchor = false;
      else if (pool.info(id).ref != ref0) broken(who + " has unequal ref counts across groups");
    }
    if (layout_.anchors.empty() && !any_block && t.num_children == 0 && tree_.holders(n) == 0)
      broken(who + " is unused but kept");
  }
  if (live != tree_.size()) broken("tree size differs from its live nodes");
  tree_.check_tables();
  for (uint32_t n = 0; n < tree_.id_bound(); ++n) {
    if (!tree_.node(n).live) continue;
    if (children[n] != tree_.node(n).num_children)
      broken("tree node " + std::to_string(n) + " has a wrong child count");
    if (tier_children[n] != tier_children_[n])
      broken("tree node " + std::to_string(n) + " counts " + std::to_string(tier_children_[n]) +
             " children in other tiers but has " + std::to_string(tier_children[n]));
  }

  // The pools' side: a block marked as a node's sits in that live primary
  // node's slot of its group.
  for (size_t p = 0; p < residency_.num_pools(); ++p) {
    const BlockPool& pool = residency_.pool(p);
    for (uint32_t id = 0; id < pool.id_bound(); ++id) {
      const BlockInfo& b = pool.info(id);
      if (!pool.owns(id) || b.node == kNoNode) continue;
      const std::string blk = "block " + std::to_string(id) + " of pool " + std::to_string(p);
      if (b.node >= tree_.id_bound() || !tree_.node(b.node).live)
        broken(blk + " points to dead tree node " + std::to_string(b.node));
      if (tree_.node(b.node).tier != kPrimaryTier)
        broken(blk + " points to tree node " + std::to_string(b.node) +
               ", which lives in another tier");
      bool held = false;
      for (uint32_t g = 0; g < G; ++g)
        held = held || (layout_.group_pool[g] == p && tree_.block(b.node, g) == id);
      if (!held) broken(blk + " is not held by its tree node");
    }
  }

  // Scopes: references are exactly sequences plus tree nodes.
  for (uint32_t id = 0; id < scopes_.id_bound(); ++id) {
    const uint64_t have = scopes_.live(id) ? scopes_.refs(id) : 0;
    if (have != scope_refs[id])
      broken("scope " + std::to_string(id) + " has " + std::to_string(have) + " references but " +
             std::to_string(scope_refs[id]) + " owners");
  }
}

}  // namespace kvc
