package org.kvcache.tests;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import org.junit.jupiter.api.Test;
import org.kvcache.Cache;
import org.kvcache.CacheDescription;
import org.kvcache.Config;
import org.kvcache.DType;
import org.kvcache.DecodeArgs;
import org.kvcache.DeviceKind;
import org.kvcache.GroupDescription;
import org.kvcache.KvCacheException;
import org.kvcache.LayerView;
import org.kvcache.Memory;
import org.kvcache.SlotMapping;
import org.kvcache.StoreArgs;

/**
 * Tensor parallelism over 2 CPU ranks: each rank holds one of the 2 kv heads; values written
 * per rank come back per rank through decode attention after a reuse.
 */
class TensorParallelTest {
  private static final int DIM = 64;

  private static ByteBuffer direct(int bytes) {
    return ByteBuffer.allocateDirect(bytes).order(ByteOrder.nativeOrder());
  }

  private static Config config(int kvHeads) {
    return new Config().setNumLayers(1).setKvHeads(kvHeads).setHeadDim(DIM).setDtype(DType.F32)
        .setTokensPerBlock(4).setMaxTokens(64);
  }

  /** Stores K = 0 and V = 10 * (rank + 1) for the tokens just added to {@code id}. */
  private static void store(Cache cache, long id) {
    SlotMapping m = cache.slotMapping(0, new long[] {id});
    int n = m.slots().length;
    ByteBuffer slots = direct(8 * Math.max(1, n));
    for (int t = 0; t < n; t++) {
      slots.putLong(8 * t, m.slots()[t]);
    }
    for (int rank = 0; rank < 2; rank++) {
      ByteBuffer key = direct(4 * Math.max(1, n) * DIM);
      ByteBuffer value = direct(4 * Math.max(1, n) * DIM);
      for (int i = 0; i < n * DIM; i++) {
        value.putFloat(4 * i, 10f * (rank + 1));
      }
      cache.storeKv(new StoreArgs().layer(0).rank(rank).numTokens(n).srcDtype(DType.F32)
          .key(Memory.of(key)).value(Memory.of(value)).slotMapping(Memory.of(slots)));
    }
  }

  @Test
  void twoRanksSplitTheHeadsAndKeepTheirBytesThroughReuse() {
    try (Config c = config(2).setRanks(DeviceKind.CPU, 0, 1)) {
      assertArrayEquals(new int[] {0, 1}, c.getRanks());
      try (Cache cache = new Cache(c)) {
        CacheDescription d = cache.describe();
        assertEquals(2, d.numRanks());
        assertEquals(1, d.maxHeadReplication());
        GroupDescription g = cache.describeGroup(0);
        assertEquals(2, g.kvHeads());
        assertEquals(1, g.kvHeadsPerRank());
        assertEquals(1, g.headReplication());
        for (int rank = 0; rank < 2; rank++) {
          LayerView v = cache.layerViewRank(rank, 0);
          assertEquals(rank, v.rank());
          assertEquals(rank, v.firstKvHead());
          assertEquals(2, v.totalKvHeads());
          assertEquals(1, v.kvHeads());
        }
        int[] tokens = Fixtures.tokens(0, 5);
        cache.addSequence(1, tokens);
        store(cache, 1);
        cache.commit(1, 5);
        cache.removeSequence(1);
        assertEquals(4, cache.addSequence(2, tokens));
        store(cache, 2);
        int[] blocks = cache.blockIds(2, 0);
        ByteBuffer table = direct(4 * blocks.length);
        for (int i = 0; i < blocks.length; i++) {
          table.putInt(4 * i, blocks[i]);
        }
        ByteBuffer lens = direct(4);
        lens.putInt(0, 5);
        for (int rank = 0; rank < 2; rank++) {
          ByteBuffer query = direct(4 * DIM);
          ByteBuffer out = direct(4 * DIM);
          cache.decodeAttention(new DecodeArgs().layer(0).rank(rank).batch(1).qHeads(1)
              .qDtype(DType.F32).query(Memory.of(query)).out(Memory.of(out))
              .seqLens(Memory.of(lens)).paddedTable(Memory.of(table), blocks.length)
              .maxSeqLen(5));
          for (int i = 0; i < DIM; i++) {
            assertEquals(10f * (rank + 1), out.getFloat(4 * i), 1e-5, "rank " + rank);
          }
        }
        assertThrows(KvCacheException.class, () -> cache.layerViewRank(2, 0));
      }
    }
  }

  @Test
  void badRanksAreRefused() {
    try (Config c = config(3)) {
      KvCacheException e =
          assertThrows(KvCacheException.class, () -> c.setRanks(DeviceKind.CPU, 2, 2));
      assertTrue(e.getMessage().contains("both 2"), e.getMessage());
      c.setRanks(DeviceKind.CPU, 0, 1);
      e = assertThrows(KvCacheException.class, () -> new Cache(c));
      assertTrue(e.getMessage().contains("3 kv heads, which 2 ranks"), e.getMessage());
    }
  }
}
