package org.kvcache.examples;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.Random;
import org.kvcache.Config;
import org.kvcache.DType;
import org.kvcache.Memory;
import org.kvcache.StatefulCache;
import org.kvcache.StatefulLayerStats;
import org.kvcache.StatefulOptions;
import org.kvcache.StatefulStats;

/**
 * A beam search loop on kvcache's stateful cache (OpenVINO's stateful mode)
 * with random K/V: a prompt in every beam, then per step a reorder by the
 * surviving beams (only beam table entries move, no K/V), one new token per
 * beam and layer appended in place, and decode attention reading each
 * beam's history through the beam table. At the end the beams are compacted
 * and the decode output must not change.
 */
public final class BeamSearch {
  private static final int LAYERS = 4;
  private static final int KV_HEADS = 2;
  private static final int Q_HEADS = 8;
  private static final int HEAD_DIM = 64;
  private static final int BEAMS = 4;

  private BeamSearch() {}

  private static ByteBuffer random(Random r, int n) {
    ByteBuffer b = ByteBuffer.allocateDirect(4 * n).order(ByteOrder.nativeOrder());
    for (int i = 0; i < n; i++) {
      b.putFloat(r.nextFloat() * 2 - 1);
    }
    return b.flip();
  }

  private static void appendAll(StatefulCache cache, Random r, int tokens) {
    for (int layer = 0; layer < LAYERS; layer++) {
      int n = BEAMS * KV_HEADS * tokens * HEAD_DIM;
      cache.append(layer, tokens, DType.F32, Memory.of(random(r, n)), Memory.of(random(r, n)),
          null);
    }
  }

  public static void main(String[] args) {
    try (Config config = new Config().setNumLayers(LAYERS).setKvHeads(KV_HEADS)
            .setHeadDim(HEAD_DIM).setDtype(DType.F32);
        StatefulCache cache = new StatefulCache(config, new StatefulOptions(BEAMS).growthStep(32))) {
      Random r = new Random(2024);
      appendAll(cache, r, 20); // the prompt, in every beam
      ByteBuffer query = random(r, BEAMS * Q_HEADS * HEAD_DIM);
      ByteBuffer out = ByteBuffer.allocateDirect(query.capacity()).order(ByteOrder.nativeOrder());
      long gathered = 0; // positions a gather of every beam would copy per layer
      for (int step = 0; step < 100; step++) {
        int a = r.nextInt(BEAMS);
        int b = r.nextInt(BEAMS);
        int[] beamIdx = {a, a, b, b}; // the two best beams survive, each forked in two
        cache.reorder(beamIdx);
        int[] lens = cache.lengths(0);
        gathered += (long) BEAMS * lens[0];
        appendAll(cache, r, 1);
        for (int layer = 0; layer < LAYERS; layer++) {
          cache.decode(layer, Q_HEADS, DType.F32, Memory.of(query), Memory.of(out));
        }
        if (step % 25 == 0) {
          System.out.printf("step %d: beams from %s, lengths %s%n", step,
              Arrays.toString(beamIdx), Arrays.toString(lens));
        }
      }
      StatefulStats st = cache.stats();
      System.out.printf("%d reorders moved %d table entries (a gather would have copied %d "
          + "positions per layer); %d bytes held, peak %d, %d layer growths%n", st.reorders(),
          st.tableEntriesCopied(), gathered, st.bytesAllocated(), st.peakBytes(),
          st.reallocations());
      for (int layer = 0; layer < LAYERS; layer++) {
        StatefulLayerStats ls = cache.layerStats(layer);
        System.out.printf("layer %d: capacity %d (offset %d), %d growths%n", layer,
            ls.capacity(), ls.growthOffset(), ls.reallocations());
      }
      ByteBuffer before = ByteBuffer.allocateDirect(out.capacity()).put(out.duplicate()).flip();
      cache.compact();
      cache.decode(LAYERS - 1, Q_HEADS, DType.F32, Memory.of(query), Memory.of(out));
      if (!out.equals(before)) {
        throw new IllegalStateException("decode after compaction differs from decode through "
            + "the beam table");
      }
      System.out.printf("beam 0 saved: %d bytes; compaction kept the output%n",
          cache.exportRow(0).length);
    }
  }
}
