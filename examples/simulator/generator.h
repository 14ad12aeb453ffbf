// Synthetic multi-tenant workload in the shape of SGLang's
// generated-shared-prefix benchmark, extended to multi-turn chats:
//   - every tenant has a system prompt: a platform preamble that is the same
//     text for all tenants, then the tenant's own instructions;
//   - every chat of a tenant starts with that system prompt and, turn after
//     turn, resends its whole history (questions and the answers the
//     simulator decoded) followed by a new question;
//   - some tenants set a cache salt, so their blocks are never shared with
//     another tenant even where the text is the same (the preamble).
#pragma once

#include <cstdint>

#include "workload.h"

namespace sim {

struct GeneratorOptions {
  uint32_t tenants = 8;
  uint32_t salted_tenants = 4;     // the first N tenants carry a cache salt
  uint32_t chats_per_tenant = 10;  // the demo's default finishes in about a minute
  uint32_t turns_per_chat = 4;
  uint32_t preamble_tokens = 1024; // shared by every tenant's system prompt
  uint32_t system_tokens = 2048;   // each tenant's own instructions
  uint32_t question_tokens = 384;  // mean; uniform in [0.5, 1.5] x mean
  uint32_t answer_tokens = 192;    // mean output length, same spread
  double chats_per_second = 2.0;   // chat starts: a Poisson process
  double think_seconds = 30.0;     // mean gap between turns (exponential)
  uint64_t seed = 1;
};

// Builds the workload; requests are sorted by arrival time and numbered.
Workload generate_workload(const GeneratorOptions &options);

}  // namespace sim
