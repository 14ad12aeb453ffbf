package org.kvcache.tests;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;
import org.kvcache.Cache;
import org.kvcache.Config;
import org.kvcache.KvCacheException;
import org.kvcache.Status;

class LifecycleTest {
  private static void assertClosed(Executable call) {
    KvCacheException e = assertThrows(KvCacheException.class, call);
    assertEquals(Status.INVALID_STATE, e.status());
    assertTrue(e.getMessage().contains("closed"), e.getMessage());
  }

  @Test
  void closeTwiceDoesNothing() {
    Config config = Fixtures.config(8);
    Cache cache = new Cache(config);
    assertFalse(cache.isClosed());
    cache.close();
    assertTrue(cache.isClosed());
    assertDoesNotThrow(cache::close);
    config.close();
    assertDoesNotThrow(config::close);
    assertTrue(config.isClosed());
  }

  @Test
  void configClosedAfterCreateDoesNotAffectTheCache() {
    Cache cache;
    try (Config config = Fixtures.config(8)) {
      cache = new Cache(config);
    }
    try (cache) {
      assertEquals(0, cache.addSequence(1, Fixtures.tokens(0, 5)));
    }
  }

  @Test
  void useAfterCloseThrows() {
    Config config = Fixtures.config(8);
    Cache cache = new Cache(config);
    cache.addSequence(1, Fixtures.tokens(0, 6));
    cache.close();
    assertClosed(cache::describe);
    assertClosed(cache::stats);
    assertClosed(() -> cache.addSequence(2, Fixtures.tokens(0, 6)));
    assertClosed(() -> cache.extendSequence(1, 7));
    assertClosed(() -> cache.blockIds(1, 0));
    assertClosed(() -> cache.sequenceLengths(new long[] {1}));
    assertClosed(() -> cache.slotMapping(0, new long[] {1}));
    assertClosed(() -> cache.removeSequence(1));
    assertClosed(() -> cache.checkAsyncError(0));
    config.close();
    assertClosed(config::getNumLayers);
    assertClosed(() -> config.setNumLayers(3));
    assertClosed(config::copy);
    assertClosed(() -> new Cache(config));
  }

  @Test
  void closeWaitsForCallsInFlightOnOtherThreads() throws Exception {
    for (int round = 0; round < 20; round++) {
      Cache cache = Fixtures.cache(64);
      List<Thread> threads = new ArrayList<>();
      List<Throwable> unexpected = new ArrayList<>();
      for (int t = 0; t < 4; t++) {
        final long base = (long) t << 32;
        Thread th = new Thread(() -> {
          try {
            for (long i = 0; ; i++) {
              cache.addSequence(base + i, Fixtures.tokens((int) i, 5));
              cache.stats();
              cache.removeSequence(base + i);
            }
          } catch (KvCacheException e) {
            if (e.status() != Status.INVALID_STATE) {
              synchronized (unexpected) {
                unexpected.add(e);
              }
            }
          } catch (Throwable e) {
            synchronized (unexpected) {
              unexpected.add(e);
            }
          }
        });
        threads.add(th);
        th.start();
      }
      Thread.sleep(5);
      cache.close();
      for (Thread th : threads) {
        th.join();
      }
      assertTrue(unexpected.isEmpty(), unexpected.toString());
    }
  }
}
