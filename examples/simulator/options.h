// Command-line options of kvcache-sim.
#pragma once

#include <string>
#include <vector>

#include "generator.h"
#include "sim_config.h"
#include "trace_reader.h"

namespace sim {

struct Options {
  std::string trace;             // empty: the synthetic generator
  TraceOptions trace_options;
  GeneratorOptions generator;
  SimConfig config;              // the single run (its policy from --reuse,
                                 // --prompt-priority and --system-priority)
  bool compare = false;          // run compare_policies() side by side instead
  uint32_t instances = 1;        // --instances N: caches sharing the remote tier
  bool remote_private = false;   // --remote-private: each instance its own namespace
  bool json = false;
  std::string plot;              // --plot FILE.svg
  bool help = false;
};

// The policies --compare runs: reuse off, LRU, system prompts retained.
// The third retains each request's system prompt at `system_priority`.
std::vector<Policy> compare_policies(uint32_t system_priority);

// Parses argv; on failure returns false and sets `error`.
bool parse_options(int argc, char **argv, Options &out, std::string &error);

// The --help text.
std::string usage();

}  // namespace sim
