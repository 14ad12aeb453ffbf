// The state configuration (KVC_FUZZ_STATE, fuzz_state.cpp): a paged cache
// with state resources and snapshots (state.h) driven by the input.
#pragma once

#include <cstdint>

#include "fuzz_input.h"

namespace kvc_fuzz {

// What the state programs did, printed at exit.
struct StateCounters {
  uint64_t ops[16] = {};          // operation codes decoded
  uint64_t restored_adds = 0;     // adds that reused a prefix (bytes checked)
  uint64_t restored_tokens = 0;
  uint64_t adds_cold = 0;         // adds with no reuse
  uint64_t adds_refused = 0;
  uint64_t writes = 0;            // state writes through the resource views
  uint64_t publishes = 0;
  uint64_t publish_evictions = 0; // publishes into a full pool
  uint64_t host_caches = 0;       // programs with a host tier (host snapshot slots)
  uint64_t publish_offloads = 0;  // publishes that moved a snapshot to the host pool
  uint64_t onboards = 0;          // adds and rewinds restored from the host pool (bytes checked)
  uint64_t publish_refused = 0;   // bad position or id
  uint64_t publish_unpublished_block = 0;
  uint64_t rewinds_restored = 0;  // bytes checked
  uint64_t rewinds_refused = 0;   // to a position without a cached snapshot
  uint64_t forks = 0;             // child's bytes checked
  uint64_t resets = 0;            // kvc_cache_reset_reuse with no sequence
  uint64_t bad_inputs = 0;
};
extern StateCounters g_state;

void state_one_input(Input& in);
void state_report();

}  // namespace kvc_fuzz
