// The radix tree's part of the invariant checker (PrefixIndex::check calls
// it): the two tables hold exactly the live tabled nodes (all but chain
// successors, radix_tree.h), each once, under the tag of its own hash or
// first-token key, reachable from its home slot without crossing an empty
// one; a chain successor is in neither; the first-token walk finds every
// live node exactly once; the free id bits are set for the dead ids alone.
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
    if (tier(n) != t.tier)
      broken("tree node " + std::to_string(n) + "'s record names tier " + std::to_string(tier(n)) +
             ", its node " + std::to_string(t.tier));
    if (tabled(n, t.parent)) {
      ++tabled_live;
      if (t.first_tag != first_tag_of(t.parent, t.scope, tokens(n)[0]))
        broken("tree node " + std::to_string(n) + " has a stale first-token tag");
    }
    uint32_t seen = 0;
    for_each_first_token_match(t.parent, t.scope, tokens(n)[0], [&](uint32_t m) { seen += m == n; });
    if (seen != 1)
      broken("tree node " + std::to_string(n) + " is found " + std::to_string(seen) +
             " times by its first token");
  }
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
      if (!tabled(n, t.parent)) broken(who + " names a chain successor");
      if (in[n]++) broken(who + " names it twice");
      const uint32_t tag = first ? t.first_tag : tag_of(t.hash);
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
  // The free ids: a set bit for each dead id and for no other (nor the
  // root, nor the padding past the last id); a word bit for each word with
  // a free id.
  if (size_ > max_nodes())
    broken("the tree holds " + std::to_string(size_) + " nodes, past its " +
           std::to_string(max_nodes()));
  uint64_t set = 0;
  for (uint64_t w = 0; w < free_bits_.size(); ++w) {
    for (uint64_t b = 0; b < 64; ++b) {
      if (!((free_bits_[w] >> b) & 1)) continue;
      const uint64_t n = w * 64 + b;
      if (n == kRoot || n >= bound || nodes_[n].live)
        broken("free node id " + std::to_string(n) + " is not a dead node");
      ++set;
    }
    const bool has = (free_words_[w >> 6] >> (w & 63)) & 1;
    if (has != (free_bits_[w] != 0))
      broken("the word bit of free id word " + std::to_string(w) + " is " +
             (has ? "set" : "clear") + " for a word " + (has ? "without" : "with") + " free ids");
  }
  for (uint64_t w = free_bits_.size(); w < free_words_.size() * 64; ++w)
    if ((free_words_[w >> 6] >> (w & 63)) & 1)
      broken("the word bit of free id word " + std::to_string(w) + " is set past the last word");
  if (set + size_ + 1 != bound)
    broken(std::to_string(set) + " free id bits are set for " + std::to_string(bound - 1 - size_) +
           " free ids");
  for (uint32_t n = 1; n < bound; ++n)
    if (!nodes_[n].live && !is_free(n)) broken("dead node " + std::to_string(n) + " is not free");
}

}  // namespace kvc
