package org.kvcache.tests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import org.junit.jupiter.api.Test;
import org.kvcache.Cache;
import org.kvcache.CacheDescription;
import org.kvcache.Config;
import org.kvcache.DType;
import org.kvcache.DeviceKind;
import org.kvcache.GroupDescription;
import org.kvcache.KvCache;
import org.kvcache.KvCacheException;
import org.kvcache.KvcNativeConstants;
import org.kvcache.Layout;
import org.kvcache.LayerView;
import org.kvcache.PoolDescription;
import org.kvcache.Status;

class BasicsTest {
  @Test
  void versionsMatchTheHeaders() {
    assertEquals(KvCache.headerVersionString(), KvCache.versionString());
    assertEquals(KvcNativeConstants.KVC_VERSION_NUMBER, KvCache.version());
    assertEquals(KvcNativeConstants.KVC_ABI_VERSION, KvCache.abiVersion());
    long f = KvCache.features();
    if ((f & KvCache.FEATURE_CUDA_DEVICE) != 0) {
      assertTrue((f & KvCache.FEATURE_CUDA_COMPILED) != 0);
    }
  }

  @Test
  void javaEnumsMatchTheCValues() {
    assertEquals(KvcNativeConstants.KVC_OK, Status.OK.code());
    assertEquals(KvcNativeConstants.KVC_ERR_INVALID_ARGUMENT, Status.INVALID_ARGUMENT.code());
    assertEquals(KvcNativeConstants.KVC_ERR_NOT_FOUND, Status.NOT_FOUND.code());
    assertEquals(KvcNativeConstants.KVC_ERR_ALREADY_EXISTS, Status.ALREADY_EXISTS.code());
    assertEquals(KvcNativeConstants.KVC_ERR_OUT_OF_BLOCKS, Status.OUT_OF_BLOCKS.code());
    assertEquals(KvcNativeConstants.KVC_ERR_BUFFER_TOO_SMALL, Status.BUFFER_TOO_SMALL.code());
    assertEquals(KvcNativeConstants.KVC_ERR_UNSUPPORTED, Status.UNSUPPORTED.code());
    assertEquals(KvcNativeConstants.KVC_ERR_DEVICE, Status.DEVICE.code());
    assertEquals(KvcNativeConstants.KVC_ERR_OUT_OF_MEMORY, Status.OUT_OF_MEMORY.code());
    assertEquals(KvcNativeConstants.KVC_ERR_INVALID_STATE, Status.INVALID_STATE.code());
    assertEquals(KvcNativeConstants.KVC_ERR_INTERNAL, Status.INTERNAL.code());
    for (Status s : Status.values()) {
      if (s != Status.UNKNOWN) {
        assertEquals("KVC_" + (s == Status.OK ? "OK" : "ERR_" + s.name()),
            KvCache.statusString(s.code()));
      }
    }
    assertEquals("KVC_ERR_UNKNOWN", KvCache.statusString(-12345));
    assertEquals(KvcNativeConstants.KVC_DTYPE_F32, DType.F32.code());
    assertEquals(KvcNativeConstants.KVC_DTYPE_F16, DType.F16.code());
    assertEquals(KvcNativeConstants.KVC_DTYPE_BF16, DType.BF16.code());
    assertEquals(KvcNativeConstants.KVC_DTYPE_FP8_E4M3, DType.FP8_E4M3.code());
    assertEquals(KvcNativeConstants.KVC_LAYOUT_NHD, Layout.NHD.code());
    assertEquals(KvcNativeConstants.KVC_LAYOUT_HND, Layout.HND.code());
    assertEquals(KvcNativeConstants.KVC_DEVICE_CPU, DeviceKind.CPU.code());
    assertEquals(KvcNativeConstants.KVC_DEVICE_CUDA, DeviceKind.CUDA.code());
    assertEquals(KvcNativeConstants.KVC_DEFAULT_PRIORITY,
        org.kvcache.SequenceOptions.DEFAULT_PRIORITY);
  }

  @Test
  void configDefaultsAndRoundTrips() {
    try (Config c = new Config()) {
      assertEquals(0, c.getNumLayers());
      assertEquals(DType.BF16, c.getDtype());
      assertEquals(2, c.getKvFactor());
      assertEquals(Layout.NHD, c.getLayout());
      assertEquals(16, c.getTokensPerBlock());
      assertEquals(DeviceKind.CPU, c.getDeviceKind());
      assertEquals(0, c.getDeviceOrdinal());
      assertEquals(0.9, c.getFreeGpuMemoryFraction(), 1e-12);
      assertEquals(35, c.getSecondaryOffloadMinPriority());
      assertTrue(c.getBlockReuse());
      assertTrue(c.getPartialReuse());
      assertTrue(c.getCopyOnPartialReuse());
      assertEquals(0, c.getEventBufferSize());

      c.setNumLayers(4).setKvHeadsPerLayer(8, 8, 4, 4).setHeadDim(128).setDtype(DType.F16)
          .setKvFactor(1).setLayout(Layout.HND).setTokensPerBlock(32)
          .setAttentionWindows(0, 256).setPrimaryBytes(1L << 40).setMaxTokens(5_000_000_000L)
          .setFreeGpuMemoryFraction(0.5).setHostCacheBytes(3L << 33)
          .setSecondaryOffloadMinPriority(50).setBlockReuse(false).setPartialReuse(false)
          .setCopyOnPartialReuse(false).setEventBufferSize(1024)
          .setEventHashSeed(0xfeedface12345678L);
      KvCacheException e =
          assertThrows(KvCacheException.class, () -> c.setEventBufferSize((1 << 24) + 1));
      assertEquals(Status.INVALID_ARGUMENT, e.status());
      assertEquals(4, c.getNumLayers());
      assertEquals(8, c.getKvHeads(1));
      assertEquals(4, c.getKvHeads(3));
      assertEquals(128, c.getHeadDim());
      assertEquals(DType.F16, c.getDtype());
      assertEquals(1, c.getKvFactor());
      assertEquals(Layout.HND, c.getLayout());
      assertEquals(32, c.getTokensPerBlock());
      assertEquals(0, c.getAttentionWindow(2));
      assertEquals(256, c.getAttentionWindow(3));
      assertEquals(1L << 40, c.getPrimaryBytes());
      assertEquals(5_000_000_000L, c.getMaxTokens());
      assertEquals(0.5, c.getFreeGpuMemoryFraction(), 1e-12);
      assertEquals(3L << 33, c.getHostCacheBytes());
      assertEquals(50, c.getSecondaryOffloadMinPriority());
      assertFalse(c.getBlockReuse());
      assertFalse(c.getPartialReuse());
      assertFalse(c.getCopyOnPartialReuse());
      assertEquals(1024, c.getEventBufferSize());
      assertEquals(0xfeedface12345678L, c.getEventHashSeed());

      try (Config copy = c.copy()) {
        c.setNumLayers(7);
        assertEquals(4, copy.getNumLayers());
        assertEquals(DType.F16, copy.getDtype());
      }
    }
  }

  @Test
  void exceptionsCarryStatusAndMessage() {
    try (Config c = new Config()) {
      KvCacheException e = assertThrows(KvCacheException.class, () -> c.setTokensPerBlock(12));
      assertEquals(Status.INVALID_ARGUMENT, e.status());
      assertEquals(-1, e.statusCode());
      assertTrue(e.nativeMessage().contains("tokens_per_block"), e.nativeMessage());
      assertTrue(e.nativeMessage().contains("12"), e.nativeMessage());
      assertTrue(e.getMessage().startsWith("INVALID_ARGUMENT: "), e.getMessage());
      assertEquals(16, c.getTokensPerBlock(), "a failed setter changes nothing");

      // validate and create fail with the library's message too.
      KvCacheException v = assertThrows(KvCacheException.class, c::validate);
      assertEquals(Status.INVALID_ARGUMENT, v.status());
      assertFalse(v.nativeMessage().isEmpty());
      KvCacheException create = assertThrows(KvCacheException.class, () -> new Cache(c));
      assertEquals(Status.INVALID_ARGUMENT, create.status());
      assertEquals(v.nativeMessage(), create.nativeMessage());

      // Checks done in Java before the native call carry a status too.
      KvCacheException j = assertThrows(KvCacheException.class, () -> c.setNumLayers(-1));
      assertEquals(Status.INVALID_ARGUMENT, j.status());
      assertTrue(j.nativeMessage().contains("num_layers"), j.nativeMessage());
    }
  }

  @Test
  void cudaCacheWithoutAUsableDeviceFailsWithDevice() {
    assumeTrue((KvCache.features() & KvCache.FEATURE_CUDA_DEVICE) == 0,
        "a CUDA device is usable here: creating the cache would succeed");
    try (Config c = Fixtures.config(8).setDevice(DeviceKind.CUDA, 0)) {
      KvCacheException e = assertThrows(KvCacheException.class, () -> new Cache(c));
      assertEquals(Status.DEVICE, e.status());
      assertFalse(e.nativeMessage().isEmpty());
    }
  }

  @Test
  void describeTheCache() {
    try (Cache cache = Fixtures.cache(16)) {
      CacheDescription d = cache.describe();
      assertEquals(DeviceKind.CPU, d.deviceKind());
      assertEquals(DType.F32, d.dtype());
      assertEquals(Layout.NHD, d.layout());
      assertEquals(2, d.numLayers());
      assertEquals(1, d.numGroups());
      assertEquals(1, d.numPools());
      assertEquals(4, d.tokensPerBlock());
      assertEquals(2, d.kvFactor());
      assertEquals(16, d.numBlocks());
      assertEquals(64, d.tokenCapacity());
      // block = 2 layers * 2 (K, V) * 4 tokens * 1 head * 64 dims * 4 bytes
      long blockBytes = 2L * 2 * 4 * 64 * 4;
      assertEquals(16 * blockBytes, d.primaryBytes());

      GroupDescription g = cache.describeGroup(0);
      assertEquals(0, g.window());
      assertEquals(1, g.kvHeads());
      assertEquals(64, g.headDim());
      assertEquals(2, g.numLayers());
      assertEquals(blockBytes, g.blockBytes());
      assertEquals(blockBytes / 4, g.bytesPerToken());

      PoolDescription p = cache.describePool(0);
      assertEquals(16, p.numBlocks());
      assertEquals(blockBytes, p.blockBytes());
      assertTrue(p.base() != 0);

      LayerView v0 = cache.layerView(0);
      LayerView v1 = cache.layerView(1);
      assertEquals(4, v0.elemSize());
      assertEquals(blockBytes, v0.blockStride());
      assertEquals(64 * 4, v0.tokenStride());
      assertEquals(p.base(), v0.base());
      assertEquals(2L * 4 * 64 * 4, v1.base() - v0.base());

      KvCacheException e = assertThrows(KvCacheException.class, () -> cache.describeGroup(5));
      assertEquals(Status.INVALID_ARGUMENT, e.status());
      assertFalse(e.nativeMessage().isEmpty());
      assertThrows(KvCacheException.class, () -> cache.layerView(2));
    }
  }
}
