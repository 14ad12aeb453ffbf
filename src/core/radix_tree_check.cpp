// The radix tree's part of the invariant checker (PrefixIndex::check calls
// it): a node's chain child is a live child of it (never of the root), and
// exactly the chain children are out of the tables (radix_tree.h); the two
// tables hold exactly the other live nodes, each once, under the tag of its
// own hash or first-token key, reachable from its home slot without
// crossing an empty one; the first-token walk finds every
// live node exactly once; the free stack holds every dead id once, at the
// index free_at_ records.
#include <string>
#include <vector>

#include "base/error.h"
#include "core/radix_tree.h"

namespace kvc {

namespace {

[[noreturn]] void broken(const std::string& what) {
  fail(KVC_ERR_INTERNAL, "cache invariant broken: " + what);
}

}  // namespace

void RadixTree::check_tables() const {
  const uint32_t bound = id_bound();
  uint64_t tabled_live = 0;
  for (uint32_t n = 1; n < bound; ++n) {
    const TreeNode& t = nodes_[n];
    if (!t.live) continue;
    const std::string who = "tree node " + std::to_string(n);
    const bool chain_child = nodes_[t.parent].chain_child == n;
    if (t.in_tables == chain_child)
      broken(who + (chain_child ? " is its parent's chain child but in the tables"
                                : " is in no table but not its parent's chain child"));
    if (t.in_tables) ++tabled_live;
    if (t.chain_child != kNoNode &&
        (t.chain_child >= bound || !nodes_[t.chain_child].live ||
         nodes_[t.chain_child].parent != n))
      broken(who + " names chain child " + std::to_string(t.chain_child) +
             ", not a live child of it");
    uint32_t seen = 0;
    for_each_first_token_match(t.parent, t.scope, tokens(n)[0], [&](uint32_t m) { seen += m == n; });
    if (seen != 1) broken(who + " is found " + std::to_string(seen) + " times by its first token");
  }
  if (nodes_[kRoot].chain_child != kNoNode) broken("the root has a chain child");
  auto check_table = [&](const BigArray<uint64_t>& table, const char* name, bool first) {
    std::vector<uint8_t> in(bound, 0);
    uint64_t entries = 0;
    for (uint64_t i = 0; i <= table_mask_; ++i) {
      const uint64_t e = table[i];
      if (e == kEmpty) continue;
      ++entries;
      const uint32_t n = uint32_t(e);
      const std::string who = std::string(name) + " slot " + std::to_string(i) + " (node " +
                              std::to_string(n) + ")";
      if (n == kRoot || n >= bound || !nodes_[n].live) broken(who + " names no live node");
      const TreeNode& t = nodes_[n];
      if (!t.in_tables) broken(who + " names a chain child");
      if (in[n]++) broken(who + " names it twice");
      const uint32_t tag = first ? first_tag_of(t.parent, t.scope, tokens(n)[0]) : tag_of(t.hash);
      if (uint32_t(e >> 32) != tag) broken(who + " has a wrong tag");
      for (uint64_t j = home(tag); j != i; j = next_slot(j))
        if (table[j] == kEmpty) broken(who + " is cut off from its home slot");
    }
    if (entries != tabled_live)
      broken(std::string(name) + " has " + std::to_string(entries) + " entries for " +
             std::to_string(tabled_live) + " tabled nodes");
  };
  check_table(buckets_, "bucket table", false);
  check_table(first_buckets_, "first-token table", true);
  // The free stack: every dead id once, at the index free_at_ says.
  if (free_.size() + size_ != max_nodes())
    broken("the free node ids (" + std::to_string(free_.size()) + ") and the live nodes (" +
           std::to_string(size_) + ") do not add up to " + std::to_string(max_nodes()));
  for (size_t i = 0; i < free_.size(); ++i) {
    const uint32_t n = free_[i];
    if (n == kRoot || n >= bound || nodes_[n].live)
      broken("free node id " + std::to_string(n) + " is not a dead node");
    if (free_at_[n] != i)
      broken("free node id " + std::to_string(n) + " is at " + std::to_string(i) +
             " of the stack but recorded at " + std::to_string(free_at_[n]));
  }
}

}  // namespace kvc
