// Retention policy of a sequence (TensorRT-LLM's KvCacheRetentionConfig):
// prompt token ranges with a priority and an optional duration, and a
// priority and duration for blocks of generated tokens. A block takes the
// setting of the range holding its first token; once its duration has run
// since the block became reusable, its priority reverts to the default.
#pragma once

#include <cstdint>
#include <vector>

namespace kvc {

constexpr uint64_t kOpenEnd = UINT64_MAX;  // a range reaching to the end
constexpr uint64_t kNoDuration = 0;        // the priority never reverts

struct RetentionRange {
  uint64_t start = 0;
  uint64_t end = kOpenEnd;  // exclusive
  uint32_t priority = 35;
  uint64_t duration_ms = kNoDuration;
};

// What one block position gets.
struct BlockRetention {
  uint8_t priority = 35;
  uint64_t duration_ms = kNoDuration;
};

// The moment (ms) a priority set with `duration_ms` reverts; saturates.
inline uint64_t revert_moment(uint64_t reusable_at, uint64_t duration_ms) {
  return duration_ms > UINT64_MAX - reusable_at ? UINT64_MAX : reusable_at + duration_ms;
}

// Throws Error(KVC_ERR_INVALID_ARGUMENT) naming the first bad range:
// priority above 100, end not after start, an open range before the last,
// or two ranges overlapping.
void check_retention_ranges(const std::vector<RetentionRange>& ranges);

// The range holding `token`, or nullptr.
const RetentionRange* range_holding(const std::vector<RetentionRange>& ranges, uint64_t token);

}  // namespace kvc
