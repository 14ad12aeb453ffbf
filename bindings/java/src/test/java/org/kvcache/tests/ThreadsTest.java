package org.kvcache.tests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.junit.jupiter.api.Test;
import org.kvcache.Cache;
import org.kvcache.CacheStats;
import org.kvcache.KvCacheException;
import org.kvcache.SequenceOptions;
import org.kvcache.Status;

class ThreadsTest {
  @Test
  void severalThreadsOnOneCache() throws Exception {
    final int threads = 8;
    final int rounds = 300;
    try (Cache cache = Fixtures.cache(512)) {
      ExecutorService pool = Executors.newFixedThreadPool(threads);
      try {
        List<Future<Long>> results = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
          final int me = t;
          results.add(pool.submit(() -> {
            long reused = 0;
            SequenceOptions opts = new SequenceOptions().salt("thread-" + (me % 2));
            int[] shared = Fixtures.tokens(1, 16);
            for (int r = 0; r < rounds; r++) {
              long id = ((long) me << 32) | r;
              reused += cache.addSequence(id, shared, opts);
              cache.commit(id, 16);
              cache.extendSequence(id, 5, 6, 7);
              assertEquals(19, cache.describeSequence(id).numTokens());
              cache.sequenceLengths(new long[] {id});
              cache.slotMapping(0, new long[] {id});
              try {
                cache.removeSequence(id + (1L << 62)); // never exists
              } catch (KvCacheException e) {
                assertEquals(Status.NOT_FOUND, e.status());
                assertTrue(e.nativeMessage().contains(Long.toUnsignedString(id + (1L << 62))),
                    e.nativeMessage());
              }
              cache.removeSequence(id);
            }
            return reused;
          }));
        }
        long reused = 0;
        for (Future<Long> f : results) {
          reused += f.get();
        }
        // Each salt's first commit publishes the 16-token prompt; afterwards
        // every add of it reuses 15 tokens (the last is recomputed) or all
        // 4 blocks are found with the last token recomputed.
        assertTrue(reused > 0);
      } finally {
        pool.shutdown();
      }
      cache.check();
      CacheStats s = cache.stats();
      assertEquals(0, s.numSequences());
      assertEquals(0, s.inUseBlocks());
      assertEquals(s.numBlocks(), s.freeBlocks() + s.cachedBlocks());
    }
  }
}
