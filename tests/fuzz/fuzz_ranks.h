// The ranks configuration (KVC_FUZZ_RANKS, fuzz_ranks.cpp): a paged cache
// of 2 or 4 CPU ranks (tensor parallelism), bytes checked on every rank.
#pragma once

#include <cstdint>

#include "fuzz_input.h"

namespace kvc_fuzz {

// What the ranks programs did, printed at exit.
struct RanksCounters {
  uint64_t ops[16] = {};       // operation codes decoded
  uint64_t reused_adds = 0;    // adds that reused tokens (checked on every rank)
  uint64_t reused_tokens = 0;
  uint64_t computes = 0;       // forward passes written and committed
  uint64_t stores = 0;         // kvc_store_kv calls naming a rank
  uint64_t forks = 0;
  uint64_t bad_inputs = 0;
};
extern RanksCounters g_ranks;

void ranks_one_input(Input& in);
void ranks_report();

}  // namespace kvc_fuzz
