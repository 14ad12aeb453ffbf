package org.kvcache.tests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import org.junit.jupiter.api.Test;
import org.kvcache.Cache;
import org.kvcache.DType;
import org.kvcache.DecodeArgs;
import org.kvcache.KvCacheException;
import org.kvcache.Memory;
import org.kvcache.PrefillArgs;
import org.kvcache.SlotMapping;
import org.kvcache.Status;
import org.kvcache.StoreArgs;

/** Store K/V, copy blocks, decode and prefill attention on a CPU cache, checked against Java. */
class KernelsTest {
  private static final int DIM = 64;

  private static ByteBuffer direct(int bytes) {
    return ByteBuffer.allocateDirect(bytes).order(ByteOrder.nativeOrder());
  }

  private static float k(int token, int d) {
    return (float) Math.sin(0.1 * token + 0.01 * d);
  }

  private static float v(int token, int d) {
    return (float) Math.cos(0.2 * token - 0.03 * d);
  }

  private static float q(int head, int d) {
    return (float) (0.05 * (head + 1) * Math.cos(0.07 * d));
  }

  /** Attention of query head h over tokens 0..n-1, in double. */
  private static double[] reference(int head, int n) {
    double scale = 1.0 / Math.sqrt(DIM);
    double[] scores = new double[n];
    double max = Double.NEGATIVE_INFINITY;
    for (int t = 0; t < n; t++) {
      double s = 0;
      for (int d = 0; d < DIM; d++) {
        s += q(head, d) * k(t, d);
      }
      scores[t] = s * scale;
      max = Math.max(max, scores[t]);
    }
    double sum = 0;
    for (int t = 0; t < n; t++) {
      scores[t] = Math.exp(scores[t] - max);
      sum += scores[t];
    }
    double[] out = new double[DIM];
    for (int t = 0; t < n; t++) {
      for (int d = 0; d < DIM; d++) {
        out[d] += scores[t] / sum * v(t, d);
      }
    }
    return out;
  }

  @Test
  void storeThenDecodeMatchesJava() {
    try (Cache cache = Fixtures.cache(16)) {
      final int n = 6;
      final int qHeads = 2;
      cache.addSequence(1, Fixtures.tokens(0, n));
      SlotMapping m = cache.slotMapping(0, new long[] {1});
      assertEquals(n, m.slots().length);

      ByteBuffer key = direct(4 * n * DIM);
      ByteBuffer value = direct(4 * n * DIM);
      FloatBuffer kf = key.asFloatBuffer();
      FloatBuffer vf = value.asFloatBuffer();
      for (int t = 0; t < n; t++) {
        for (int d = 0; d < DIM; d++) {
          kf.put(t * DIM + d, k(t, d));
          vf.put(t * DIM + d, v(t, d));
        }
      }
      ByteBuffer slots = direct(8 * n);
      for (int t = 0; t < n; t++) {
        slots.putLong(8 * t, m.slots()[t]);
      }
      for (int layer = 0; layer < 2; layer++) {
        cache.storeKv(new StoreArgs().layer(layer).numTokens(n).srcDtype(DType.F32)
            .key(Memory.of(key)).value(Memory.of(value)).slotMapping(Memory.of(slots)));
      }
      cache.checkAsyncError(0);

      ByteBuffer query = direct(4 * qHeads * DIM);
      for (int h = 0; h < qHeads; h++) {
        for (int d = 0; d < DIM; d++) {
          query.putFloat(4 * (h * DIM + d), q(h, d));
        }
      }
      ByteBuffer out = direct(4 * qHeads * DIM);
      ByteBuffer lens = direct(4);
      lens.putInt(0, n);
      int[] blocks = cache.blockIds(1, 0);
      ByteBuffer table = direct(4 * blocks.length);
      for (int i = 0; i < blocks.length; i++) {
        table.putInt(4 * i, blocks[i]);
      }
      DecodeArgs args = new DecodeArgs().layer(1).batch(1).qHeads(qHeads).qDtype(DType.F32)
          .query(Memory.of(query)).out(Memory.of(out)).seqLens(Memory.of(lens))
          .paddedTable(Memory.of(table), blocks.length).maxSeqLen(n);
      assertEquals(0, cache.decodeWorkspaceSize(args));
      cache.decodeAttention(args);
      for (int h = 0; h < qHeads; h++) {
        double[] ref = reference(h, n);
        for (int d = 0; d < DIM; d++) {
          assertEquals(ref[d], out.getFloat(4 * (h * DIM + d)), 1e-4, "head " + h + " dim " + d);
        }
      }

      // The same through a CSR table.
      ByteBuffer out2 = direct(4 * qHeads * DIM);
      ByteBuffer indptr = direct(8);
      indptr.putInt(0, 0);
      indptr.putInt(4, blocks.length);
      cache.decodeAttention(new DecodeArgs().layer(1).batch(1).qHeads(qHeads).qDtype(DType.F32)
          .query(Memory.of(query)).out(Memory.of(out2)).seqLens(Memory.of(lens))
          .csrTable(Memory.of(table), Memory.of(indptr)).maxSeqLen(n));
      assertEquals(out, out2);

      // Copy the blocks and decode through the copies: same result.
      int[] copies = {10, 11};
      cache.copyBlocks(0, blocks, copies, null);
      ByteBuffer table2 = direct(8);
      table2.putInt(0, copies[0]);
      table2.putInt(4, copies[1]);
      ByteBuffer out3 = direct(4 * qHeads * DIM);
      cache.decodeAttention(new DecodeArgs().layer(1).batch(1).qHeads(qHeads).qDtype(DType.F32)
          .query(Memory.of(query)).out(Memory.of(out3)).seqLens(Memory.of(lens))
          .paddedTable(Memory.of(table2), 2).maxSeqLen(n));
      assertEquals(out, out3);
    }
  }

  @Test
  void prefillOverACachedPrefixMatchesJava() {
    try (Cache cache = Fixtures.cache(16)) {
      final int n = 6;
      final int qLen = 3;
      final int qHeads = 2;
      cache.addSequence(1, Fixtures.tokens(0, n));
      SlotMapping m = cache.slotMapping(0, new long[] {1});
      ByteBuffer key = direct(4 * n * DIM);
      ByteBuffer value = direct(4 * n * DIM);
      ByteBuffer slots = direct(8 * n);
      for (int t = 0; t < n; t++) {
        for (int d = 0; d < DIM; d++) {
          key.putFloat(4 * (t * DIM + d), k(t, d));
          value.putFloat(4 * (t * DIM + d), v(t, d));
        }
        slots.putLong(8 * t, m.slots()[t]);
      }
      cache.storeKv(new StoreArgs().layer(1).numTokens(n).srcDtype(DType.F32)
          .key(Memory.of(key)).value(Memory.of(value)).slotMapping(Memory.of(slots)));
      // The last 3 tokens are new; every row holds the same query heads.
      ByteBuffer query = direct(4 * qLen * qHeads * DIM);
      for (int i = 0; i < qLen; i++) {
        for (int h = 0; h < qHeads; h++) {
          for (int d = 0; d < DIM; d++) {
            query.putFloat(4 * ((i * qHeads + h) * DIM + d), q(h, d));
          }
        }
      }
      ByteBuffer out = direct(4 * qLen * qHeads * DIM);
      ByteBuffer lse = direct(4 * qLen * qHeads);
      int[] blocks = cache.blockIds(1, 0);
      ByteBuffer table = direct(4 * blocks.length);
      for (int i = 0; i < blocks.length; i++) {
        table.putInt(4 * i, blocks[i]);
      }
      PrefillArgs args = new PrefillArgs().layer(1).qHeads(qHeads).qDtype(DType.F32)
          .sequences(new int[] {0, qLen}, new int[] {n}).query(Memory.of(query))
          .out(Memory.of(out)).lse(Memory.of(lse)).paddedTable(Memory.of(table), blocks.length)
          .maxKvLen(n);
      assertEquals(0, cache.prefillWorkspaceSize(args));
      cache.prefillAttention(args);
      for (int i = 0; i < qLen; i++) {
        for (int h = 0; h < qHeads; h++) {
          double[] ref = reference(h, n - qLen + i + 1);  // causal: tokens 0 .. its position
          for (int d = 0; d < DIM; d++) {
            assertEquals(ref[d], out.getFloat(4 * ((i * qHeads + h) * DIM + d)), 1e-4,
                "row " + i + " head " + h + " dim " + d);
          }
          assertTrue(Float.isFinite(lse.getFloat(4 * (i * qHeads + h))));
        }
      }
      // A q_len above the kv_len is refused with the library's message.
      KvCacheException bad = assertThrows(KvCacheException.class,
          () -> cache.prefillAttention(new PrefillArgs().layer(1).qHeads(qHeads)
              .qDtype(DType.F32).sequences(new int[] {0, qLen}, new int[] {2})
              .query(Memory.of(query)).out(Memory.of(out))
              .paddedTable(Memory.of(table), blocks.length).maxKvLen(n)));
      assertEquals(Status.INVALID_ARGUMENT, bad.status());
      assertTrue(bad.nativeMessage().contains("q_len 3 (qo_indptr) above its kv_len 2"),
          bad.nativeMessage());
    }
  }

  @Test
  void kernelErrors() {
    try (Cache cache = Fixtures.cache(4)) {
      ByteBuffer key = direct(4 * DIM);
      ByteBuffer slots = direct(8);
      slots.putLong(0, 4L * 4); // one past the last slot
      KvCacheException bad = assertThrows(KvCacheException.class,
          () -> cache.storeKv(new StoreArgs().layer(0).numTokens(1).srcDtype(DType.F32)
              .key(Memory.of(key)).value(Memory.of(key)).slotMapping(Memory.of(slots))));
      assertEquals(Status.INVALID_ARGUMENT, bad.status());
      assertTrue(bad.nativeMessage().contains("16"), bad.nativeMessage());

      // Buffers too small for the shape are refused before the native call.
      KvCacheException small = assertThrows(KvCacheException.class,
          () -> cache.storeKv(new StoreArgs().layer(0).numTokens(2).srcDtype(DType.F32)
              .key(Memory.of(key)).value(Memory.of(key)).slotMapping(Memory.of(slots))));
      assertEquals(Status.INVALID_ARGUMENT, small.status());
      assertTrue(small.nativeMessage().contains("key needs"), small.nativeMessage());
      assertThrows(KvCacheException.class, () -> Memory.of(ByteBuffer.allocate(8)));
      assertThrows(KvCacheException.class,
          () -> cache.storeKv(new StoreArgs().layer(5).numTokens(0).srcDtype(DType.F32)));

      KvCacheException copy = assertThrows(KvCacheException.class,
          () -> cache.copyBlocks(0, new int[] {0}, new int[] {9}, null));
      assertEquals(Status.INVALID_ARGUMENT, copy.status());

      ByteBuffer q = direct(4 * 3 * DIM);
      KvCacheException gqa = assertThrows(KvCacheException.class,
          () -> cache.decodeWorkspaceSize(new DecodeArgs().layer(0).batch(1).qHeads(0)
              .qDtype(DType.F32).maxSeqLen(4).paddedTable(Memory.of(q), 1)));
      assertEquals(Status.INVALID_ARGUMENT, gqa.status());
      cache.checkAsyncError(0);
    }
  }
}
