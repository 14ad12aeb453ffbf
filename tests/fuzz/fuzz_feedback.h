// Feedback on the model's state for libFuzzer: counters in the section it
// reads as extra coverage (__libfuzzer_extra_counters), so an input that
// reaches a new state of the program (two scopes on one prompt, a fork of
// a fork, an add that onboards) is kept even when it runs no new library
// code. The library's own coverage cannot tell salts apart, for one.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kvc_fuzz {

enum FeedbackKind : uint32_t {
  kOpStatus,      // (operation, status)
  kAddScope,      // (scope, cached: none / partial / whole blocks)
  kScopePair,     // (scope of an add, scope of the last commit of a prompt with its first token)
  kForkDepth,     // (depth of the new sequence, windowed cache)
  kPopulation,    // (live sequences, pins)
  kTierMoves,     // (offloaded, onboarded, evicted blocks by one call, bucketed)
  kRewindShape,   // (below the committed tokens, into a block)
  kWindowRelease, // (blocks released by a commit, bucketed)
  kStFault,       // stateful: (armed allocation, allocations the call makes), fired
  kStShape,       // stateful: (rows reading another row, table, layers equal), longest row
  kStGrowth,      // stateful: (layer, layer grew, table grew), rows appended
  kStBeams,       // stateful: (distinct sources of a reorder, table existed), conflict kind
  kTransfer,      // (exports held, blocks exported), (import: none / some / all found, how it ended)
  kNumKinds
};

constexpr size_t kFeedbackPerKind = 1024;
extern uint8_t g_feedback[kNumKinds * kFeedbackPerKind];

inline void feedback(FeedbackKind kind, uint32_t a, uint32_t b = 0) {
  uint8_t& c = g_feedback[kind * kFeedbackPerKind + (a * 32 + b) % kFeedbackPerKind];
  if (c != 255) ++c;
}

// 0, 1, 2, 3-4, 5-8, more.
inline uint32_t bucket(uint64_t n) { return n < 3 ? uint32_t(n) : n < 5 ? 3 : n < 9 ? 4 : 5; }

}  // namespace kvc_fuzz
