// A continuous-batching scheduler, as serving engines run one:
//  - first come, first served: requests wait in arrival order;
//  - every step, each running sequence decodes one token; when the cache is
//    out of blocks, the newest running sequence is preempted (removed, its
//    computed blocks stay cached) and later recomputed from its prompt plus
//    what it had decoded;
//  - then waiting requests are admitted while the step's token budget, the
//    running limit and the memory budget (the cache's add succeeds) allow;
//    a prompt is prefilled whole in the step it is admitted;
//  - the KV of every computed token is stored; computed blocks are
//    committed, so a request admitted in a later step can reuse them.
// Time is simulated: arrivals come from the workload, and each step lasts
// what presets.h's step-time model says. No sleeps, no wall-clock input.
#pragma once

#include "cache_adapter.h"
#include "kv_writer.h"
#include "progress.h"
#include "run_result.h"
#include "workload.h"

namespace sim {

class Scheduler {
 public:
  Scheduler(const Workload &workload, const SimConfig &config, CacheAdapter &cache,
            KvWriter &writer, Progress &progress);
  RunResult run();

 private:
  const Workload &workload_;
  const SimConfig &config_;
  CacheAdapter &cache_;
  KvWriter &writer_;
  Progress &progress_;
};

// Creates the cache and runs `workload` under `config`; throws
// std::runtime_error with kvcache's message on failure.
RunResult simulate(const Workload &workload, const SimConfig &config);

}  // namespace sim
