package org.kvcache;

import java.util.Arrays;

/**
 * The primary pools a resize would give (kvc_resize_plan_t; {@link Cache#planResize}).
 *
 * @param freeBytes the free memory the formula used
 * @param memForPaged (free - nonPaged - forward) * fraction, rounded down
 * @param primaryBytes what to pass to {@link Cache#resize}: memForPaged held to the ceiling
 * @param maxPrimaryBytes the cache's ceiling
 * @param blocksPerGroup blocks every layer group gets
 * @param tokenCapacity tokens every layer can hold
 * @param numBlocks blocks over all pools
 * @param totalBytes bytes the pools take
 * @param poolBlocks blocks of each pool
 *
 * <p>Compared by value (poolBlocks by content).
 */
public record ResizePlan(long freeBytes, long memForPaged, long primaryBytes,
    long maxPrimaryBytes, long blocksPerGroup, long tokenCapacity, long numBlocks,
    long totalBytes, long[] poolBlocks) {
  /** Equal when every field is, poolBlocks element by element. */
  @Override
  public boolean equals(Object o) {
    return o instanceof ResizePlan p && freeBytes == p.freeBytes && memForPaged == p.memForPaged
        && primaryBytes == p.primaryBytes && maxPrimaryBytes == p.maxPrimaryBytes
        && blocksPerGroup == p.blocksPerGroup && tokenCapacity == p.tokenCapacity
        && numBlocks == p.numBlocks && totalBytes == p.totalBytes
        && Arrays.equals(poolBlocks, p.poolBlocks);
  }

  @Override
  public int hashCode() {
    return Arrays.hashCode(new long[] {freeBytes, memForPaged, primaryBytes, maxPrimaryBytes,
        blocksPerGroup, tokenCapacity, numBlocks, totalBytes}) * 31 + Arrays.hashCode(poolBlocks);
  }

  @Override
  public String toString() {
    return "ResizePlan[freeBytes=" + freeBytes + ", memForPaged=" + memForPaged
        + ", primaryBytes=" + primaryBytes + ", maxPrimaryBytes=" + maxPrimaryBytes
        + ", blocksPerGroup=" + blocksPerGroup + ", tokenCapacity=" + tokenCapacity
        + ", numBlocks=" + numBlocks + ", totalBytes=" + totalBytes + ", poolBlocks="
        + Arrays.toString(poolBlocks) + "]";
  }
}
