package org.kvcache;

/**
 * Counts of a cache's primary blocks and of its reuse (kvc_cache_stats_t):
 * free + cached + inUse == numBlocks.
 *
 * @param numBlocks primary blocks over all pools
 * @param freeBlocks blocks on a free list
 * @param cachedBlocks unused but reusable (evictable) blocks
 * @param inUseBlocks blocks held by sequences or pins
 * @param reusedBlocks prompt block positions found cached by adds
 * @param missedBlocks prompt block positions adds had to compute
 * @param hitRate reused / (reused + missed); 0 before any add
 * @param evictedBlocks block positions evicted
 * @param numSequences live sequences
 * @param numPinned pins not yet released
 * @param treeNodes block positions in the radix tree
 */
public record CacheStats(long numBlocks, long freeBlocks, long cachedBlocks, long inUseBlocks,
    long reusedBlocks, long missedBlocks, double hitRate, long evictedBlocks, long numSequences,
    long numPinned, long treeNodes) {}
