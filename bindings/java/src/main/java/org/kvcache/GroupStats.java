package org.kvcache;

/**
 * Counts of one layer group's blocks and of its reuse (kvc_group_stats_t),
 * from {@link Cache#groupStats(int)}.
 *
 * <p>A full-attention group holds a block for every block position of every
 * sequence. A windowed group (window W, see
 * {@link Config#setAttentionWindows(int...)}) holds only the blocks covering
 * the W tokens its next token attends to and lets the others go as commits
 * move a sequence forward ({@code releasedBlocks}; committed ones stay cached
 * until evicted). Its reuse counts only the positions it needs: when an add
 * reuses a prefix, the positions before the window that ends at the reuse
 * point count neither as reused nor as missed, so
 * {@code reusedBlocks + missedBlocks} may differ between the groups of one
 * cache.
 *
 * <p>Groups whose blocks have the same size share a pool, so free blocks
 * belong to the pool: {@code poolFreeBlocks} is the same for every group of
 * a pool.
 *
 * @param pool index of the pool the group draws from ({@link Cache#describePool(int)})
 * @param inUseBlocks blocks of this group held by sequences or pins
 * @param cachedBlocks blocks of this group cached in the tree (evictable)
 * @param poolFreeBlocks free blocks of that pool, shared with the pool's other groups
 * @param reusedBlocks prompt block positions reused from the tree
 * @param missedBlocks prompt block positions computed
 * @param evictedBlocks blocks of this group evicted
 * @param releasedBlocks blocks a windowed group let go because they left the window
 */
public record GroupStats(int pool, long inUseBlocks, long cachedBlocks, long poolFreeBlocks,
    long reusedBlocks, long missedBlocks, long evictedBlocks, long releasedBlocks) {}
