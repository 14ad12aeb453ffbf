package org.kvcache.tests;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;
import org.kvcache.Cache;
import org.kvcache.Config;
import org.kvcache.DType;
import org.kvcache.KvCacheException;
import org.kvcache.ResourceDescription;
import org.kvcache.SnapshotStats;
import org.kvcache.Status;

/** State resources (state.h): describe, n_groups met and not, slots, refusals, bad input. */
class StateTest {
  /** 1 attention layer; SSM 2x4x8 f32, conv 24x4 (n_groups 1), conv 17x4 (local), generic
   *  100 B aligned 512, unpaged 16 B x 32 tokens. */
  private static Cache cache(int slots) {
    try (Config c = new Config().setNumLayers(1).setKvHeads(1).setHeadDim(8)
        .setPrimaryBytes(1 << 20).setMaxStateSlots(slots)) {
      assertEquals(0, c.addSsmState(2, 4, 8, DType.F32));
      assertEquals(1, c.addConvState(24, 4, DType.F32));
      assertEquals(2, c.addConvState(17, 4, DType.F32));
      assertEquals(3, c.addGenericState(100, 512));
      assertEquals(4, c.addUnpagedResource(16, 32));
      assertEquals(5, c.getNumResources());
      assertEquals(slots, c.getMaxStateSlots());
      return new Cache(c);
    }
  }

  @Test
  void describeAndSlots() {
    try (Cache cache = cache(2)) {
      assertEquals(5, cache.describe().numResources());
      assertEquals(2, cache.describe().numStateSlots());
      ResourceDescription conv = cache.describeResource(1);
      assertEquals(ResourceDescription.CONV, conv.kind());
      assertTrue(conv.managed());
      assertEquals(1, conv.nGroups());
      ResourceDescription bad = cache.describeResource(2);
      assertFalse(bad.managed());
      assertEquals(ResourceDescription.REASON_N_GROUPS, bad.reason());
      assertTrue(bad.reasonText().contains("no integer n_groups"), bad.reasonText());
      ResourceDescription ssm = cache.describeResource(0);
      assertArrayEquals(new long[] {128, 32, 4}, ssm.strides());
      assertEquals(DType.F32, ssm.dtype());
      assertNull(cache.describeResource(3).dtype());
      assertEquals(512, cache.describeResource(3).alignment());

      cache.addSequence(1, Fixtures.tokens(0, 3));
      cache.fork(1, 2);
      assertArrayEquals(new int[] {0, 1}, cache.stateSlots(new long[] {1, 2}, 0));
      assertArrayEquals(new int[] {1, 1, 1, 1, 1}, cache.stateSlots(new long[] {2}, Cache.STATE_ALL));
      KvCacheException e = assertThrows(KvCacheException.class,
          () -> cache.addSequence(3, Fixtures.tokens(0, 1)));
      assertEquals(Status.OUT_OF_BLOCKS, e.status());
      assertTrue(e.getMessage().contains("no free state slot"), e.getMessage());
      assertEquals(2, cache.describeResource(4).slotsUsed());
      cache.removeSequence(1);
      assertEquals(1, cache.describeResource(4).slotsUsed());
      cache.check();
      e = assertThrows(KvCacheException.class, () -> cache.rewind(2, 1));
      assertEquals(Status.INVALID_STATE, e.status());
    }
  }

  @Test
  void badInput() {
    try (Config c = new Config()) {
      KvCacheException e = assertThrows(KvCacheException.class,
          () -> c.addSsmState(0, 4, 8, DType.F32));
      assertEquals(Status.INVALID_ARGUMENT, e.status());
      assertTrue(e.getMessage().contains("num_heads must be > 0, got 0"), e.getMessage());
      assertEquals(0, c.getNumResources());
    }
    try (Cache cache = cache(2)) {
      KvCacheException e = assertThrows(KvCacheException.class, () -> cache.describeResource(5));
      assertEquals(Status.INVALID_ARGUMENT, e.status());
      e = assertThrows(KvCacheException.class, () -> cache.stateSlots(new long[] {7}, 0));
      assertEquals(Status.NOT_FOUND, e.status());
    }
  }

  /** State snapshots: publish, reuse up to the snapshot, rewind to it, the counters. */
  @Test
  void snapshotsPublishReuseRewind() {
    try (Config c = new Config().setNumLayers(1).setKvHeads(1).setHeadDim(8).setTokensPerBlock(4)
        .setPrimaryBytes(1 << 20).setMaxStateSlots(4).setMaxStateSnapshots(3)) {
      assertEquals(3, c.getMaxStateSnapshots());
      c.addSsmState(2, 4, 8, DType.F32);
      c.addConvState(24, 4, DType.F32);
      try (Cache cache = new Cache(c)) {
        int[] tokens = Fixtures.tokens(100, 12);
        assertEquals(0, cache.addSequence(1, tokens, 0, 10, null, 0));
        cache.commit(1, 8);
        cache.publishState(1, 8);
        KvCacheException e = assertThrows(KvCacheException.class, () -> cache.publishState(1, 6));
        assertEquals(Status.INVALID_ARGUMENT, e.status());
        assertTrue(e.getMessage().contains("position 6 is not a positive multiple"),
            e.getMessage());
        cache.extendSequence(1, 110, 111);
        e = assertThrows(KvCacheException.class, () -> cache.rewind(1, 3));
        assertEquals(Status.INVALID_STATE, e.status());
        cache.rewind(1, 4);
        cache.removeSequence(1);
        assertEquals(8, cache.addSequence(2, tokens));
        SnapshotStats s = cache.snapshotStats();
        assertEquals(new SnapshotStats(3, 1, 256 + 384, 3 * (256 + 512), 1, 1, 8, 1, 0, 0,
            0, 0, 0, 0, 0, 0), s);
        cache.check();
      }
    }
    try (Config c = new Config().setMaxStateSnapshots(Config.STATE_SNAPSHOTS_NONE)) {
      assertEquals(Config.STATE_SNAPSHOTS_NONE, c.getMaxStateSnapshots());
    }
  }

  /**
   * With a host tier, a quarter of its bytes holds host snapshots (one slot of every resource is
   * 256 + 512 bytes: 4096 host bytes hold one): a full device pool moves its victim there, and a
   * reuse restores it.
   */
  @Test
  void snapshotsOffloadToTheHost() {
    try (Config c = new Config().setNumLayers(1).setKvHeads(1).setHeadDim(8).setTokensPerBlock(4)
        .setPrimaryBytes(1 << 20).setMaxStateSlots(4).setMaxStateSnapshots(1)
        .setHostCacheBytes(4096)) {
      c.addSsmState(2, 4, 8, DType.F32);
      c.addConvState(24, 4, DType.F32);
      try (Cache cache = new Cache(c)) {
        int[] a = Fixtures.tokens(100, 10);
        int[] b = Fixtures.tokens(200, 10);
        assertEquals(0, cache.addSequence(1, a));
        cache.commit(1, 8);
        cache.publishState(1, 8);
        cache.removeSequence(1);
        assertEquals(0, cache.addSequence(2, b));
        cache.commit(2, 8);
        cache.publishState(2, 8); // moves a's snapshot to the host pool
        cache.removeSequence(2);
        assertEquals(8, cache.addSequence(3, a));
        SnapshotStats s = cache.snapshotStats();
        assertEquals(new SnapshotStats(1, 1, 256 + 384, 256 + 512, 2, 1, 8, 0, 0, 0,
            1, 1, 256 + 512, 1, 1, 0), s);
        cache.check();
      }
    }
  }
}
