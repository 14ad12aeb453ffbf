#include "core/sequences.h"

#include <algorithm>
#include <string>

namespace kvc {

Sequences::Sequences(const CacheConfig& config, const GroupLayout& layout, PrefixIndex& index,
                     Residency& residency, Eviction& eviction, Tier& tier,
                     CacheCounters& counters)
    : cfg_(config),
      layout_(layout),
      T_(config.tokens_per_block),
      index_(index),
      tree_(index.tree()),
      residency_(residency),
      eviction_(eviction),
      tier_(tier),
      counters_(counters) {
  spares_.reserve(kSpares);  // recycle() never allocates: remove cannot fail
  const uint32_t G = layout.num_groups();
  add_plan_.window_begin.resize(G);
  new_set_.resize(G);
  old_set_.resize(G);
  position_.resize(G);
}

// ---------------------------------------------------------------------------
// Lookups
// ---------------------------------------------------------------------------

std::string Sequences::name(uint64_t id) { return "sequence " + std::to_string(id); }

const Sequence& Sequences::sequence(uint64_t id) const {
  const Sequence* s = seqs_.find(id);
  if (s == nullptr) fail(KVC_ERR_NOT_FOUND, "no " + name(id) + " in this cache");
  return *s;
}

Sequence& Sequences::sequence(uint64_t id) {
  Sequence* s = seqs_.find(id);
  if (s == nullptr) fail(KVC_ERR_NOT_FOUND, "no " + name(id) + " in this cache");
  return *s;
}

Sequence& Sequences::sequence_for_batch(const uint64_t* ids, size_t i, uint64_t epoch) {
  return claim_for_batch(seqs_.find(ids[i]), ids, i, epoch);
}

Sequence& Sequences::claim_for_batch(Sequence* s, const uint64_t* ids, size_t i, uint64_t epoch) {
  if (s == nullptr)
    fail(KVC_ERR_NOT_FOUND, "ids[" + std::to_string(i) + "]: no " + name(ids[i]) +
                                " in this cache");
  if (s->batch_mark == epoch)
    invalid_argument("ids[" + std::to_string(i) + "] = " + std::to_string(ids[i]) +
                     " appears twice in the batch");
  s->batch_mark = epoch;
  return *s;
}

// ---------------------------------------------------------------------------
// Argument checks
// ---------------------------------------------------------------------------

namespace {

void check_priority(uint32_t v, const char* what) {
  if (v > kMaxPriority)
    invalid_argument(std::string(what) + " must be in 0..100, got " + std::to_string(v));
}

}  // namespace

void Sequences::check_options(const SequenceOptions& o) {
  check_priority(o.prompt_priority, "options->prompt_priority");
  check_priority(o.decode_priority, "options->decode_priority");
  check_retention_ranges(o.retention_ranges);
  for (size_t i = 0; i < o.extra_keys.size(); ++i) {
    const ExtraKey& k = o.extra_keys[i];
    if (k.length == 0)
      invalid_argument("options->extra_keys[" + std::to_string(i) + "].length must be > 0, got 0");
    if (k.offset > kMaxSequenceTokens || k.length > kMaxSequenceTokens)
      invalid_argument("options->extra_keys[" + std::to_string(i) + "] covers tokens " +
                       std::to_string(k.offset) + "+" + std::to_string(k.length) +
                       ", beyond the longest sequence (" + std::to_string(kMaxSequenceTokens) +
                       " tokens)");
  }
}

void Sequences::check_length(uint64_t n, const char* what) {
  if (n > kMaxSequenceTokens)
    invalid_argument(std::string(what) + " would make the sequence " + std::to_string(n) +
                     " tokens long; the limit is " + std::to_string(kMaxSequenceTokens));
}

void Sequences::check_growth(uint64_t length, uint64_t n, const char* what) {
  if (n > kMaxSequenceTokens - length)
    invalid_argument(std::string(what) + " = " + std::to_string(n) + " on a sequence of " +
                     std::to_string(length) + " tokens would pass the limit of " +
                     std::to_string(kMaxSequenceTokens) + " tokens");
}

// ---------------------------------------------------------------------------
// Positions of a sequence
// ---------------------------------------------------------------------------

bool Sequences::holds_anchor(const Sequence& s, uint64_t b) const {
  const uint32_t n = s.nodes[b];
  if (n == kNoNode) return false;
  if (layout_.anchors.empty()) return true;  // names the node: a holder
  return tree_.block(n, layout_.ref_group) != s.blocks[layout_.ref_group][b];
}


}  // namespace kvc
