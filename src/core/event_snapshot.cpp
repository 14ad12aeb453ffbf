// The events' view of the tree: the snapshot a consumer resynchronizes
// from, and the checker's part for the event log.
#include <string>
#include <vector>

#include "base/error.h"
#include "core/event_log.h"
#include "core/prefix_index.h"

namespace kvc {

namespace {

[[noreturn]] void broken(const std::string& what) {
  fail(KVC_ERR_INTERNAL, "cache invariant broken: " + what);
}

}  // namespace

void EventLog::snapshot(const PrefixIndex& index, std::vector<kvc_snapshot_entry_t>& out) const {
  const RadixTree& tree = index.tree();
  out.clear();
  // Parents first: depth of every live node (node ids are reused, so an id
  // says nothing of the order), then the nodes by depth.
  std::vector<uint32_t> depth(tree.id_bound(), 0), by_depth;
  std::vector<uint32_t> count;
  std::vector<uint32_t> path;
  for (uint32_t n = 1; n < tree.id_bound(); ++n) {
    if (!tree.node(n).live || depth[n] != 0) continue;
    // Climb to a node whose depth is known (the root: 0), then number the path.
    path.clear();
    uint32_t m = n;
    for (; m != RadixTree::kRoot && depth[m] == 0; m = tree.node(m).parent) path.push_back(m);
    uint32_t d = m == RadixTree::kRoot ? 0 : depth[m];
    for (size_t i = path.size(); i-- > 0;) depth[path[i]] = ++d;
  }
  for (uint32_t n = 1; n < tree.id_bound(); ++n) {
    if (!tree.node(n).live) continue;
    if (depth[n] >= count.size()) count.resize(depth[n] + 1, 0);
    ++count[depth[n]];
  }
  std::vector<uint32_t> start(count.size() + 1, 0);
  for (size_t d = 0; d < count.size(); ++d) start[d + 1] = start[d] + count[d];
  by_depth.resize(start.back());
  for (uint32_t n = 1; n < tree.id_bound(); ++n)
    if (tree.node(n).live) by_depth[start[depth[n]]++] = n;
  for (uint32_t n : by_depth) {
    const uint64_t groups = index.group_mask(n);
    if (groups == 0) continue;  // a node without blocks is not a cached block
    const TreeNode& t = tree.node(n);
    kvc_snapshot_entry_t e{};
    e.hash = hashes_[n];
    e.parent_hash = hashes_[t.parent];
    e.groups = groups;
    uint64_t lora = 0;
    e.has_lora = scope_lora(index.scope_bytes(t.scope), &lora) ? 1 : 0;
    e.lora_id = e.has_lora ? lora : 0;
    e.tier = t.tier;
    e.priority = t.priority;
    e.num_tokens = t.num_tokens;
    out.push_back(e);
  }
}

void EventLog::check(const PrefixIndex& index) const {
  if (size_ > ring_.size()) broken("event ring overfull");
  uint64_t tokens = 0;
  for (size_t i = 0; i < size_; ++i) {
    const Record& e = ring_[(head_ + i) % ring_.size()];
    if (carries_tokens(e)) tokens += e.num_tokens;
  }
  if (tokens != token_count_)
    broken("the event ring's token count is stale");
  if (lost_count_ != 0 && size_ != 0 && lost_first_ + lost_count_ != id_at(0))
    broken("lost events are not just before the oldest kept");
  const RadixTree& tree = index.tree();
  if (hashes_[RadixTree::kRoot] != 0) broken("the root has a portable hash");
  for (uint32_t n = 1; n < tree.id_bound(); ++n) {
    const TreeNode& t = tree.node(n);
    if (!t.live) continue;
    const std::string& scope = index.scope_bytes(t.scope);
    const uint64_t h = hasher_.block(hashes_[t.parent], hasher_.scope_digest(scope),
                                     hasher_.extra_digest(t.extra), tree.tokens(n), t.num_tokens);
    if (h != hashes_[n]) broken("tree node " + std::to_string(n) + " has a stale portable hash");
  }
}

}  // namespace kvc
