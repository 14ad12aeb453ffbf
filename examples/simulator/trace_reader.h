// Reads Mooncake (FAST'25) request traces: JSON Lines with one flat object
// per request: {"timestamp": ms, "input_length": n, "output_length": m,
// "hash_ids": [ids of the prompt's 512-token blocks]}.
#pragma once

#include <cstdint>
#include <string>

#include "workload.h"

namespace sim {

struct TraceOptions {
  double speed = 1.0;            // arrival time = timestamp / speed
  uint64_t max_requests = 0;     // 0 = every record
};

constexpr uint32_t kTraceBlockTokens = 512;

// Parses `text` (the whole file). On failure returns false and sets `error`
// to "<name>:<line>: <what>".
bool parse_trace(const std::string &text, const std::string &name,
                 const TraceOptions &options, Workload &out, std::string &error);

// Reads and parses the file at `path`.
bool read_trace(const std::string &path, const TraceOptions &options, Workload &out,
                std::string &error);

}  // namespace sim
