package org.kvcache;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

/**
 * Scratch memory is bounded (Scratch.java): a thread keeps at most
 * RETAINED_BYTES between calls; a call needing more frees the excess when it
 * returns, normally or by an exception; a virtual thread keeps nothing.
 * In package org.kvcache to see Scratch's test hooks.
 */
class ScratchTest {
  private static Cache cache() {
    try (Config c = new Config().setNumLayers(2).setKvHeads(1).setHeadDim(64)
        .setDtype(DType.F32).setTokensPerBlock(4).setMaxTokens(4096)) {
      return new Cache(c);
    }
  }

  /** Runs r on a new platform thread; rethrows what it threw. */
  private static void onNewThread(Runnable r) throws InterruptedException {
    AtomicReference<Throwable> failure = new AtomicReference<>();
    Thread t = new Thread(() -> {
      try {
        r.run();
      } catch (Throwable e) {
        failure.set(e);
      }
    });
    t.start();
    t.join();
    if (failure.get() != null) {
      throw new AssertionError(failure.get());
    }
  }

  @Test
  void largeCallsFreeTheExcessWhenTheyReturn() throws InterruptedException {
    try (Cache cache = cache()) {
      cache.addSequence(7, new int[] {1, 2, 3, 4, 5});
      onNewThread(() -> {
        cache.stats();
        int small = Scratch.keptBytes();
        assertTrue(small > 0 && small <= Scratch.RETAINED_BYTES, "kept " + small);
        assertFalse(Scratch.holdsAllocatedMemory());

        // 20000 ids and their lengths: 240 KB of arguments and results.
        long[] ids = new long[20000];
        Arrays.fill(ids, 7);
        int[] lengths = cache.sequenceLengths(ids);
        assertEquals(5, lengths[19999]);
        assertFalse(Scratch.holdsAllocatedMemory(), "malloc'd scratch held after the call");
        assertTrue(Scratch.keptBytes() <= Scratch.RETAINED_BYTES, "kept " + Scratch.keptBytes());

        // The same through a failing call (unknown id): freed too.
        ids[19999] = 8;
        assertThrows(KvCacheException.class, () -> cache.sequenceLengths(ids));
        assertFalse(Scratch.holdsAllocatedMemory(), "malloc'd scratch held after a failed call");
        assertTrue(Scratch.keptBytes() <= Scratch.RETAINED_BYTES);
      });
    }
  }

  @Test
  void scratchOutsideACallIsRefused() {
    assertThrows(IllegalStateException.class, Scratch::get);
  }

  @Test
  void virtualThreadsKeepNothing() throws Exception {
    java.lang.reflect.Method ofVirtual;
    try {
      ofVirtual = Thread.class.getMethod("startVirtualThread", Runnable.class);
    } catch (NoSuchMethodException e) {
      Assumptions.abort("no virtual threads before Java 21 (running " + Runtime.version() + ")");
      return;
    }
    try (Cache cache = cache()) {
      AtomicReference<Throwable> failure = new AtomicReference<>();
      Thread t = (Thread) ofVirtual.invoke(null, (Runnable) () -> {
        try {
          cache.stats();
          assertEquals(0, Scratch.keptBytes());
          assertFalse(Scratch.holdsAllocatedMemory());
        } catch (Throwable e) {
          failure.set(e);
        }
      });
      t.join();
      if (failure.get() != null) {
        throw new AssertionError(failure.get());
      }
    }
  }
}
