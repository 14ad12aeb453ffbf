package org.kvcache.tests;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;
import org.kvcache.Cache;
import org.kvcache.CacheStats;
import org.kvcache.Config;

/**
 * The host (secondary) tier: a cached prompt is offloaded when another one
 * needs the room and onboarded when it comes back; the statistics count
 * both ways.
 */
class HostTierTest {
  /** 2 layers x K,V x 4 tokens x 1 head x 64 dims x f32. */
  private static final long SET_BYTES = 2L * 2 * 4 * 1 * 64 * 4;

  @Test
  void evictedBlocksAreOffloadedAndOnboardedOnAHit() {
    Cache cache;
    try (Config c = Fixtures.config(4).setPartialReuse(false).setHostCacheBytes(4 * SET_BYTES + 1)) {
      cache = new Cache(c);
    }
    try (cache) {
      assertEquals(4 * SET_BYTES, cache.describe().hostCacheBytes()); // whole block sets
      int[] first = Fixtures.tokens(0, 9); // two full blocks and a tail
      cache.addSequence(1, first);
      cache.commit(1, 9);
      cache.removeSequence(1);

      cache.addSequence(2, Fixtures.tokens(100, 13)); // takes all four blocks
      CacheStats s = cache.stats();
      assertEquals(2, s.offloadedBlocks());
      assertEquals(2 * SET_BYTES, s.offloadedBytes());
      assertEquals(0, s.evictedBlocks());
      assertEquals(4, s.hostBlocks());
      assertEquals(2, s.hostCachedBlocks());
      assertEquals(2, s.hostFreeBlocks());
      cache.removeSequence(2);

      assertEquals(8, cache.addSequence(3, first));
      s = cache.stats();
      assertEquals(2, s.onboardedBlocks());
      assertEquals(2 * SET_BYTES, s.onboardedBytes());
      assertEquals(0, s.hostCachedBlocks());
      assertEquals(2, s.reusedBlocks());
      cache.check();
    }
  }

  @Test
  void makeRoomEvictsAheadIntoTheHostTier() {
    Cache cache;
    try (Config c = Fixtures.config(4).setPartialReuse(false).setHostCacheBytes(4 * SET_BYTES)) {
      cache = new Cache(c);
    }
    try (cache) {
      int[] first = Fixtures.tokens(0, 9);
      cache.addSequence(1, first);
      cache.commit(1, 9);
      cache.removeSequence(1); // 2 cached, 2 free
      assertEquals(2, cache.makeRoom(0));
      assertEquals(4, cache.makeRoom(4));
      CacheStats s = cache.stats();
      assertEquals(4, s.freeBlocks());
      assertEquals(0, s.cachedBlocks());
      assertEquals(2, s.offloadedBlocks());
      assertEquals(4, cache.makeRoom(100)); // nothing cached is left: no error
      assertEquals(8, cache.addSequence(2, first)); // onboarded
      assertEquals(2, cache.stats().onboardedBlocks());
      cache.check();
    }
  }
}
