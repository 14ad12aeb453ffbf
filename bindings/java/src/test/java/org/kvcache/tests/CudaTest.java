package org.kvcache.tests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import org.junit.jupiter.api.Test;
import org.kvcache.Cache;
import org.kvcache.CacheDescription;
import org.kvcache.Config;
import org.kvcache.DType;
import org.kvcache.DecodeArgs;
import org.kvcache.DeviceKind;
import org.kvcache.KvCache;
import org.kvcache.KvCacheException;
import org.kvcache.LayerView;
import org.kvcache.Memory;
import org.kvcache.Status;
import org.kvcache.StoreArgs;

/** A cache in GPU memory through the binding; skipped where no CUDA device is usable. */
class CudaTest {
  @Test
  void cudaCache() {
    assumeTrue((KvCache.features() & KvCache.FEATURE_CUDA_DEVICE) != 0,
        "no usable CUDA device (or the library was built without CUDA)");
    try (Config c = Fixtures.config(16).setDevice(DeviceKind.CUDA, 0).setDtype(DType.BF16);
        Cache cache = new Cache(c)) {
      CacheDescription d = cache.describe();
      assertEquals(DeviceKind.CUDA, d.deviceKind());
      assertEquals(16, d.numBlocks());
      assertTrue(d.deviceTotalBytes() > 0);
      assertTrue(cache.describePool(0).base() != 0);

      // The cache manager is the same on every device.
      assertEquals(0, cache.addSequence(1, Fixtures.tokens(0, 10)));
      cache.commit(1, 10);
      assertEquals(8, cache.addSequence(2, Fixtures.tokens(0, 10)));
      assertEquals(10, cache.slotMapping(0, new long[] {2}).slots().length);
      cache.check();

      // Host buffers are refused where the kernel reads device memory.
      ByteBuffer host = ByteBuffer.allocateDirect(1024).order(ByteOrder.nativeOrder());
      KvCacheException e = assertThrows(KvCacheException.class,
          () -> cache.storeKv(new StoreArgs().layer(0).numTokens(1).srcDtype(DType.BF16)
              .key(Memory.of(host)).value(Memory.of(host)).slotMapping(Memory.of(host))));
      assertEquals(Status.INVALID_ARGUMENT, e.status());
      assertTrue(e.nativeMessage().contains("device addresses"), e.nativeMessage());

      // Block copies take host id arrays and run on the GPU.
      int[] blocks = cache.blockIds(1, 0);
      cache.copyBlocks(0, new int[] {blocks[0]}, new int[] {15}, null);
      cache.checkAsyncError(0);

      // The decode workspace is sized from device addresses (not read here).
      LayerView v = cache.layerView(0);
      Memory any = Memory.address(v.base());
      long bytes = cache.decodeWorkspaceSize(new DecodeArgs().layer(0).batch(64).qHeads(8)
          .qDtype(DType.BF16).query(any).out(any).seqLens(any).paddedTable(any, 4096 / 4)
          .maxSeqLen(4096));
      assertTrue(bytes >= 0);
      cache.removeSequence(1);
      cache.removeSequence(2);
    }
  }
}
