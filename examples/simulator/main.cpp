// kvcache-sim: replays a request trace (or a synthetic multi-tenant
// workload) through a kvcache cache with a continuous-batching scheduler,
// writing real KV through the library's kernels, and reports how much
// prompt work prefix reuse saved. See --help and README.md ("The serving
// simulator").
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "options.h"
#include "report.h"
#include "scheduler.h"
#include "svg_plot.h"

int main(int argc, char **argv) {
  sim::Options o;
  std::string error;
  if (!sim::parse_options(argc, argv, o, error)) {
    std::fprintf(stderr, "kvcache-sim: %s\n", error.c_str());
    return 2;
  }
  if (o.help) {
    std::fputs(sim::usage().c_str(), stdout);
    return 0;
  }
  sim::Workload workload;
  if (o.trace.empty()) {
    workload = sim::generate_workload(o.generator);
  } else if (!sim::read_trace(o.trace, o.trace_options, workload, error)) {
    std::fprintf(stderr, "kvcache-sim: %s\n", error.c_str());
    return 1;
  }
  std::vector<sim::Policy> policies = {o.config.policy};
  if (o.compare) policies = sim::compare_policies(o.config.policy.system_priority);

  std::vector<sim::RunResult> runs;
  try {
    if (o.instances > 1) {
      runs = sim::simulate_instances(workload, o.config, o.instances, o.remote_private);
    } else {
      for (const sim::Policy &p : policies) {
        sim::SimConfig c = o.config;
        c.policy = p;
        runs.push_back(sim::simulate(workload, c));
      }
    }
  } catch (const std::exception &e) {
    std::fprintf(stderr, "kvcache-sim: %s\n", e.what());
    return 1;
  }
  if (o.json) {
    sim::print_json(stdout, workload, runs);
  } else {
    sim::print_table(stdout, workload, runs);
    if (o.instances > 1) {
      uint64_t prompt = 0, reused = 0, remote = 0;
      for (const sim::RunResult &r : runs) {
        prompt += r.prompt_tokens;
        reused += r.reused_tokens;
        remote += r.counters.remote_onboarded;
      }
      std::printf("\nall %u instances: hit rate %.1f%% (%llu of %llu prompt tokens), %llu blocks "
                  "loaded from the remote tier\n",
                  o.instances, prompt ? 100.0 * double(reused) / double(prompt) : 0.0,
                  static_cast<unsigned long long>(reused), static_cast<unsigned long long>(prompt),
                  static_cast<unsigned long long>(remote));
    }
  }
  if (!o.plot.empty()) {
    if (!sim::write_svg_plot(o.plot, "kvcache-sim: " + workload.name, runs, error)) {
      std::fprintf(stderr, "kvcache-sim: %s\n", error.c_str());
      return 1;
    }
    if (!o.json) std::printf("\nplot: %s\n", o.plot.c_str());
  }
  return 0;
}
