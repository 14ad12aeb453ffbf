package org.kvcache.tests;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.junit.jupiter.api.Test;
import org.kvcache.Cache;
import org.kvcache.CacheStats;
import org.kvcache.Config;
import org.kvcache.DType;
import org.kvcache.GroupStats;
import org.kvcache.KvCacheException;
import org.kvcache.Status;

/** Per-layer-group statistics: a full and a windowed group sharing one pool. */
class GroupStatsTest {
  /** 2 layers with windows {0, 32}: group 0 full, group 1 windowed; 128 blocks of 16 tokens. */
  private static Cache windowedCache() {
    try (Config c = new Config()
        .setNumLayers(2)
        .setAttentionWindows(0, 32)
        .setKvHeads(2)
        .setHeadDim(8)
        .setDtype(DType.F32)
        .setTokensPerBlock(16)
        .setMaxTokens(1024)) {
      return new Cache(c);
    }
  }

  /**
   * Each group's (in use, cached, reused, missed, evicted, released), its pool and the
   * pool's free blocks; the groups add up to the cache's stats.
   */
  private static void expect(Cache cache, String step, long free, long[] group0, long[] group1) {
    CacheStats t = cache.stats();
    long inUse = 0;
    long cached = 0;
    long[][] want = {group0, group1};
    for (int g = 0; g < 2; g++) {
      GroupStats s = cache.groupStats(g);
      assertArrayEquals(want[g], new long[] {s.inUseBlocks(), s.cachedBlocks(),
          s.reusedBlocks(), s.missedBlocks(), s.evictedBlocks(), s.releasedBlocks()},
          step + ": group " + g + ": " + s);
      assertEquals(0, s.pool(), step);
      assertEquals(free, s.poolFreeBlocks(), step);
      inUse += s.inUseBlocks();
      cached += s.cachedBlocks();
    }
    assertEquals(free, t.freeBlocks(), step);
    assertEquals(inUse, t.inUseBlocks(), step);
    assertEquals(cached, t.cachedBlocks(), step);
  }

  @Test
  void windowedGroupReleasesWhatLeftItsWindow() {
    try (Cache cache = windowedCache()) {
      assertEquals(2, cache.describe().numGroups());
      assertEquals(1, cache.describe().numPools());
      int[] prompt = Fixtures.tokens(1000, 128);
      assertEquals(0, cache.addSequence(1, prompt));
      expect(cache, "added", 112, new long[] {8, 0, 0, 8, 0, 0}, new long[] {8, 0, 0, 8, 0, 0});
      // Token 128 attends to tokens 97..128: blocks 6 and 7 stay, 0..5 are
      // released and stay cached.
      cache.commit(1, 128);
      expect(cache, "committed", 112, new long[] {8, 0, 0, 8, 0, 0},
          new long[] {2, 6, 0, 8, 0, 6});
      cache.removeSequence(1);
      expect(cache, "removed", 112, new long[] {0, 8, 0, 8, 0, 0},
          new long[] {0, 8, 0, 8, 0, 6});
      // Reuse: the windowed group reuses only blocks 6 and 7.
      assertEquals(127, cache.addSequence(2, prompt));
      expect(cache, "reused", 110, new long[] {8, 1, 8, 8, 0, 0},
          new long[] {2, 7, 2, 8, 0, 6});
      cache.check();
    }
  }

  @Test
  void groupOutOfRange() {
    try (Cache cache = windowedCache()) {
      KvCacheException e = assertThrows(KvCacheException.class, () -> cache.groupStats(2));
      assertEquals(Status.INVALID_ARGUMENT, e.status());
      assertEquals("group must be < num_groups (2), got 2", e.nativeMessage());
      e = assertThrows(KvCacheException.class, () -> cache.groupStats(-1));
      assertEquals(Status.INVALID_ARGUMENT, e.status());
      assertEquals("group must be >= 0, got -1", e.nativeMessage());
    }
    Cache closed = windowedCache();
    closed.close();
    KvCacheException e = assertThrows(KvCacheException.class, () -> closed.groupStats(0));
    assertEquals(Status.INVALID_STATE, e.status());
  }
}
