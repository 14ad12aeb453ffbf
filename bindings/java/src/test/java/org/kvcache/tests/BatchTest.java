package org.kvcache.tests;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.IntBuffer;
import java.nio.LongBuffer;
import org.junit.jupiter.api.Test;
import org.kvcache.BlockTable;
import org.kvcache.Cache;
import org.kvcache.CsrTable;
import org.kvcache.KvCacheException;
import org.kvcache.SlotMapping;
import org.kvcache.Status;

class BatchTest {
  private static IntBuffer ints(int n) {
    return ByteBuffer.allocateDirect(4 * n).order(ByteOrder.nativeOrder()).asIntBuffer();
  }

  private static LongBuffer longs(int n) {
    return ByteBuffer.allocateDirect(8 * n).order(ByteOrder.nativeOrder()).asLongBuffer();
  }

  @Test
  void tablesIntoArraysAndDirectBuffers() {
    try (Cache cache = Fixtures.cache(32)) {
      cache.addSequence(10, Fixtures.tokens(0, 9));   // 3 blocks, last has 1 token
      cache.addSequence(20, Fixtures.tokens(100, 4)); // 1 full block
      long[] ids = {10, 20};
      int[] b10 = cache.blockIds(10, 0);
      int[] b20 = cache.blockIds(20, 0);

      // Padded, sized by the binding.
      BlockTable t = cache.blockTable(0, ids, -1);
      assertEquals(2, t.rows());
      assertEquals(3, t.blocksNeeded());
      int w = t.maxBlocks();
      for (int j = 0; j < w; j++) {
        assertEquals(j < 3 ? b10[j] : -1, t.table()[j]);
        assertEquals(j < 1 ? b20[j] : -1, t.table()[w + j]);
      }
      // Padded into an array and into a direct buffer.
      int[] arr = new int[6];
      assertEquals(3, cache.blockTable(0, ids, arr, 3, 0));
      assertArrayEquals(new int[] {b10[0], b10[1], b10[2], b20[0], 0, 0}, arr);
      IntBuffer buf = ints(7);
      buf.position(1);
      assertEquals(3, cache.blockTable(0, ids, buf, 3, 0));
      for (int i = 0; i < 6; i++) {
        assertEquals(arr[i], buf.get(1 + i));
      }
      KvCacheException small = assertThrows(KvCacheException.class,
          () -> cache.blockTable(0, ids, new int[4], 2, 0));
      assertEquals(Status.BUFFER_TOO_SMALL, small.status());
      KvCacheException heap = assertThrows(KvCacheException.class,
          () -> cache.blockTable(0, ids, IntBuffer.allocate(6), 3, 0));
      assertEquals(Status.INVALID_ARGUMENT, heap.status());
      assertThrows(KvCacheException.class, () -> cache.blockTable(0, ids, ints(5), 3, 0));

      // CSR.
      CsrTable csr = cache.blockTableCsr(0, ids);
      assertArrayEquals(new int[] {0, 3, 4}, csr.indptr());
      assertArrayEquals(new int[] {b10[0], b10[1], b10[2], b20[0]}, csr.indices());
      assertArrayEquals(new int[] {1, 4}, csr.lastPageLen());
      int[] p = new int[3];
      int[] x = new int[8];
      int[] l = new int[2];
      assertEquals(4, cache.blockTableCsr(0, ids, p, x, l));
      assertArrayEquals(csr.indptr(), p);
      assertArrayEquals(csr.lastPageLen(), l);
      IntBuffer pb = ints(3);
      IntBuffer xb = ints(4);
      IntBuffer lb = ints(2);
      assertEquals(4, cache.blockTableCsr(0, ids, pb, xb, lb));
      for (int i = 0; i < 4; i++) {
        assertEquals(csr.indices()[i], xb.get(i));
      }
      assertEquals(1, lb.get(0));
      KvCacheException csrSmall = assertThrows(KvCacheException.class,
          () -> cache.blockTableCsr(0, ids, new int[3], new int[3], new int[2]));
      assertEquals(Status.BUFFER_TOO_SMALL, csrSmall.status());

      // Lengths.
      assertArrayEquals(new int[] {9, 4}, cache.sequenceLengths(ids));
      IntBuffer lens = ints(2);
      cache.sequenceLengths(ids, lens);
      assertEquals(9, lens.get(0));
      assertEquals(4, lens.get(1));

      // Slot mapping: the whole prompts first, then nothing new.
      SlotMapping m = cache.slotMapping(0, ids);
      assertArrayEquals(new int[] {9, 4}, m.newTokens());
      assertEquals(13, m.slots().length);
      for (int i = 0; i < 9; i++) {
        assertEquals((long) b10[i / 4] * 4 + i % 4, m.slots()[i]);
      }
      for (int i = 0; i < 4; i++) {
        assertEquals((long) b20[0] * 4 + i, m.slots()[9 + i]);
      }
      assertEquals(0, cache.slotMapping(0, ids).slots().length);

      // One decode step, then its slots into an array and a direct buffer.
      cache.extendBatch(ids, new int[] {77, 88});
      assertArrayEquals(new int[] {10, 5}, cache.sequenceLengths(ids));
      long[] slots = new long[4];
      int[] fresh = new int[2];
      assertEquals(2, cache.slotMapping(0, ids, slots, fresh));
      assertArrayEquals(new int[] {1, 1}, fresh);
      assertEquals((long) b10[2] * 4 + 1, slots[0]);
      cache.extendBatch(ids, new int[] {78, 89});
      LongBuffer sb = longs(4);
      IntBuffer fb = ints(2);
      assertEquals(2, cache.slotMapping(0, ids, sb, fb));
      assertEquals((long) b10[2] * 4 + 2, sb.get(0));
      assertEquals(1, fb.get(1));
      cache.extendBatch(ids, new int[] {79, 90});
      KvCacheException slotsSmall = assertThrows(KvCacheException.class,
          () -> cache.slotMapping(0, ids, new long[1], null));
      assertEquals(Status.BUFFER_TOO_SMALL, slotsSmall.status());
      assertEquals(2, cache.slotMapping(0, ids, new long[2], null), "nothing advanced");

      KvCacheException unknown = assertThrows(KvCacheException.class,
          () -> cache.sequenceLengths(new long[] {10, 99}));
      assertEquals(Status.NOT_FOUND, unknown.status());
      KvCacheException repeated = assertThrows(KvCacheException.class,
          () -> cache.extendBatch(new long[] {10, 10}, new int[] {1, 2}));
      assertEquals(Status.INVALID_ARGUMENT, repeated.status());
      assertThrows(KvCacheException.class,
          () -> cache.extendBatch(new long[] {10}, new int[] {1, 2}));
    }
  }

  @Test
  void tablesGrowPastTheFirstGuess() {
    try (Cache cache = Fixtures.cache(256)) {
      cache.addSequence(1, Fixtures.tokens(0, 4 * 100 + 3)); // 101 blocks
      BlockTable t = cache.blockTable(0, new long[] {1}, -1);
      assertEquals(101, t.blocksNeeded());
      assertArrayEquals(cache.blockIds(1, 0), java.util.Arrays.copyOf(t.table(), 101));
      assertEquals(101, cache.blockTableCsr(0, new long[] {1}).indices().length);
      assertEquals(403, cache.slotMapping(0, new long[] {1}).slots().length);
      assertEquals(101, cache.blockIds(1, 0).length);
    }
  }
}
