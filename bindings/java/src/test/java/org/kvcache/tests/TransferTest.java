package org.kvcache.tests;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import org.junit.jupiter.api.Test;
import org.kvcache.Cache;
import org.kvcache.CacheStats;
import org.kvcache.Export;
import org.kvcache.Import;
import org.kvcache.KvCacheException;
import org.kvcache.LayerView;
import org.kvcache.PoolShare;
import org.kvcache.SequenceOptions;
import org.kvcache.Status;
import org.kvcache.TransferDescription;

/**
 * Block export/import between two CPU caches: the bytes copied between the blocks the export
 * and the import name land bit for bit and serve the receiver's adds; another prompt or salt is
 * refused with nothing changed; an abort gives every block back.
 */
class TransferTest {
  /**
   * The test's host memory access (the pools of a CPU cache are host memory): sun.misc.Unsafe's
   * getByte, putByte and copyMemory, reached by reflection (javac -Werror refuses the type).
   */
  private static final Object UNSAFE;
  private static final Method GET_BYTE;
  private static final Method PUT_BYTE;
  private static final Method COPY;

  static {
    try {
      Class<?> c = Class.forName("sun.misc.Unsafe");
      Field f = c.getDeclaredField("theUnsafe");
      f.setAccessible(true);
      UNSAFE = f.get(null);
      GET_BYTE = c.getMethod("getByte", long.class);
      PUT_BYTE = c.getMethod("putByte", long.class, byte.class);
      COPY = c.getMethod("copyMemory", long.class, long.class, long.class);
    } catch (ReflectiveOperationException e) {
      throw new ExceptionInInitializerError(e);
    }
  }

  private static Object invoke(Method m, Object... args) {
    try {
      return m.invoke(UNSAFE, args);
    } catch (ReflectiveOperationException e) {
      throw new AssertionError(e);
    }
  }

  private static long address(Cache cache, int block) {
    LayerView v = cache.layerView(0);
    return v.base() + block * v.blockStride();
  }

  private static byte[] read(Cache cache, int block) {
    long n = cache.describeGroup(0).blockBytes();
    byte[] out = new byte[Math.toIntExact(n)];
    long at = address(cache, block);
    for (int i = 0; i < out.length; i++) {
      out[i] = (Byte) invoke(GET_BYTE, at + i);
    }
    return out;
  }

  /** Adds sequence id, writes a pattern into each full block, commits every token. */
  private static void prefill(Cache cache, long id, int[] prompt) {
    cache.addSequence(id, prompt);
    int[] ids = cache.blockIds(id, 0);
    long n = cache.describeGroup(0).blockBytes();
    for (int b = 0; b < ids.length; b++) {
      long at = address(cache, ids[b]);
      for (int i = 0; i < n; i++) {
        invoke(PUT_BYTE, at + i, (byte) (b * 31 + i * 7));
      }
    }
    cache.commit(id, prompt.length);
  }

  @Test
  void blocksMoveBitForBitAndServeTheReceiversAdds() {
    try (Cache a = Fixtures.cache(64); Cache b = Fixtures.cache(64)) {
      int[] prompt = Fixtures.tokens(100, 6 * 4 + 1);
      prefill(a, 1, prompt);
      try (Export exp = a.exportSequence(1, 0)) {
        TransferDescription d = exp.describe();
        assertEquals(new TransferDescription(1, 4, 1, 6, 0, 24, d.keysBytes()), d);
        byte[] keys = exp.keys();
        assertEquals(d.keysBytes(), keys.length);
        assertEquals("KVCXFERK", new String(keys, 0, 8, StandardCharsets.US_ASCII));
        int[] src = exp.blockIds(0);
        assertEquals(6, src.length);
        try (Import imp = b.importBegin(7, prompt, null, keys)) {
          TransferDescription di = imp.describe();
          assertEquals(new TransferDescription(1, 4, 7, 6, 0, 24, 0), di);
          int[] dst = imp.blockIds(0);
          long bytes = b.describeGroup(0).blockBytes();
          for (int i = 0; i < dst.length; i++) {
            invoke(COPY, address(a, src[i]), address(b, dst[i]), bytes);
          }
          KvCacheException e = assertThrows(KvCacheException.class, () -> imp.complete(1));
          assertEquals(Status.INVALID_ARGUMENT, e.status());
          assertTrue(e.getMessage().contains("expects 6"), e.getMessage());
          imp.complete(dst.length);
          e = assertThrows(KvCacheException.class, imp::abort);
          assertEquals(Status.INVALID_STATE, e.status());
        }
      }
      b.removeSequence(7);
      assertEquals(24, b.addSequence(8, prompt));
      int[] ids = b.blockIds(8, 0);
      int[] src = a.blockIds(1, 0);
      for (int i = 0; i < 6; i++) {
        assertArrayEquals(read(a, src[i]), read(b, ids[i]), "block " + i);
      }
    }
  }

  @Test
  void anotherPromptOrSaltIsRefusedAndAnAbortGivesEverythingBack() {
    try (Cache a = Fixtures.cache(64); Cache b = Fixtures.cache(64)) {
      int[] prompt = Fixtures.tokens(5, 24);
      prefill(a, 1, prompt);
      byte[] keys;
      try (Export exp = a.exportSequence(1, 0)) {
        keys = exp.keys();
      }
      CacheStats before = b.stats();
      int[] other = Arrays.copyOf(prompt, prompt.length);
      other[9]++;
      KvCacheException e = assertThrows(KvCacheException.class,
          () -> b.importBegin(7, other, null, keys));
      assertEquals(Status.INVALID_ARGUMENT, e.status());
      assertTrue(e.getMessage().contains("block 2 differs"), e.getMessage());
      SequenceOptions salted = new SequenceOptions().salt("tenant".getBytes(StandardCharsets.UTF_8));
      e = assertThrows(KvCacheException.class, () -> b.importBegin(7, prompt, salted, keys));
      assertTrue(e.getMessage().contains("another cache salt"), e.getMessage());
      byte[] cut = Arrays.copyOf(keys, keys.length - 1);
      e = assertThrows(KvCacheException.class, () -> b.importBegin(7, prompt, null, cut));
      assertTrue(e.getMessage().contains("truncated"), e.getMessage());
      assertEquals(before, b.stats());

      Import imp = b.importBegin(7, prompt, null, keys);
      assertEquals(1, b.stats().numSequences());
      imp.abort();
      imp.close();
      imp.close();
      assertEquals(before, b.stats());
      e = assertThrows(KvCacheException.class, imp::describe);
      assertEquals(Status.INVALID_STATE, e.status());
    }
  }

  @Test
  void aCacheClosedFirstLeavesHandlesThatOnlyFree() {
    Cache a = Fixtures.cache(64);
    int[] prompt = Fixtures.tokens(9, 8);
    prefill(a, 1, prompt);
    Export exp = a.exportSequence(1, 0);
    a.close();
    assertEquals(2, exp.describe().numBlocks());
    exp.close();
  }

  /**
   * Sharing pool memory with another process is the CUDA backend's
   * (tests/gpu/test_ipc_transfer_gpu.cpp): the CPU backend refuses both calls with the reason;
   * bad indices are named.
   */
  @Test
  void cpuBackendRefusesToSharePoolMemory() {
    try (Cache a = Fixtures.cache(64)) {
      KvCacheException e = assertThrows(KvCacheException.class, () -> a.describePoolShare(0, 0));
      assertEquals(Status.UNSUPPORTED, e.status());
      assertTrue(e.getMessage().contains(
          "the cpu device cannot share pool memory with another process"), e.getMessage());
      e = assertThrows(KvCacheException.class, () -> a.exportPoolChunk(0, 0, 0));
      assertEquals(Status.UNSUPPORTED, e.status());
      e = assertThrows(KvCacheException.class, () -> a.describePoolShare(1, 0));
      assertEquals(Status.INVALID_ARGUMENT, e.status());
      assertTrue(e.getMessage().contains("rank must be < num_ranks (1), got 1"), e.getMessage());
      e = assertThrows(KvCacheException.class, () -> a.exportPoolChunk(0, 9, 0));
      assertEquals(Status.INVALID_ARGUMENT, e.status());
      assertTrue(e.getMessage().contains("pool must be < num_pools (1), got 9"), e.getMessage());
      assertEquals(1, PoolShare.HANDLE_POSIX_FD);
    }
  }
}
