#include "core/prefix_index.h"

#include <algorithm>

#include "base/error.h"
#include "core/key_builder.h"

namespace kvc {

void PrefixIndex::stamped_node_changed(uint32_t node, const char* what) const {
  fail(KVC_ERR_INTERNAL, "cache invariant broken: tree node " + std::to_string(node) +
                             " is " + what + " while stamped with write job " +
                             std::to_string((*stamps_)[node]) +
                             " (StoreChain::leaving() must come first: the record writer may "
                             "still read its record and blocks)");
}

PrefixIndex::PrefixIndex(const CacheConfig& config, const GroupLayout& layout,
                         const Residency& residency, uint32_t max_nodes, bool track_children)
    : cfg_(config),
      layout_(layout),
      residency_(residency),
      tree_(max_nodes, config.tokens_per_block, layout.num_groups(), track_children),
      tier_children_(tree_.id_bound(), 0),
      last_missing_(layout.windowed.size()) {}

KeyBuilder PrefixIndex::keys(uint32_t scope) const {
  return KeyBuilder(scope, scopes_.digest(scope), layout_.T);
}

BlockKey PrefixIndex::key(uint32_t parent, uint32_t scope, const int32_t* tokens,
                          uint32_t num_tokens, const std::string& extra) const {
  return keys(scope).key(parent, tree_.node(parent).hash, tokens, num_tokens, extra);
}

uint32_t PrefixIndex::find(const BlockKey& key) const { return tree_.find(key); }

uint32_t PrefixIndex::insert(const BlockKey& key, const uint32_t* blocks) {
  const uint32_t node = tree_.insert(key, blocks);
  scopes_.ref(key.scope);
  return node;
}

uint32_t PrefixIndex::windowed_node_ref(uint32_t node) const {
  uint32_t ref = tree_.holders(node);
  for (uint32_t g = 0; g < layout_.num_groups(); ++g) {
    const uint32_t b = tree_.block(node, g);
    if (b != kNoBlock) ref += residency_.info(g, b).ref;
  }
  return ref;
}

void PrefixIndex::match(const int32_t* tokens, uint64_t n, uint32_t scope,
                        const std::vector<ExtraKey>& extras, PrefixMatch& m) const {
  const uint32_t T = layout_.T;
  m.full.clear();
  m.partial = kNoNode;
  m.partial_tokens = 0;
  m.in_place = false;
  if (!cfg_.block_reuse || scope == ScopeTable::kNone || n < 2) return;
  const uint64_t limit = n - 1;  // the last prompt token is always recomputed
  const KeyBuilder keys = this->keys(scope);
  uint32_t parent = RadixTree::kRoot;
  uint64_t parent_hash = 0;
  const uint64_t max_full = limit / T;
  if (extras.empty()) {
    // Hashing, table slots and nodes pipelined over the blocks.
    tree_.match_full_blocks(parent, parent_hash, keys, tokens, max_full, m.full);
    if (!m.full.empty()) parent = m.full.back();
  } else {
    for (uint64_t b = 0; b < max_full; ++b) {
      encode_block_extras(extras, b * T, (b + 1) * T, extra_scratch_);
      const BlockKey key = keys.key(parent, parent_hash, tokens + b * T, T, extra_scratch_);
      const uint32_t node = tree_.find(key);
      if (node == kNoNode) break;
      m.full.push_back(node);
      parent = node;
      parent_hash = key.hash;
    }
  }
  if (!layout_.windowed.empty() || gate_ != nullptr) {
    const size_t full = m.full.size();
    trim_to_windows(m);
    if (gate_ != nullptr) return;  // state resources: no partial block (no snapshot there)
    if (m.full.size() != full) return;  // the partial block would follow a gap
  }
  if (!cfg_.partial_reuse) return;
  const uint64_t begin = uint64_t(m.full.size()) * T;
  if (begin >= limit) return;
  const uint32_t room = uint32_t(std::min<uint64_t>(T, limit - begin));
  if (any_extra_overlaps(extras, begin, begin + room)) return;
  const int32_t* want = tokens + begin;
  tree_.for_each_first_token_match(parent, scope, want[0], [&](uint32_t node) {
    const TreeNode& t = tree_.node(node);
    if (!t.extra.empty()) return;
    for (uint32_t g : layout_.windowed)  // the block is copied or taken whole
      if (tree_.block(node, g) == kNoBlock) return;
    const bool usable = cfg_.copy_on_partial_reuse || (node_ref(node) == 0 && tree_.is_leaf(node));
    if (!usable) return;
    const int32_t* have = tree_.tokens(node);
    const uint32_t most = std::min<uint32_t>(room, t.num_tokens);
    uint32_t k = 0;
    while (k < most && have[k] == want[k]) ++k;
    if (k > m.partial_tokens) {
      m.partial = node;
      m.partial_tokens = k;
    }
  });
  m.in_place = m.partial != kNoNode && !cfg_.copy_on_partial_reuse;
}

void PrefixIndex::trim_to_windows(PrefixMatch& m) const {
  // (And, with state snapshots, to the deepest node that has one.)
  // last_missing[w]: the last position before k whose slot windowed group
  // w lacks. Reusing k blocks needs none missing from first_needed(k*T) on.
  std::vector<int64_t>& last_missing = last_missing_;
  const std::vector<uint32_t>& windowed = layout_.windowed;
  for (size_t w = 0; w < windowed.size(); ++w) last_missing[w] = -1;
  size_t best = 0;
  for (size_t k = 1; k <= m.full.size(); ++k) {
    bool ok = true;
    for (size_t w = 0; w < windowed.size(); ++w) {
      const uint32_t g = windowed[w];
      if (tree_.block(m.full[k - 1], g) == kNoBlock) last_missing[w] = int64_t(k - 1);
      ok = ok && last_missing[w] < int64_t(layout_.first_needed(g, k * layout_.T));
    }
    // With state resources the reuse ends where a state snapshot exists.
    if (gate_ != nullptr) ok = ok && gate_->has(m.full[k - 1]);
    if (ok) best = k;
  }
  m.full.resize(best);
}

}  // namespace kvc
