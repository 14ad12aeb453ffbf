package org.kvcache.tests;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;
import org.kvcache.Cache;
import org.kvcache.Config;
import org.kvcache.DType;
import org.kvcache.KvCacheException;
import org.kvcache.ResizePlan;
import org.kvcache.Status;

/** Resizing the primary pools in place: the plan's formula, grow, refused and done shrinks. */
class ResizeTest {
  /** 1 layer, 1 kv head of dim 8, f32, 4 tokens per block: 256-byte blocks. */
  private static final long BLOCK = 256;

  private static Cache cache(long blocks, long maxBlocks) {
    try (Config c = new Config()
        .setNumLayers(1)
        .setKvHeads(1)
        .setHeadDim(8)
        .setDtype(DType.F32)
        .setTokensPerBlock(4)
        .setPrimaryBytes(blocks * BLOCK)
        .setMaxPrimaryBytes(maxBlocks * BLOCK)) {
      assertEquals(maxBlocks * BLOCK, c.getMaxPrimaryBytes());
      return new Cache(c);
    }
  }

  @Test
  void thePlanFollowsTheFormula() {
    try (Cache cache = cache(16, 1000)) {
      ResizePlan p = cache.planResize(0.5, 200000, 40000, 60000);
      assertEquals(new ResizePlan(200000, 50000, 50000, 1000 * BLOCK, 50000 / BLOCK,
          50000 / BLOCK * 4, 50000 / BLOCK, 50000 / BLOCK * BLOCK, new long[] {50000 / BLOCK}), p);
      assertEquals(16, cache.describe().numBlocks());
      KvCacheException e = assertThrows(KvCacheException.class,
          () -> cache.planResize(1.5, 200000, 40000, 60000));
      assertEquals(Status.INVALID_ARGUMENT, e.status());
      assertTrue(e.getMessage().contains("free_gpu_memory_fraction must be in (0, 1]"),
          e.getMessage());
    }
  }

  @Test
  void growAndShrinkInPlace() {
    try (Cache cache = cache(8, 64)) {
      cache.addSequence(1, Fixtures.tokens(0, 16));
      int[] ids = cache.blockIds(1, 0);
      long base = cache.describePool(0).base();
      cache.resize(64 * BLOCK);
      assertEquals(64, cache.describe().numBlocks());
      assertEquals(64 * BLOCK, cache.describe().primaryBytes());
      assertEquals(base, cache.describePool(0).base());
      assertEquals(64, cache.layerView(0).numBlocks());
      assertArrayEquals(ids, cache.blockIds(1, 0));
      KvCacheException e = assertThrows(KvCacheException.class, () -> cache.resize(2 * BLOCK));
      assertEquals(Status.OUT_OF_BLOCKS, e.status());
      assertTrue(e.getMessage().contains("is in use"), e.getMessage());
      assertEquals(64, cache.stats().numBlocks());
      cache.resize(4 * BLOCK);
      assertEquals(4, cache.stats().numBlocks());
    }
  }
}
