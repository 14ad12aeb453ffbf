#include "cuda/decode_split.h"

#include <algorithm>
#include <atomic>

namespace kvc {

namespace {

uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// Splits a sequence of `tokens` may get for its length alone.
uint64_t splits_by_length(const DecodeShape& s, uint64_t tokens) {
  return std::max<uint64_t>(1, tokens / std::max<uint64_t>(s.min_split_tokens, 1));
}

std::atomic<uint32_t> g_split_override{0};

uint64_t base_ctas(const DecodeShape& s) { return s.batch * s.kv_heads * s.head_chunks; }

// Cut no further than about four waves of thread blocks in all.
uint64_t splits_by_occupancy(const DecodeShape& s) {
  return std::max<uint64_t>(1, ceil_div(4 * s.wave, base_ctas(s)));
}

}  // namespace

DecodeSplit plan_decode_split(const DecodeShape& s) {
  DecodeSplit out;
  const uint64_t tokens = std::max<uint64_t>(s.max_tokens, 1);
  uint64_t most = std::min(splits_by_length(s, tokens), splits_by_occupancy(s));
  if (base_ctas(s) * kMergeRoundSplits * 2 >= s.wave) most = std::min(most, kMergeRoundSplits);
  // Estimated time: waves of thread blocks times the tokens each one reads,
  // plus a fixed cost per block (start-up, writing and merging partials).
  const uint64_t base = base_ctas(s);
  constexpr uint64_t kBlockOverheadTokens = 64;
  uint64_t best = 1, best_cost = UINT64_MAX;
  if (const uint32_t forced = g_split_override.load(std::memory_order_relaxed); forced != 0) {
    best = std::min<uint64_t>(forced, most);
    best_cost = 0;
  }
  for (uint64_t n = 1; n <= most && best_cost != 0; ++n) {
    const uint64_t cost = ceil_div(base * n, s.wave) * (ceil_div(tokens, n) + kBlockOverheadTokens);
    if (cost < best_cost) {
      best_cost = cost;
      best = n;
    }
  }
  const uint64_t per = ceil_div(ceil_div(tokens, best), s.tile) * s.tile;
  out.split_tokens = uint32_t(per);
  out.num_splits = uint32_t(ceil_div(tokens, per));
  return out;
}

void set_decode_split_override(uint32_t splits) {
  g_split_override.store(splits, std::memory_order_relaxed);
}

uint64_t decode_workspace_bound(const DecodeShape& s) {
  // A plan with 2+ splits has base < 4 waves and base * splits < 8 waves of
  // blocks; each block leaves heads_per_cta partial rows.
  const uint64_t by_length = s.batch * s.q_heads * splits_by_length(s, std::max<uint64_t>(s.max_tokens, 1));
  const uint64_t by_occupancy = 8 * s.wave * s.heads_per_cta;
  const uint64_t rows = std::min(by_length, by_occupancy);
  return rows * (uint64_t(s.head_dim) * sizeof(float) + 2 * sizeof(float));
}

}  // namespace kvc
