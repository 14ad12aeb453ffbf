package org.kvcache.tests;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.kvcache.Config;
import org.kvcache.DType;
import org.kvcache.GrowthPolicy;
import org.kvcache.KvCacheException;
import org.kvcache.Layout;
import org.kvcache.Memory;
import org.kvcache.StatefulCache;
import org.kvcache.StatefulLayerStats;
import org.kvcache.StatefulOptions;
import org.kvcache.StatefulStats;
import org.kvcache.StatefulView;
import org.kvcache.Status;

/** The stateful mode on a CPU cache: beam search, compaction, export/import, errors. */
class StatefulTest {
  private static final int B = 4;
  private static final int H = 2;
  private static final int D = 64;

  private static Config config(int layers) {
    return new Config().setNumLayers(layers).setKvHeads(H).setHeadDim(D).setDtype(DType.F32);
  }

  private static ByteBuffer randomF32(Random r, int n) {
    ByteBuffer b = ByteBuffer.allocateDirect(4 * n).order(ByteOrder.nativeOrder());
    for (int i = 0; i < n; i++) {
      b.putFloat(r.nextFloat() * 2 - 1);
    }
    return b.flip();
  }

  /** history[row][kv][head]: the beam's positions, D floats each. */
  private static float[][][][] append(StatefulCache c, float[][][][] hist, Random r, int n) {
    ByteBuffer k = randomF32(r, B * H * n * D);
    ByteBuffer v = randomF32(r, B * H * n * D);
    c.append(0, n, DType.F32, Memory.of(k), Memory.of(v), null);
    float[][][][] next = new float[B][2][H][];
    for (int row = 0; row < B; row++) {
      for (int kv = 0; kv < 2; kv++) {
        ByteBuffer src = kv == 0 ? k : v;
        for (int h = 0; h < H; h++) {
          float[] old = hist[row][kv][h];
          float[] grown = java.util.Arrays.copyOf(old, old.length + n * D);
          for (int i = 0; i < n * D; i++) {
            grown[old.length + i] = src.getFloat(4 * ((row * H + h) * n * D + i));
          }
          next[row][kv][h] = grown;
        }
      }
    }
    return next;
  }

  @Test
  void beamSearchThenCompactionKeepsTheOutput() {
    try (Config cfg = config(1);
        StatefulCache c = new StatefulCache(cfg, new StatefulOptions(B).growthStep(16))) {
      Random r = new Random(3);
      float[][][][] hist = new float[B][2][H][0];
      hist = append(c, hist, r, 5);
      for (int step = 0; step < 40; step++) {
        int[] idx = new int[B];
        for (int i = 0; i < B; i++) {
          idx[i] = r.nextInt(2);
        }
        c.reorder(idx);
        float[][][][] moved = new float[B][][][];
        for (int i = 0; i < B; i++) {
          moved[i] = hist[idx[i]];
        }
        hist = append(c, moved, r, 1);
      }
      int[] lens = c.lengths(0);
      assertArrayEquals(new int[] {45, 45, 45, 45}, lens);
      StatefulView v = c.view(0);
      assertNotEquals(0L, v.beamTable());
      assertEquals(Layout.HND, v.layout());
      assertEquals(45, v.maxLength());
      StatefulStats st = c.stats();
      assertEquals(40, st.reorders());
      assertTrue(st.tableBytes() > 0 && st.peakBytes() >= st.bytesAllocated());

      ByteBuffer q = randomF32(r, B * 4 * D);
      ByteBuffer indirect = ByteBuffer.allocateDirect(q.capacity()).order(ByteOrder.nativeOrder());
      c.decode(0, 4, DType.F32, Memory.of(q), Memory.of(indirect));
      c.compact();
      assertEquals(0L, c.view(0).beamTable());
      ByteBuffer gathered = ByteBuffer.allocateDirect(q.capacity()).order(ByteOrder.nativeOrder());
      c.decode(0, 4, DType.F32, Memory.of(q), Memory.of(gathered));
      assertEquals(indirect, gathered);
      assertEquals(1, c.stats().compactions());
      assertEquals(0, c.decodeWorkspaceSize(0, 4, DType.F32, 0));
      c.checkAsyncError(0);

      // After compaction each row's buffer holds its beam's history: export
      // holds it as the header and then K, V of [heads][length][dim].
      byte[] state = c.exportRow(2);
      ByteBuffer sb = ByteBuffer.wrap(state).order(ByteOrder.nativeOrder());
      int header = state.length - 2 * H * 45 * D * 4;
      for (int kv = 0; kv < 2; kv++) {
        for (int h = 0; h < H; h++) {
          for (int i = 0; i < 45 * D; i++) {
            assertEquals(hist[2][kv][h][i], sb.getFloat(header + 4 * ((kv * H + h) * 45 * D + i)));
          }
        }
      }
    }
  }

  @Test
  void growthTrimExportImportReset() {
    try (Config cfg = config(2);
        StatefulCache c = new StatefulCache(cfg, new StatefulOptions(B).growthStep(8)
            .layout(Layout.NHD).growthPolicy(GrowthPolicy.UNIFORM).maxLength(64)
            .initialLength(0))) {
      Random r = new Random(5);
      for (int i = 0; i < 3; i++) {
        for (int layer = 0; layer < 2; layer++) {
          ByteBuffer k = randomF32(r, B * H * 5 * D);
          c.append(layer, 5, DType.F32, Memory.of(k), Memory.of(k), new int[] {5, 5, 2, 0});
        }
      }
      StatefulLayerStats ls = c.layerStats(1);
      assertEquals(new StatefulLayerStats(1, 16, 0, ls.bytes(), ls.reallocations(),
          ls.lastGrowthLength(), 15), ls);
      assertTrue(ls.reallocations() > 0 && ls.bytes() > 0 && ls.lastGrowthLength() > 0);
      c.trim(1, 3);
      byte[] state = c.exportRow(1);
      c.importRow(3, state);
      assertArrayEquals(new int[] {15, 12, 6, 12}, c.lengths(0));
      assertArrayEquals(state, c.exportRow(3));
      c.trim(StatefulCache.ALL_ROWS, 2);
      assertArrayEquals(new int[] {13, 10, 4, 10}, c.lengths(1));
      c.reset(true);
      assertEquals(0, c.stats().kvBytes());
    }
  }

  @Test
  void errorsCarryStatusAndMessage() {
    try (Config cfg = config(1)) {
      StatefulCache c = new StatefulCache(cfg, new StatefulOptions(B));
      KvCacheException e = assertThrows(KvCacheException.class,
          () -> c.reorder(new int[] {0, 1, 5, 0}));
      assertEquals(Status.INVALID_ARGUMENT, e.status());
      assertTrue(e.nativeMessage().contains("beam_idx[2] = 5 is outside [0, 4)"), e.getMessage());
      e = assertThrows(KvCacheException.class, () -> c.trim(0, 1));
      assertTrue(e.nativeMessage().contains("cannot trim 1 tokens from row 0, which has 0"));
      e = assertThrows(KvCacheException.class, () -> c.view(3));
      assertTrue(e.nativeMessage().contains("layer must be < num_layers (1), got 3"));
      e = assertThrows(KvCacheException.class, () -> c.importRow(0, new byte[] {1, 2, 3}));
      assertTrue(e.nativeMessage().contains("shorter than its 48-byte header"));
      ByteBuffer small = ByteBuffer.allocateDirect(8);
      e = assertThrows(KvCacheException.class,
          () -> c.append(0, 1, DType.F32, Memory.of(small), Memory.of(small), null));
      assertTrue(e.nativeMessage().contains("key needs 2048 bytes"), e.getMessage());
      c.close();
      e = assertThrows(KvCacheException.class, c::stats);
      assertEquals(Status.INVALID_STATE, e.status());
      c.close(); // a second close does nothing
    }
    try (Config cfg = config(1)) {
      KvCacheException e = assertThrows(KvCacheException.class,
          () -> new StatefulCache(cfg, new StatefulOptions(0)));
      assertTrue(e.nativeMessage().contains("batch must be in 1..1024, got 0"));
    }
  }
}
