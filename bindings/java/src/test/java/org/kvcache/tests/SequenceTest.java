package org.kvcache.tests;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;
import org.kvcache.Cache;
import org.kvcache.CacheStats;
import org.kvcache.Config;
import org.kvcache.KvCacheException;
import org.kvcache.SequenceDescription;
import org.kvcache.SequenceOptions;
import org.kvcache.Status;

class SequenceTest {
  /** 4 tokens per block; partial reuse off so only whole blocks are shared. */
  private static Cache wholeBlockCache(int blocks) {
    try (Config c = Fixtures.config(blocks).setPartialReuse(false)) {
      return new Cache(c);
    }
  }

  @Test
  void prefixReuseCounts() {
    try (Cache cache = wholeBlockCache(16)) {
      int[] prompt = Fixtures.tokens(100, 10); // blocks [4][4][2]
      assertEquals(0, cache.addSequence(1, prompt));
      SequenceDescription d1 = cache.describeSequence(1);
      assertEquals(10, d1.numTokens());
      assertEquals(10, d1.promptTokens());
      assertEquals(3, d1.numBlocks());
      // Nothing is reusable before it is committed.
      assertEquals(0, cache.probe(prompt, null));
      cache.commit(1, 10);
      // The two full blocks are now cached; the tail block is not.
      assertEquals(8, cache.probe(prompt, null));

      assertEquals(8, cache.addSequence(2, prompt));
      CacheStats s = cache.stats();
      assertEquals(16, s.numBlocks());
      assertEquals(2, s.reusedBlocks());
      assertEquals(4, s.missedBlocks());
      // Shared: 2 blocks, own tails: 1 each.
      assertEquals(4, s.inUseBlocks());
      assertEquals(12, s.freeBlocks());
      assertEquals(2, s.numSequences());
      assertEquals(8, cache.describeSequence(2).cachedTokens());

      int[] b1 = cache.blockIds(1, 0);
      int[] b2 = cache.blockIds(2, 0);
      assertEquals(3, b1.length);
      assertEquals(3, b2.length);
      assertEquals(b1[0], b2[0]);
      assertEquals(b1[1], b2[1]);
      assertTrue(b1[2] != b2[2]);

      // A prompt that is exactly the two cached blocks: the last token is
      // always recomputed and, without partial reuse, only whole blocks
      // before it count.
      assertEquals(4, cache.probe(Fixtures.tokens(100, 8), null));

      // A different prompt shares nothing.
      assertEquals(0, cache.addSequence(3, Fixtures.tokens(500, 9)));
      cache.removeSequence(1);
      cache.removeSequence(2);
      cache.removeSequence(3);
      s = cache.stats();
      assertEquals(0, s.inUseBlocks());
      assertEquals(0, s.numSequences());
      assertEquals(16, s.freeBlocks() + s.cachedBlocks());
      // After removal the committed blocks stay cached.
      assertEquals(8, cache.probe(prompt, null));
      cache.check();
      cache.resetReuse();
      assertEquals(0, cache.probe(prompt, null));
      assertEquals(0, cache.stats().cachedBlocks());
    }
  }

  @Test
  void partialReuseStopsBeforeTheLastToken() {
    try (Cache cache = Fixtures.cache(16)) { // partial reuse and copy on it: on
      cache.addSequence(1, Fixtures.tokens(100, 10));
      cache.commit(1, 10);
      // Block 1 matches token by token up to the last prompt token.
      assertEquals(7, cache.probe(Fixtures.tokens(100, 8), null));
      assertEquals(7, cache.addSequence(2, Fixtures.tokens(100, 8)));
      // 6 matching tokens then a different one: 4 + 2 reused.
      int[] diverging = Fixtures.tokens(100, 9);
      diverging[6] = -5;
      assertEquals(6, cache.probe(diverging, null));
      cache.check();
    }
  }

  @Test
  void saltIsolation() {
    try (Cache cache = wholeBlockCache(32)) {
      int[] prompt = Fixtures.tokens(7, 9); // two full blocks + 1 token
      SequenceOptions a = new SequenceOptions().salt("tenant-a");
      assertEquals(0, cache.addSequence(1, prompt, a));
      cache.commit(1, 9);
      assertEquals(8, cache.probe(prompt, new SequenceOptions().salt("tenant-a")));
      assertEquals(0, cache.probe(prompt, new SequenceOptions().salt("tenant-b")));
      assertEquals(0, cache.probe(prompt, null), "no salt differs from a salt");
      assertEquals(0, cache.probe(prompt, new SequenceOptions().salt(new byte[0])));
      assertEquals(8, cache.addSequence(2, prompt, new SequenceOptions().salt("tenant-a")));
      assertEquals(0, cache.addSequence(3, prompt, new SequenceOptions().salt("tenant-b")));

      // Absent salt differs from the empty salt.
      assertEquals(0, cache.addSequence(4, prompt));
      cache.commit(4, 9);
      assertEquals(8, cache.probe(prompt, null));
      assertEquals(0, cache.probe(prompt, new SequenceOptions().salt(new byte[0])));

      // No LoRA differs from LoRA 0; equal LoRA ids share.
      assertEquals(0, cache.probe(prompt, new SequenceOptions().lora(0)));
      assertEquals(0, cache.addSequence(5, prompt, new SequenceOptions().lora(0)));
      cache.commit(5, 9);
      assertEquals(8, cache.probe(prompt, new SequenceOptions().lora(0)));
      assertEquals(0, cache.probe(prompt, new SequenceOptions().lora(1)));

      // Extra keys (e.g. an image hash over tokens 2..5) change the scope.
      SequenceOptions img1 = new SequenceOptions().extraKey(2, 4, new byte[] {1, 2, 3});
      SequenceOptions img2 = new SequenceOptions().extraKey(2, 4, new byte[] {9, 9, 9});
      assertEquals(0, cache.addSequence(6, prompt, img1));
      cache.commit(6, 9);
      assertEquals(8, cache.probe(prompt,
          new SequenceOptions().extraKey(2, 4, new byte[] {1, 2, 3})));
      assertEquals(0, cache.probe(prompt, img2));
    }
  }

  @Test
  void outOfBlocksLeavesStateUnchanged() {
    try (Cache cache = wholeBlockCache(6)) {
      assertEquals(0, cache.addSequence(1, Fixtures.tokens(0, 12))); // 3 blocks
      cache.commit(1, 12);
      assertEquals(0, cache.addSequence(2, Fixtures.tokens(50, 8))); // 2 full blocks
      CacheStats before = cache.stats();
      SequenceDescription d1 = cache.describeSequence(1);
      SequenceDescription d2 = cache.describeSequence(2);
      int[] blocks1 = cache.blockIds(1, 0);
      int[] blocks2 = cache.blockIds(2, 0);

      KvCacheException add = assertThrows(KvCacheException.class,
          () -> cache.addSequence(3, Fixtures.tokens(900, 8)));
      assertEquals(Status.OUT_OF_BLOCKS, add.status());
      assertTrue(!add.nativeMessage().isEmpty());
      KvCacheException ext = assertThrows(KvCacheException.class,
          () -> cache.extendSequence(2, Fixtures.tokens(60, 12)));
      assertEquals(Status.OUT_OF_BLOCKS, ext.status());
      KvCacheException batch = assertThrows(KvCacheException.class,
          () -> cache.extendBatch(new long[] {1, 2}, new int[] {5, 6}));
      assertTrue(batch.status() == Status.OUT_OF_BLOCKS, batch.getMessage());

      assertEquals(before, cache.stats());
      assertEquals(d1, cache.describeSequence(1));
      assertEquals(d2, cache.describeSequence(2));
      assertArrayEquals(blocks1, cache.blockIds(1, 0));
      assertArrayEquals(blocks2, cache.blockIds(2, 0));
      assertThrows(KvCacheException.class, () -> cache.describeSequence(3));
      cache.check();

      // blocks_needed agrees with what fails.
      assertEquals(3, cache.blocksNeeded(2, 12));
      assertEquals(1, cache.blocksNeeded(2, 2));
      assertEquals(0, cache.blocksNeeded(2, 0));
    }
  }

  @Test
  void errorsNameTheProblem() {
    try (Cache cache = wholeBlockCache(8)) {
      cache.addSequence(1, Fixtures.tokens(0, 5));
      KvCacheException dup = assertThrows(KvCacheException.class,
          () -> cache.addSequence(1, Fixtures.tokens(0, 5)));
      assertEquals(Status.ALREADY_EXISTS, dup.status());
      assertTrue(dup.nativeMessage().contains("1"), dup.nativeMessage());
      KvCacheException missing = assertThrows(KvCacheException.class,
          () -> cache.removeSequence(42));
      assertEquals(Status.NOT_FOUND, missing.status());
      assertTrue(missing.nativeMessage().contains("42"), missing.nativeMessage());
      KvCacheException empty = assertThrows(KvCacheException.class,
          () -> cache.addSequence(2, new int[0]));
      assertEquals(Status.INVALID_ARGUMENT, empty.status());
      KvCacheException commit = assertThrows(KvCacheException.class,
          () -> cache.commit(1, 6));
      assertEquals(Status.INVALID_ARGUMENT, commit.status());
      KvCacheException rewind = assertThrows(KvCacheException.class,
          () -> cache.rewind(1, 6));
      assertEquals(Status.INVALID_ARGUMENT, rewind.status());
      KvCacheException priority = assertThrows(KvCacheException.class,
          () -> cache.addSequence(3, Fixtures.tokens(0, 5),
              new SequenceOptions().promptPriority(101)));
      assertEquals(Status.INVALID_ARGUMENT, priority.status());
      KvCacheException nullTokens = assertThrows(KvCacheException.class,
          () -> cache.addSequence(4, null));
      assertEquals(Status.INVALID_ARGUMENT, nullTokens.status());
      assertThrows(KvCacheException.class, () -> cache.extendSequence(1, (int[]) null));
      assertThrows(KvCacheException.class, () -> cache.probe(null, null));
      assertThrows(KvCacheException.class,
          () -> cache.addSequence(4, Fixtures.tokens(0, 5), 3, 5, null, 0));
      assertThrows(KvCacheException.class, () -> new SequenceOptions().extraKey(0, 1, null));
      // Ids are full 64-bit values.
      cache.addSequence(-1L, Fixtures.tokens(0, 3));
      cache.addSequence(Long.MIN_VALUE, Fixtures.tokens(0, 3));
      assertEquals(3, cache.describeSequence(-1L).numTokens());
      cache.removeSequence(Long.MIN_VALUE);
    }
  }

  @Test
  void extendRewindForkPin() {
    try (Cache cache = wholeBlockCache(16)) {
      cache.addSequence(1, Fixtures.tokens(0, 6), new SequenceOptions().promptPriority(80)
          .decodePriority(10));
      SequenceDescription d = cache.describeSequence(1);
      assertEquals(80, d.promptPriority());
      assertEquals(10, d.decodePriority());
      cache.extendSequence(1, 6, 7, 8);
      assertEquals(9, cache.describeSequence(1).numTokens());
      assertEquals(3, cache.describeSequence(1).numBlocks());
      cache.rewind(1, 2);
      assertEquals(7, cache.describeSequence(1).numTokens());
      assertEquals(2, cache.describeSequence(1).numBlocks());
      cache.commit(1, 7);
      assertEquals(7, cache.describeSequence(1).committedTokens());

      cache.fork(1, 2);
      assertArrayEquals(cache.blockIds(1, 0), cache.blockIds(2, 0));
      assertEquals(7, cache.describeSequence(2).numTokens());
      cache.extendSequence(2, 100);
      int[] b1 = cache.blockIds(1, 0);
      int[] b2 = cache.blockIds(2, 0);
      assertEquals(b1[0], b2[0]);
      assertTrue(b1[1] != b2[1], "the shared tail is copied before a write");

      int[] out = new int[4];
      assertEquals(2, cache.blockIds(1, 0, out, 1));
      assertEquals(b1[0], out[1]);
      KvCacheException small = assertThrows(KvCacheException.class,
          () -> cache.blockIds(1, 0, new int[1], 0));
      assertEquals(Status.BUFFER_TOO_SMALL, small.status());

      cache.pin(1);
      assertThrows(KvCacheException.class, () -> cache.pin(1));
      cache.removeSequence(1);
      assertEquals(1, cache.stats().numPinned());
      cache.unpin(1);
      assertEquals(0, cache.stats().numPinned());
      KvCacheException unpin = assertThrows(KvCacheException.class, () -> cache.unpin(1));
      assertEquals(Status.NOT_FOUND, unpin.status());
      cache.check();
    }
  }
}
