package org.kvcache.tests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.kvcache.Cache;
import org.kvcache.Config;
import org.kvcache.KvCacheException;
import org.kvcache.Status;
import org.kvcache.Tier;
import org.kvcache.TierStats;

/**
 * The disk tier: its setting and errors, blocks evicted to the disk and
 * loaded back, a new cache on the directory finding them, the per-tier
 * statistics.
 */
class DiskTierTest {
  @TempDir Path dir;

  private Cache cache() {
    try (Config c = Fixtures.config(4).setPartialReuse(false).setDiskCache(dir.toString(), 1 << 20)) {
      return new Cache(c);
    }
  }

  private static long cachePrompt(Cache cache, long id, int[] tokens) {
    long cached = cache.addSequence(id, tokens);
    cache.commit(id, tokens.length);
    cache.removeSequence(id);
    return cached;
  }

  @Test
  void settingAndErrors() throws Exception {
    try (Config c = Fixtures.config(4)) {
      assertEquals("", c.getDiskCacheDirectory());
      assertEquals(0, c.getDiskCacheBytes());
      Path unicode = Files.createDirectory(dir.resolve("caché"));
      c.setDiskCache(unicode.toString(), 4096);
      assertEquals(unicode.toString(), c.getDiskCacheDirectory());
      assertEquals(4096, c.getDiskCacheBytes());
      KvCacheException e = assertThrows(KvCacheException.class, () -> c.setDiskCache(dir.toString(), 0));
      assertEquals(Status.INVALID_ARGUMENT, e.status());
      assertTrue(e.getMessage().contains("disk cache bytes must be > 0"), e.getMessage());
      c.setDiskCache(dir.resolve("missing").toString(), 1 << 20);
      e = assertThrows(KvCacheException.class, () -> new Cache(c));
      assertTrue(e.getMessage().contains("cannot be used"), e.getMessage());
      c.setDiskCache(null, 0);
      try (Cache cache = new Cache(c)) {
        e = assertThrows(KvCacheException.class, () -> cache.tierStats(Tier.DISK));
        assertEquals(Status.NOT_FOUND, e.status());
        e = assertThrows(KvCacheException.class, () -> cache.tierStats(Tier.HOST));
        assertEquals(Status.INVALID_ARGUMENT, e.status());
        cache.flushTiers();
      }
    }
  }

  @Test
  void evictedBlocksComeBackFromTheDiskAndSurviveARestart() {
    int[] a = Fixtures.tokens(100, 13); // 3 full blocks + 1 token
    try (Cache cache = cache()) {
      assertEquals(0, cachePrompt(cache, 1, a));
      assertEquals(0, cachePrompt(cache, 2, Fixtures.tokens(500, 16))); // a to the disk
      cache.flushTiers();
      TierStats s = cache.tierStats(Tier.DISK);
      assertEquals(Tier.DISK, s.tier());
      assertEquals(7, s.offeredBlocks());
      assertEquals(7, s.storedBlocks());
      assertEquals(7, s.blocks());
      assertEquals(1 << 20, s.capacityBytes());
      assertEquals(0, s.droppedBlocks());
      assertEquals(7, s.writeCount());
      assertEquals(12, cachePrompt(cache, 3, a));
      s = cache.tierStats(Tier.DISK);
      assertEquals(3, s.onboardedBlocks());
      assertEquals(3, s.hits());
      assertEquals(0, s.rejected());
      cache.check();
    }
    try (Cache cache = cache()) {
      assertTrue(cache.tierStats(Tier.DISK).blocks() >= 3);
      assertEquals(12, cachePrompt(cache, 1, a));
    }
  }
}
