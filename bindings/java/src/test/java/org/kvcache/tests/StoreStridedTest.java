package org.kvcache.tests;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import org.junit.jupiter.api.Test;
import org.kvcache.Cache;
import org.kvcache.DType;
import org.kvcache.KvCacheException;
import org.kvcache.Memory;
import org.kvcache.DecodeArgs;
import org.kvcache.Status;
import org.kvcache.StoreArgs;
import org.kvcache.StoreStrides;

/**
 * storeKvStrided reads a model's [batch][kvHeads][n][headDim] tensors (a
 * slice of longer ones) and stores what storeKv stores from the contiguous
 * copy (decode attention over both reads the same bits); refusals name the
 * argument and change nothing.
 */
class StoreStridedTest {
  private static final int BATCH = 2;
  private static final int HEADS = 1;
  private static final int N_ALLOC = 5;
  private static final int FIRST = 1;
  private static final int N = 3;
  private static final int DIM = 64;

  private static ByteBuffer direct(int bytes) {
    return ByteBuffer.allocateDirect(bytes).order(ByteOrder.nativeOrder());
  }

  /** Decode attention of sequence 1 (6 tokens, layer 1) as bytes. */
  private static byte[] attend(Cache cache) {
    ByteBuffer query = direct(4 * 2 * DIM);
    for (int i = 0; i < 2 * DIM; i++) {
      query.putFloat(4 * i, (float) Math.sin(0.1 * i));
    }
    ByteBuffer out = direct(4 * 2 * DIM);
    ByteBuffer lens = direct(4).putInt(0, 6);
    int[] blocks = cache.blockIds(1, 0);
    ByteBuffer table = direct(4 * blocks.length);
    for (int i = 0; i < blocks.length; i++) {
      table.putInt(4 * i, blocks[i]);
    }
    cache.decodeAttention(new DecodeArgs().layer(1).batch(1).qHeads(2).qDtype(DType.F32)
        .query(Memory.of(query)).out(Memory.of(out)).seqLens(Memory.of(lens))
        .paddedTable(Memory.of(table), blocks.length).maxSeqLen(6));
    byte[] bytes = new byte[out.capacity()];
    out.get(0, bytes);
    return bytes;
  }

  @Test
  void stridedEqualsContiguous() {
    try (Cache strided = Fixtures.cache(16); Cache plain = Fixtures.cache(16)) {
      for (Cache c : new Cache[] {strided, plain}) {
        c.addSequence(1, Fixtures.tokens(0, 6));
      }
      ByteBuffer key = direct(4 * BATCH * HEADS * N_ALLOC * DIM);
      ByteBuffer value = direct(key.capacity());
      for (int i = 0; i < key.capacity() / 4; i++) {
        key.putFloat(4 * i, 0.5f * i + 1);
        value.putFloat(4 * i, -i);
      }
      long[] slotArray = plain.slotMapping(0, new long[] {1}).slots();
      ByteBuffer slots = direct(8 * slotArray.length);
      for (int i = 0; i < slotArray.length; i++) {
        slots.putLong(8 * i, slotArray[i]);
      }
      ByteBuffer gk = direct(4 * BATCH * N * HEADS * DIM);
      ByteBuffer gv = direct(gk.capacity());
      int row = 0;
      for (int b = 0; b < BATCH; b++) {
        for (int t = FIRST; t < FIRST + N; t++) {
          for (int h = 0; h < HEADS; h++, row++) {
            for (int d = 0; d < DIM; d++) {
              int at = ((b * HEADS + h) * N_ALLOC + t) * DIM + d;
              gk.putFloat(4 * (row * DIM + d), key.getFloat(4 * at));
              gv.putFloat(4 * (row * DIM + d), value.getFloat(4 * at));
            }
          }
        }
      }
      plain.storeKv(new StoreArgs().layer(1).numTokens(6).srcDtype(DType.F32)
          .key(Memory.of(gk)).value(Memory.of(gv)).slotMapping(Memory.of(slots)));
      StoreStrides strides = new StoreStrides().seqLen(N)
          .key((long) HEADS * N_ALLOC * DIM, DIM, (long) N_ALLOC * DIM)
          .value((long) HEADS * N_ALLOC * DIM, DIM, (long) N_ALLOC * DIM);
      ByteBuffer k = key.duplicate().position(4 * FIRST * DIM).slice().order(ByteOrder.nativeOrder());
      ByteBuffer v = value.duplicate().position(4 * FIRST * DIM).slice()
          .order(ByteOrder.nativeOrder());
      strided.storeKvStrided(new StoreArgs().layer(1).numTokens(6).srcDtype(DType.F32)
          .key(Memory.of(k)).value(Memory.of(v)).slotMapping(Memory.of(slots)), strides);
      byte[] want = attend(plain);
      assertArrayEquals(want, attend(strided));
      assertTrue(want[5] != 0 || want[9] != 0);

      // A buffer shorter than the strides reach, a bad seq_len, a negative
      // stride: refused before the call, nothing written.
      ByteBuffer shortKey = k.duplicate().limit(2000).slice();
      KvCacheException e = assertThrows(KvCacheException.class,
          () -> strided.storeKvStrided(new StoreArgs().layer(1).numTokens(6).srcDtype(DType.F32)
              .key(Memory.of(shortKey)).value(Memory.of(v)).slotMapping(Memory.of(slots)),
              strides));
      assertEquals(Status.INVALID_ARGUMENT, e.status());
      assertTrue(e.getMessage().contains("key needs"), e.getMessage());
      e = assertThrows(KvCacheException.class,
          () -> strided.storeKvStrided(new StoreArgs().layer(1).numTokens(6).srcDtype(DType.F32)
              .key(Memory.of(k)).value(Memory.of(v)).slotMapping(Memory.of(slots)),
              new StoreStrides().seqLen(4).key(0, DIM, DIM).value(0, DIM, DIM)));
      assertTrue(e.getMessage().contains("multiple of seq_len (4)"), e.getMessage());
      assertThrows(KvCacheException.class, () -> new StoreStrides().key(0, -1, 0));
      assertArrayEquals(want, attend(strided));
    }
  }
}
