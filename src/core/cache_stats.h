// The statistics a cache reports (kvc_cache_stats_t, kvc_group_stats_t) and
// the running counters the owners of the core add to as they work; the
// rest of a report is read from the owners' state when it is asked for.
#pragma once

#include <cstdint>
#include <vector>

namespace kvc {

// Per layer group (kvc_group_stats_t).
struct GroupStats {
  uint64_t in_use_blocks = 0;   // blocks of this group held by sequences or pins
  uint64_t cached_blocks = 0;   // blocks of this group cached in the tree
  uint64_t reused_blocks = 0;   // prompt block positions reused from the tree
  uint64_t missed_blocks = 0;   // prompt block positions computed
  uint64_t evicted_blocks = 0;  // blocks of this group evicted
  uint64_t released_blocks = 0; // blocks a windowed group let go (out of window)
};

// Moves between the primary and the secondary (host) tier.
struct HostTierCounters {
  uint64_t offloaded_blocks = 0;  // block positions copied primary -> host
  uint64_t onboarded_blocks = 0;  // block positions copied host -> primary
  uint64_t offloaded_bytes = 0;
  uint64_t onboarded_bytes = 0;
};

struct CacheStats {
  uint64_t num_blocks = 0;  // primary blocks over all pools
  uint64_t free_blocks = 0;
  uint64_t cached_blocks = 0;
  uint64_t in_use_blocks = 0;
  uint64_t reused_blocks = 0;  // prompt block positions found in the tree
  uint64_t missed_blocks = 0;  // prompt block positions computed
  uint64_t evicted_blocks = 0;  // block positions that left the tree to make room
  uint64_t num_sequences = 0;
  uint64_t num_pinned = 0;     // pin records
  uint64_t tree_nodes = 0;
  // Secondary (host) tier.
  HostTierCounters host;
  uint64_t host_blocks = 0;    // host blocks over all pools
  uint64_t host_free_blocks = 0;
  uint64_t host_cached_blocks = 0;
};

// What the owners count as they go. The per-group in-use and cached counts
// follow every reference change (residency.h); the checker recounts them.
struct CacheCounters {
  explicit CacheCounters(uint32_t num_groups) : groups(num_groups) {}
  std::vector<GroupStats> groups;
  uint64_t reused_blocks = 0;
  uint64_t missed_blocks = 0;
  uint64_t evicted_blocks = 0;  // tree positions evicted, in any tier
};

}  // namespace kvc
