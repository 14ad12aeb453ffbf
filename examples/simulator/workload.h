// A workload: the requests the simulator replays, in arrival order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tokens.h"

namespace sim {

struct Request {
  uint64_t id = 0;               // index in arrival order; also the sequence id
  double arrival_s = 0;          // simulated arrival time, speed factor applied
  std::vector<Segment> prompt;   // expands to input_length tokens
  uint32_t input_length = 0;
  uint32_t output_length = 0;    // tokens to decode (>= 1)
  uint64_t output_seed = 0;      // seed of the decoded tokens
  uint32_t system_length = 0;    // leading prompt tokens that are a system prompt
                                 // (synthetic: preamble + tenant prompt; traces: 0)
  uint32_t tenant = 0;
  bool has_salt = false;         // cache salt: isolates the tenant's blocks
  std::string salt;
};

struct Workload {
  std::string name;
  std::vector<Request> requests;
  uint64_t prompt_tokens() const;
  uint64_t output_tokens() const;
};

}  // namespace sim
