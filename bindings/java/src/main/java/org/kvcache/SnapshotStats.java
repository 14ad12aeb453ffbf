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
 * @param evicted snapshots evicted by a publish into a full pool
 * @param dropped snapshots dropped with their node (block eviction, reset)
 */
public record SnapshotStats(int numSlots, int slotsUsed, long bytesPerSnapshot, long bytes,
    long published, long hits, long hitTokens, long restores, long evicted, long dropped) {}
