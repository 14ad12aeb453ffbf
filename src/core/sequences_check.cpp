// The sequences' part of the invariant checker: each sequence's block lists,
// window starts, counts and published nodes are consistent; and what every
// sequence, its anchors and every pin hold is counted into Holdings, which
// the pools (owners per block), the prefix index (holders, scope
// references) check against.
#include <algorithm>
#include <string>
#include <vector>

#include "base/error.h"
#include "core/sequences.h"

namespace kvc {

namespace {

[[noreturn]] void broken(const std::string& what) {
  fail(KVC_ERR_INTERNAL, "cache invariant broken: " + what);
}

std::string blk(size_t pool, uint32_t id) {
  return "block " + std::to_string(id) + " of pool " + std::to_string(pool);
}

}  // namespace

void Sequences::count_holdings(Holdings& h) const {
  const uint32_t G = layout_.num_groups();
  std::vector<std::vector<uint32_t>>& expected = h.refs;
  std::vector<std::vector<uint32_t>>& group_of = h.group_of;
  auto own = [&](uint32_t g, uint32_t id, const std::string& owner) {
    const uint32_t p = layout_.group_pool[g];
    if (id >= residency_.pool(p).id_bound() || !residency_.pool(p).owns(id))
      broken(owner + " holds out-of-range " + blk(p, id));
    if (group_of[p][id] != UINT32_MAX && group_of[p][id] != g)
      broken(blk(p, id) + " serves layer groups " + std::to_string(group_of[p][id]) + " and " +
             std::to_string(g));
    group_of[p][id] = g;
    ++expected[p][id];
  };
  std::vector<uint32_t>& holders = h.holders;
  std::vector<uint64_t>& scope_refs = h.scope_refs;
  seqs_.for_each([&](const Sequence& s) {
    const std::string who = "sequence " + std::to_string(s.id);
    if (s.blocks.size() != G) broken(who + " has a block list per group count mismatch");
    const uint64_t nb = (s.length() + T_ - 1) / T_;
    if (s.nodes.size() != nb) broken(who + " has " + std::to_string(s.nodes.size()) +
                                     " blocks for " + std::to_string(s.length()) + " tokens");
    for (uint32_t g = 0; g < G; ++g)
      if (s.blocks[g].size() != nb) broken(who + " has unequal block lists across groups");
    if (s.window_begin.size() != G) broken(who + " has a window start per group count mismatch");
    for (uint32_t g = 0; g < G; ++g) {
      const uint64_t begin = s.window_begin[g];
      if (!layout_.is_windowed(g) && begin != 0) broken(who + " released blocks of full group " + std::to_string(g));
      if (begin > nb || begin > std::max(layout_.first_needed(g, s.committed), layout_.first_needed(g, s.cached)))
        broken(who + " released blocks of group " + std::to_string(g) + " still in its window");
      if (layout_.is_windowed(g) && std::min<uint64_t>(layout_.first_needed(g, s.committed), nb) > begin)
        broken(who + " holds blocks of group " + std::to_string(g) + " that left its window");
      for (uint64_t b = 0; b < nb; ++b)
        if ((s.blocks[g][b] == kNoBlock) != (b < begin))
          broken(who + " block " + std::to_string(b) + " of group " + std::to_string(g) +
                 (b < begin ? " is held before its window start" : " is missing"));
    }
    if (s.committed > s.length() || s.cached > s.length())
      broken(who + " has committed/cached tokens beyond its length");
    for (uint64_t c : s.slot_cursor)
      if (c > s.length()) broken(who + " has a slot cursor beyond its length");
    if (!index_.scopes().live(s.scope)) broken(who + " refers to a dead scope");
    ++scope_refs[s.scope];
    if (s.tail_private && s.length() % T_ != 0 && nb > 0) {
      const BlockInfo& tail = residency_.info(0, s.blocks[0][nb - 1]);
      if (tail.ref != 1 || tail.node != kNoNode)
        broken(who + " marks a shared or published tail as private");
    }
    if (s.published > nb) broken(who + " has more published blocks than blocks");
    if (s.token_base % T_ != 0 || s.token_base > s.published * T_)
      broken(who + " dropped tokens of blocks the tree does not keep");
    for (uint64_t b = 0; b < nb; ++b) {
      for (uint32_t g = 0; g < G; ++g)
        if (s.blocks[g][b] != kNoBlock) own(g, s.blocks[g][b], who);
      const uint32_t n = s.nodes[b];
      if ((n != kNoNode) != (b < s.published))
        broken(who + " block " + std::to_string(b) + " is " + (n == kNoNode ? "not " : "") +
               "published against its published count " + std::to_string(s.published));
      if (n == kNoNode) continue;
      if (n >= tree_.id_bound() || !tree_.node(n).live)
        broken(who + " refers to dead tree node " + std::to_string(n));
      const TreeNode& t = tree_.node(n);
      if (t.num_tokens != T_) broken(who + " publishes a partial node at block " + std::to_string(b));
      const uint32_t want_parent = b == 0 ? RadixTree::kRoot : s.nodes[b - 1];
      if (t.parent != want_parent) broken(who + " block " + std::to_string(b) + " node has the wrong parent");
      if (holds_anchor(s, b)) {
        if (layout_.anchors.empty()) ++holders[n];
        else
          for (uint32_t g : layout_.anchors) own(g, tree_.block(n, g), who + " (anchor)");
      }
    }
  });
  for (const auto& kv : pins_) {
    const Pin& pin = kv.second;
    for (size_t e = 0; e < pin.retention.size(); ++e)
      for (uint32_t g = 0; g < G; ++g)
        if (pin.blocks[e * G + g] != kNoBlock)
          own(g, pin.blocks[e * G + g], "pin of sequence " + std::to_string(kv.first));
  }
  for (const auto& kv : holds_) {
    const Pin& hold = kv.second;
    for (size_t e = 0; e < hold.retention.size(); ++e)
      for (uint32_t g = 0; g < G; ++g)
        if (hold.blocks[e * G + g] != kNoBlock)
          own(g, hold.blocks[e * G + g], "export hold " + std::to_string(kv.first));
  }

}

}  // namespace kvc
