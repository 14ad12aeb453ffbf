package org.kvcache;

/**
 * One block pool (kvc_pool_desc_t).
 *
 * @param numGroups layer groups drawing from this pool
 * @param blockBytes bytes of one block
 * @param numBlocks blocks in the pool
 * @param bytes blockBytes * numBlocks
 * @param base address of the first byte (a device pointer on CUDA), owned by the cache
 */
public record PoolDescription(int numGroups, long blockBytes, long numBlocks, long bytes,
    long base) {}
