package org.kvcache.tests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;
import org.kvcache.Cache;
import org.kvcache.Config;
import org.kvcache.DType;
import org.kvcache.KvCacheException;
import org.kvcache.KvResourceDescription;
import org.kvcache.Layout;
import org.kvcache.ResourceDescription;
import org.kvcache.Status;

/** Paged KV resources (kv_resource.h): a mixed config described, refusals, bad input. */
class KvResourceTest {
  @Test
  void mixedDescribe() {
    try (Config c = new Config()) {
      assertEquals(0, c.addKvResource(new int[] {0, 2}, 8, 128, DType.BF16, 2, Layout.NHD, 0));
      assertEquals(1, c.addKvResource(new int[] {1}, 4, 64, DType.FP8_E4M3, 2, Layout.NHD, 32));
      KvCacheException e = assertThrows(KvCacheException.class, () -> c.setNumLayers(4));
      assertEquals(Status.INVALID_STATE, e.status());
      e = assertThrows(KvCacheException.class,
          () -> c.addKvResource(new int[] {2}, 8, 128, DType.BF16, 2, Layout.NHD, 0));
      assertEquals(Status.INVALID_ARGUMENT, e.status());
      assertTrue(e.getMessage().contains("already has"), e.getMessage());
      e = assertThrows(KvCacheException.class,
          () -> c.addKvResource(new int[] {}, 8, 128, DType.BF16, 2, Layout.NHD, 0));
      assertTrue(e.getMessage().contains("num_layers must be > 0"), e.getMessage());
      c.setMaxTokens(256);
      try (Cache cache = new Cache(c)) {
        assertEquals(2, cache.describe().numKvResources());
        assertEquals(3, cache.describe().numLayers());
        KvResourceDescription a = cache.describeKvResource(0);
        assertTrue(a.managed());
        assertEquals(ResourceDescription.REASON_MANAGED, a.reason());
        assertEquals(2L * 2 * 16 * 8 * 128 * 2, a.blockBytes());
        KvResourceDescription b = cache.describeKvResource(1);
        assertFalse(b.managed());
        assertEquals(KvResourceDescription.REASON_KV_HEAD_DIM_DIFFERS, b.reason());
        assertTrue(b.reasonText().contains("head_dim"), b.reasonText());
        assertEquals(1, b.managedWith());
        assertEquals(1, b.numLayers());
        assertEquals(4, b.kvHeads());
        assertEquals(64, b.headDim());
        assertEquals(DType.FP8_E4M3, b.dtype());
        assertEquals(2, b.kvFactor());
        assertEquals(Layout.NHD, b.layout());
        assertEquals(32, b.window());
        assertNotEquals(a.pool(), b.pool());
        assertNotEquals(a.group(), b.group());
        e = assertThrows(KvCacheException.class, () -> cache.describeKvResource(2));
        assertEquals(Status.INVALID_ARGUMENT, e.status());
      }
    }
  }

  @Test
  void globalSetterFirst() {
    try (Config c = new Config().setHeadDim(64)) {
      KvCacheException e = assertThrows(KvCacheException.class,
          () -> c.addKvResource(new int[] {0}, 8, 64, DType.BF16, 2, Layout.NHD, 0));
      assertEquals(Status.INVALID_STATE, e.status());
    }
  }
}
