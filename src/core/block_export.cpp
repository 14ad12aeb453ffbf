// Export holds: a sequence's published blocks held for a transfer to
// another cache (kvc_cache_export_sequence). A hold is a pin under its own
// key: it holds the tree nodes' blocks, root first, so the chain outlives
// the sequence, eviction and reset_reuse until release_hold.
#include <string>

#include "core/sequences.h"

namespace kvc {

void Sequences::hold_published(uint64_t id, uint64_t num_tokens, ExportHold& out) {
  // Plan: checks, then the record (every allocation) before the holds.
  const Sequence& s = sequence(id);
  if (!cfg_.resources.empty())
    fail(KVC_ERR_UNSUPPORTED,
         "block export from a cache with state resources (" + std::to_string(cfg_.resources.size()) +
             ") is not supported: state snapshots do not travel with the blocks");
  if (!cfg_.block_reuse)
    fail(KVC_ERR_UNSUPPORTED,
         "block reuse is off for this cache: an export names blocks of the prefix tree "
         "(kvc_config_set_block_reuse(config, true))");
  const uint64_t full = s.committed / T_;
  if (num_tokens == 0) num_tokens = full * T_;
  if (num_tokens % T_ != 0)
    invalid_argument("num_tokens (" + std::to_string(num_tokens) +
                     ") must be a multiple of tokens_per_block (" + std::to_string(T_) + ")");
  if (num_tokens > full * T_)
    invalid_argument("num_tokens (" + std::to_string(num_tokens) + ") exceeds the " +
                     std::to_string(full * T_) + " tokens of committed full blocks of " + name(id) +
                     " (" + std::to_string(s.committed) + " tokens committed)");
  const uint64_t n = num_tokens / T_;
  if (n == 0)
    invalid_argument(name(id) + " has no committed full block to export (" +
                     std::to_string(s.committed) + " tokens committed, " + std::to_string(T_) +
                     " per block)");
  if (n > s.published)
    fail(KVC_ERR_INVALID_STATE,
         "block " + std::to_string(s.published) + " of " + name(id) +
             " is committed but not yet published (a fork sibling shares it, or the prefix tree "
             "is full); export at most " +
             std::to_string(s.published * T_) + " tokens");
  const uint32_t G = layout_.num_groups();
  for (uint64_t b = 0; b < n; ++b)
    for (uint32_t g = 0; g < G; ++g)
      if (tree_.block(s.nodes[b], g) == kNoBlock)
        fail(KVC_ERR_UNSUPPORTED,
             "layer group " + std::to_string(g) + " no longer has block " + std::to_string(b) +
                 " of " + name(id) +
                 " (it left the attention window and was evicted); export only blocks every "
                 "group still holds");
  Pin hold;
  hold.blocks.reserve(n * G);
  hold.retention.reserve(n);
  out.tokens.resize(n * T_);
  for (uint64_t b = 0; b < n; ++b) {
    for (uint32_t g = 0; g < G; ++g) hold.blocks.push_back(tree_.block(s.nodes[b], g));
    hold.retention.push_back(s.retention_of_block(b, T_));
    const int32_t* t = tree_.tokens(s.nodes[b]);
    std::copy(t, t + T_, out.tokens.begin() + b * T_);
  }
  out.blocks = hold.blocks;
  out.scope_bytes = index_.scope_bytes(s.scope);
  out.extras = s.extra_keys;
  out.num_blocks = n;
  out.key = ++next_hold_;
  holds_.emplace(out.key, std::move(hold));
  // Apply.
  for (uint64_t b = 0; b < n; ++b) eviction_.hold_node(s.nodes[b]);
}

void Sequences::release_hold(uint64_t key) {
  auto it = holds_.find(key);
  if (it == holds_.end())
    fail(KVC_ERR_NOT_FOUND, "export hold " + std::to_string(key) + " is not held");
  const Pin& p = it->second;
  const uint32_t G = layout_.num_groups();
  for (size_t e = p.retention.size(); e > 0; --e)
    eviction_.release_set(&p.blocks[(e - 1) * G], 1, p.retention[e - 1]);
  holds_.erase(it);
}

}  // namespace kvc
