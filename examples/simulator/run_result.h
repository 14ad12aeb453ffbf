// What one simulation run measured: the report, the JSON and the plot read it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cache_adapter.h"
#include "sim_config.h"
#include "step_clock.h"

namespace sim {

// One point of the timeline: the hit rate of the prompts admitted since the
// previous point, and the cache's occupancy at this point.
struct Sample {
  double time_s = 0;
  double hit_rate = 0;     // NaN when no prompt was admitted in the interval
  double in_use = 0;       // share of primary blocks in use
  double cached = 0;       // share of primary blocks cached (reusable)
};

struct RunResult {
  std::string policy;
  SimConfig config;
  std::string workload;
  uint64_t requests = 0;
  uint64_t completed = 0;
  uint64_t rejected = 0;          // prompts larger than the whole cache
  uint64_t prompt_tokens = 0;     // of first admissions
  uint64_t reused_tokens = 0;     // of first admissions, returned by add
  uint64_t recomputed_tokens = 0; // prompt tokens computed again after a preemption
  uint64_t decoded_tokens = 0;
  uint64_t preemptions = 0;
  uint64_t steps = 0;
  uint64_t prefill_chunks = 0;    // chunks of chunked prefills after their first
  uint64_t peak_in_use = 0;       // blocks
  uint64_t stored_tokens = 0;     // tokens written through the store kernel
  uint64_t attention_calls = 0;   // kvc_decode_attention calls
  uint64_t prefill_calls = 0;     // kvc_prefill_attention calls
  uint64_t attended_queries = 0;  // query tokens read back by attention (per layer)
  CacheCounters counters;         // at the end
  uint64_t capacity_blocks = 0;
  uint64_t block_bytes_per_token = 0;
  uint64_t primary_bytes = 0;
  Spread bookkeeping_wall;        // cache-manager calls per step, wall time (us)
  Spread bookkeeping_cpu;         // the same, this thread's CPU time (us)
  double cpu_reading_us = 0;      // one CPU-clock reading, taken off each segment
  // kvc_cache_make_room per step, while the device runs it (room_ahead):
  // wall and CPU time (us); not part of the bookkeeping above.
  Spread room_ahead_wall, room_ahead_cpu;
  std::vector<CallProfile> profile;  // per call kind (--profile)
  double kv_write_s = 0;          // wall time in the store (and attention) kernels
  double simulated_s = 0;
  double wall_s = 0;
  std::vector<Sample> timeline;

  double hit_rate() const {
    return prompt_tokens ? static_cast<double>(reused_tokens) / static_cast<double>(prompt_tokens)
                         : 0.0;
  }
};

}  // namespace sim
