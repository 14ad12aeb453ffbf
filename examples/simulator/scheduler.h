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

#include <memory>

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
  ~Scheduler();
  // Every step, then finish().
  RunResult run();

  // One step at a time (simulate_instances interleaves several schedulers
  // on one simulated clock): done() when every request finished or was
  // rejected; now() the simulated time of the next step; step() runs it
  // (or, idle, moves the clock to the next arrival); finish() the result.
  bool done() const;
  double now() const;
  void step();
  RunResult finish();

 private:
  struct State;
  const Workload &workload_;
  const SimConfig &config_;
  CacheAdapter &cache_;
  KvWriter &writer_;
  Progress &progress_;
  std::unique_ptr<State> s_;
};

// Creates the cache and runs `workload` under `config`; throws
// std::runtime_error with kvcache's message on failure.
RunResult simulate(const Workload &workload, const SimConfig &config);

// `instances` engines, each with a cache of its own under `config` (with
// --remote-cache all on one Redis server): request i goes to engine
// i % instances, as a router without prefix affinity deals them, and the
// engines step on one simulated clock (always the one whose next step is
// earliest), so an engine finds in Redis what another evicted before. One
// result per engine, its policy named "instance K".
// With private_namespaces each engine keys its blocks apart ("NS-K"): the
// same tier, nothing shared.
std::vector<RunResult> simulate_instances(const Workload &workload, const SimConfig &config,
                                          uint32_t instances, bool private_namespaces = false);

}  // namespace sim
