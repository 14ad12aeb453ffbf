package org.kvcache;

/**
 * The state snapshot pool and its counters (kvc_snapshot_stats_t; state.h),
 * from {@link Cache#snapshotStats()}; all 0 without state resources.
 *
 * @param numSlots snapshot slots of the pool
 * @param slotsUsed snapshots cached now
 * @param bytesPerSnapshot bytes one publish or restore copies
 * @param bytes bytes of the pool (out of the primary budget)
 * @param published publishes that stored a snapshot
 * @param hits adds that reused a prefix (restored a snapshot)
 * @param hitTokens tokens those adds reused
 * @param restores rewinds that restored a snapshot
 * @param evicted snapshots a publish into a full pool evicted for good (not offloaded)
 * @param dropped snapshots dropped with their node (block eviction, reset), from either pool
 * @param hostNumSlots host snapshot slots (a quarter of host_cache_bytes; 0 without a host tier)
 * @param hostSlotsUsed snapshots in the host pool now
 * @param hostBytes bytes of the host pool (out of host_cache_bytes)
 * @param offloaded snapshots a publish into a full pool moved to the host pool
 * @param onboarded reuses and rewinds that restored a host snapshot
 * @param hostEvicted host snapshots evicted to make room for an offload
 */
public record SnapshotStats(int numSlots, int slotsUsed, long bytesPerSnapshot, long bytes,
    long published, long hits, long hitTokens, long restores, long evicted, long dropped,
    int hostNumSlots, int hostSlotsUsed, long hostBytes, long offloaded, long onboarded,
    long hostEvicted) {}
