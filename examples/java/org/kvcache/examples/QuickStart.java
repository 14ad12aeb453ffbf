package org.kvcache.examples;

import org.kvcache.BlockTable;
import org.kvcache.Cache;
import org.kvcache.CacheDescription;
import org.kvcache.CacheStats;
import org.kvcache.Config;
import org.kvcache.DType;
import org.kvcache.DeviceKind;
import org.kvcache.KvCache;
import org.kvcache.KvCacheException;
import org.kvcache.SequenceOptions;
import org.kvcache.SlotMapping;
import org.kvcache.Status;

/**
 * kvcache from Java: a small cache in host memory, two requests sharing a
 * system prompt, one decode step, the tables an attention kernel takes, and
 * the statistics. Run: java -Dorg.kvcache.library.path=.../libkvcache_jni.so
 * -cp kvcache-VERSION.jar:kvcache-example-VERSION.jar org.kvcache.examples.QuickStart
 */
public final class QuickStart {
  private QuickStart() {}

  public static void main(String[] args) {
    System.out.println("kvcache " + KvCache.versionString() + " (ABI " + KvCache.abiVersion()
        + ", headers " + KvCache.headerVersionString() + ")");

    try (Config config = new Config()
            .setNumLayers(4)
            .setKvHeads(2)
            .setHeadDim(64)
            .setDtype(DType.F16)
            .setTokensPerBlock(16)
            .setDevice(DeviceKind.CPU, 0)
            .setMaxTokens(4096);
        Cache cache = new Cache(config)) {
      CacheDescription d = cache.describe();
      System.out.printf("cache: %d blocks of %d tokens, %d layers, %d groups, %d bytes%n",
          d.numBlocks(), d.tokensPerBlock(), d.numLayers(), d.numGroups(), d.primaryBytes());

      // Two requests with the same 48-token system prompt, then their own question.
      int[] first = prompt(48, 20, 1000);
      int[] second = prompt(48, 30, 2000);
      SequenceOptions tenant = new SequenceOptions().salt("tenant-a");

      long cached = cache.addSequence(1L, first, tenant);
      System.out.printf("request 1: %d prompt tokens, %d cached%n", first.length, cached);
      // ... the model computes the prompt's KV here, then:
      cache.commit(1L, first.length);

      cached = cache.addSequence(2L, second, tenant);
      System.out.printf("request 2: %d prompt tokens, %d cached (the shared system prompt)%n",
          second.length, cached);
      cache.commit(2L, second.length);

      // The tables for one batched step.
      long[] batch = {1L, 2L};
      SlotMapping slots = cache.slotMapping(0, batch);
      System.out.printf("slot mapping: %d slots, per request %d and %d%n",
          slots.slots().length, slots.newTokens()[0], slots.newTokens()[1]);
      cache.extendBatch(batch, new int[] {7, 8});
      BlockTable table = cache.blockTable(0, batch, -1);
      int[] lengths = cache.sequenceLengths(batch);
      System.out.printf("after one decode step: lengths %d and %d, block table %dx%d%n",
          lengths[0], lengths[1], table.rows(), table.maxBlocks());

      // A failing call throws with the status and the library's message.
      try {
        cache.addSequence(1L, first);
      } catch (KvCacheException e) {
        System.out.println("expected failure: " + e.getMessage());
        if (e.status() != Status.ALREADY_EXISTS) {
          throw e;
        }
      }

      cache.removeSequence(1L);
      cache.removeSequence(2L);
      CacheStats s = cache.stats();
      System.out.printf("stats: free %d, cached %d, in use %d, reused %d, missed %d,"
          + " hit rate %.2f%n", s.freeBlocks(), s.cachedBlocks(), s.inUseBlocks(),
          s.reusedBlocks(), s.missedBlocks(), s.hitRate());
    }
    System.out.println("closed");
  }

  private static int[] prompt(int shared, int own, int seed) {
    int[] tokens = new int[shared + own];
    for (int i = 0; i < shared; i++) {
      tokens[i] = 100 + i;
    }
    for (int i = 0; i < own; i++) {
      tokens[shared + i] = seed + i;
    }
    return tokens;
  }
}
