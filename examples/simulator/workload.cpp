#include "workload.h"

namespace sim {

uint64_t Workload::prompt_tokens() const {
  uint64_t n = 0;
  for (const Request &r : requests) n += r.input_length;
  return n;
}

uint64_t Workload::output_tokens() const {
  uint64_t n = 0;
  for (const Request &r : requests) n += r.output_length;
  return n;
}

}  // namespace sim
