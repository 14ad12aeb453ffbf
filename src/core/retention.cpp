#include "core/retention.h"

#include <string>

#include "base/error.h"
#include "core/eviction_policy.h"

namespace kvc {

namespace {

std::string name(size_t i) { return "options->retention_ranges[" + std::to_string(i) + "]"; }

std::string span(const RetentionRange& r) {
  return "[" + std::to_string(r.start) + ", " +
         (r.end == kOpenEnd ? std::string("open") : std::to_string(r.end)) + ")";
}

}  // namespace

void check_retention_ranges(const std::vector<RetentionRange>& ranges) {
  for (size_t i = 0; i < ranges.size(); ++i) {
    const RetentionRange& r = ranges[i];
    if (r.priority > kMaxPriority)
      invalid_argument(name(i) + ".priority must be in 0..100, got " + std::to_string(r.priority));
    if (r.end <= r.start)
      invalid_argument(name(i) + ".end must be > its start (" + std::to_string(r.start) +
                       "), got " + std::to_string(r.end));
    if (r.end == kOpenEnd && i + 1 != ranges.size())
      invalid_argument(name(i) + " is open-ended (end = KVC_RETENTION_OPEN_END) but is not the " +
                       "last of the " + std::to_string(ranges.size()) + " ranges");
    for (size_t j = 0; j < i; ++j) {
      const RetentionRange& o = ranges[j];
      if (r.start < o.end && o.start < r.end)
        invalid_argument(name(i) + " " + span(r) + " overlaps " + name(j) + " " + span(o));
    }
  }
}

const RetentionRange* range_holding(const std::vector<RetentionRange>& ranges, uint64_t token) {
  for (const RetentionRange& r : ranges)
    if (token >= r.start && token < r.end) return &r;
  return nullptr;
}

}  // namespace kvc
