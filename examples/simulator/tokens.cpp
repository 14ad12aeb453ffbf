#include "tokens.h"

namespace sim {

void append_tokens(const std::vector<Segment> &segments, std::vector<int32_t> &out) {
  out.reserve(out.size() + segments_length(segments));
  for (const Segment &s : segments)
    for (uint32_t i = 0; i < s.length; ++i) out.push_back(token_id(s.seed, i));
}

uint64_t segments_length(const std::vector<Segment> &segments) {
  uint64_t n = 0;
  for (const Segment &s : segments) n += s.length;
  return n;
}

}  // namespace sim
