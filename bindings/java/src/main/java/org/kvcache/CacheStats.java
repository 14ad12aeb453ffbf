package org.kvcache;

/**
 * Counts of a cache's blocks and of its reuse (kvc_cache_stats_t):
 * free + cached + inUse == numBlocks in the primary pools, hostFree +
 * hostCached == hostBlocks in the host tier (whose blocks are never in use).
 *
 * @param numBlocks primary blocks over all pools
 * @param freeBlocks blocks on a free list
 * @param cachedBlocks unused but reusable (evictable) blocks
 * @param inUseBlocks blocks held by sequences or pins
 * @param reusedBlocks prompt block positions found cached by adds
 * @param missedBlocks prompt block positions adds had to compute
 * @param hitRate reused / (reused + missed); 0 before any add
 * @param evictedBlocks block positions that left the tree to make room
 *     (dropped from the primary pools or evicted from the host tier)
 * @param numSequences live sequences
 * @param numPinned pins not yet released
 * @param treeNodes block positions in the radix tree (both tiers)
 * @param offloadedBlocks block positions copied to the host tier on eviction
 * @param onboardedBlocks block positions copied back from the host tier on a hit
 * @param offloadedBytes bytes copied to the host tier
 * @param onboardedBytes bytes copied back from it
 * @param hostBlocks host-tier blocks over all pools (0 without a host tier)
 * @param hostFreeBlocks host-tier blocks holding nothing
 * @param hostCachedBlocks host-tier blocks holding offloaded, reusable KV
 */
public record CacheStats(long numBlocks, long freeBlocks, long cachedBlocks, long inUseBlocks,
    long reusedBlocks, long missedBlocks, double hitRate, long evictedBlocks, long numSequences,
    long numPinned, long treeNodes, long offloadedBlocks, long onboardedBlocks,
    long offloadedBytes, long onboardedBytes, long hostBlocks, long hostFreeBlocks,
    long hostCachedBlocks) {}
