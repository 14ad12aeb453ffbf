#include "cuda/prefill_plan.h"

#include <algorithm>
#include <cstdint>

namespace kvc {

namespace {

uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

uint64_t splits_by_length(uint64_t tokens) {
  return std::max<uint64_t>(1, tokens / kPrefillMinSplitTokens);
}

}  // namespace

PrefillSplit plan_prefill_split(uint64_t base_ctas, uint64_t wave, uint64_t max_range) {
  PrefillSplit out;
  // A launch that fills the GPU once already is not cut: cutting would only
  // add partial rows to write and merge.
  if (base_ctas == 0 || base_ctas >= wave) return out;
  // At most about two waves of thread blocks, none shorter than the minimum.
  const uint64_t most =
      std::min(ceil_div(2 * wave, base_ctas), splits_by_length(max_range));
  // Estimated time: waves of thread blocks times the tokens each one reads,
  // plus a fixed cost per block (start-up, writing and merging partials);
  // ties go to fewer pieces.
  constexpr uint64_t kBlockOverheadTokens = 256;
  uint64_t best = 1, best_cost = UINT64_MAX;
  for (uint64_t n = 1; n <= most; ++n) {
    const uint64_t cost =
        ceil_div(base_ctas * n, wave) * (ceil_div(max_range, n) + kBlockOverheadTokens);
    if (cost < best_cost) {
      best_cost = cost;
      best = n;
    }
  }
  if (best <= 1) return out;
  const uint64_t per = ceil_div(ceil_div(max_range, best), kPrefillTileTokens) * kPrefillTileTokens;
  out.split_tokens = uint32_t(per);
  out.num_splits = uint32_t(ceil_div(max_range, per));
  if (out.num_splits <= 1) out = PrefillSplit{};
  return out;
}

uint64_t prefill_workspace_bound(uint64_t total_q, uint32_t q_heads, uint32_t head_dim,
                                 uint64_t max_kv_len, uint64_t wave) {
  // A split launch has base_ctas < wave thread blocks of at most
  // kPrefillTileRows packed rows each, cut at most ceil(2 wave / base)
  // times: fewer than 3 waves of tiles of partial rows. Each partial row is
  // head_dim floats and a (max, sum) pair.
  const uint64_t by_length = total_q * q_heads * splits_by_length(std::max<uint64_t>(max_kv_len, 1));
  const uint64_t by_occupancy = 3 * wave * kPrefillTileRows;
  const uint64_t rows = std::min(by_length, by_occupancy);
  if (splits_by_length(std::max<uint64_t>(max_kv_len, 1)) <= 1) return 0;
  return rows * (uint64_t(head_dim) * sizeof(float) + 2 * sizeof(float));
}

}  // namespace kvc
