package org.kvcache.tests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;
import org.kvcache.Cache;
import org.kvcache.Config;
import org.kvcache.KvCacheException;
import org.kvcache.RetentionRange;
import org.kvcache.SequenceOptions;
import org.kvcache.Status;

/** Retention: expiry on the manual clock changes the victim; errors. */
class RetentionTest {
  /** Caches a one-block prompt (plus a last token) and removes it. */
  private static void cacheBlock(Cache c, long id, int first, SequenceOptions o) {
    c.addSequence(id, Fixtures.tokens(first, 5), o);
    c.commit(id, 5);
    c.removeSequence(id);
  }

  /** A at 80 for 100 ms, B at 35 later; a 2-block prompt evicts one of 3 blocks. */
  private static long[] keptAfter(long elapsedMs) {
    try (Config cfg = Fixtures.config(3).setPartialReuse(false).setManualClock(true)) {
      assertTrue(cfg.getManualClock());
      try (Cache c = new Cache(cfg)) {
        cacheBlock(c, 1, 0,
            new SequenceOptions().retentionRange(0, RetentionRange.OPEN_END, 80, 100));
        cacheBlock(c, 2, 100, new SequenceOptions());
        c.advanceClock(elapsedMs);
        c.addSequence(3, Fixtures.tokens(200, 8));
        SequenceOptions none = new SequenceOptions();
        return new long[] {c.probe(Fixtures.tokens(0, 5), none),
            c.probe(Fixtures.tokens(100, 5), none)};
      }
    }
  }

  @Test
  void anExpiredPriorityChangesTheVictim() {
    assertEquals(4, keptAfter(99)[0]);
    assertEquals(0, keptAfter(99)[1]);
    assertEquals(0, keptAfter(100)[0]);
    assertEquals(4, keptAfter(100)[1]);
  }

  @Test
  void invalidRangesAndClockErrors() {
    try (Cache c = Fixtures.cache(8)) {
      SequenceOptions o = new SequenceOptions()
          .retentionRange(0, 64, 80, 0)
          .retentionRange(32, 96, 50, 0)
          .decodeDurationMs(5);
      assertEquals(2, o.retentionRanges().size());
      assertEquals(5, o.decodeDurationMs());
      KvCacheException e = assertThrows(KvCacheException.class,
          () -> c.addSequence(1, Fixtures.tokens(0, 10), o));
      assertEquals(Status.INVALID_ARGUMENT, e.status());
      assertTrue(e.getMessage().contains("[32, 96) overlaps"), e.getMessage());
      KvCacheException clock = assertThrows(KvCacheException.class, () -> c.advanceClock(1));
      assertEquals(Status.INVALID_STATE, clock.status());
    }
  }
}
