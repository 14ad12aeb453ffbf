package org.kvcache;

/**
 * Statistics of one tier below the tree (kvc_tier_stats_t), from
 * {@link Cache#tierStats(Tier)}. Latencies are over the tier's last 1024
 * operations, in microseconds.
 *
 * @param tier {@link Tier#DISK} or {@link Tier#REMOTE}
 * @param blocks blocks held now
 * @param bytes bytes they take (header and KV)
 * @param capacityBytes the tier's byte budget
 * @param hits lookups the tier answered with a record
 * @param misses lookups of a block the tier does not hold
 * @param rejected records refused by the check (torn, corrupted, another block's)
 * @param onboardedBlocks blocks copied into the cache from the tier
 * @param onboardedBytes their KV bytes
 * @param offeredBlocks blocks queued for writing (at commit or eviction; not those an add
 *     loaded from this tier)
 * @param storedBlocks blocks written
 * @param droppedBlocks writes dropped: queue full, no room, a failed write, the tier down
 * @param errors I/O failures, timeouts, protocol errors
 * @param evictedBlocks blocks the tier removed to stay in its budget
 * @param queuedBlocks writes waiting now
 * @param loadCount lookups (one per run of a prompt's blocks)
 * @param loadP50Us median lookup latency
 * @param loadP99Us 99th percentile lookup latency
 * @param loadMaxUs longest lookup
 * @param writeCount blocks written (timed)
 * @param writeP50Us median write latency
 * @param writeP99Us 99th percentile write latency
 * @param writeMaxUs longest write
 */
public record TierStats(Tier tier, long blocks, long bytes, long capacityBytes, long hits,
    long misses, long rejected, long onboardedBlocks, long onboardedBytes, long offeredBlocks,
    long storedBlocks, long droppedBlocks, long errors, long evictedBlocks, long queuedBlocks,
    long loadCount, long loadP50Us, long loadP99Us, long loadMaxUs, long writeCount,
    long writeP50Us, long writeP99Us, long writeMaxUs) {}
