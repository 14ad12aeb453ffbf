// Main.java
// The user program of tests/outside in Java (see program.c, the reference
// whose output this must print byte for byte).
import org.kvcache.Cache;
import org.kvcache.CacheDescription;
import org.kvcache.CacheStats;
import org.kvcache.Config;
import org.kvcache.DType;
import org.kvcache.DeviceKind;
import org.kvcache.KvCacheException;
import org.kvcache.SlotMapping;
import org.kvcache.Status;

public class Main {
  public static void main(String[] args) {
    try (Config config = new Config().setNumLayers(32).setKvHeads(8).setHeadDim(128)
            .setDtype(DType.BF16).setTokensPerBlock(16).setDevice(DeviceKind.CPU, 0)
            .setMaxTokens(4096);
        Cache cache = new Cache(config)) {
      CacheDescription d = cache.describe();
      System.out.printf("cache: %d layers in %d group, %d tokens per block, %d blocks, %d bytes%n",
          d.numLayers(), d.numGroups(), d.tokensPerBlock(), d.numBlocks(), d.primaryBytes());

      int[] first = new int[1000];
      int[] second = new int[1000];
      for (int i = 0; i < 1000; i++) {
        first[i] = 1000 + i;
        second[i] = i < 512 ? first[i] : 5000 + i;
      }
      System.out.printf("request 1: 1000 prompt tokens, %d cached%n", cache.addSequence(1, first));
      cache.commit(1, 1000);
      System.out.printf("request 2: 1000 prompt tokens, %d cached%n", cache.addSequence(2, second));
      cache.commit(2, 1000);

      long[] ids = {1, 2};
      SlotMapping prompt = cache.slotMapping(0, ids);
      long cachedSlots = java.util.Arrays.stream(prompt.slots()).filter(s -> s == -1).count();
      System.out.printf("prompt slots: %d, %d of them cached%n", prompt.slots().length, cachedSlots);
      int decodeSlots = 0;
      for (int step = 0; step < 10; step++) {
        cache.extendBatch(ids, new int[] {7000 + step, 8000 + step});
        decodeSlots += cache.slotMapping(0, ids).slots().length;
      }
      int[] lengths = cache.sequenceLengths(ids);
      System.out.printf("decode: 10 steps of 2 sequences, %d slots, lengths %d %d%n",
          decodeSlots, lengths[0], lengths[1]);

      CacheStats s = cache.stats();
      System.out.printf("stats: %d reused blocks, %d missed blocks, %d in use, %d sequences%n",
          s.reusedBlocks(), s.missedBlocks(), s.inUseBlocks(), s.numSequences());

      try {
        cache.extendSequence(99, 1);
        throw new AssertionError("extending sequence 99 succeeded");
      } catch (KvCacheException e) {
        if (e.status() != Status.NOT_FOUND) {
          throw e;
        }
        System.out.printf("error: status %d: %s%n", e.statusCode(), e.nativeMessage());
      }

      cache.removeSequence(1);
      cache.removeSequence(2);
      s = cache.stats();
      System.out.printf("removed: %d sequences, %d cached blocks%n", s.numSequences(), s.cachedBlocks());
    }
    System.out.println("closed");
  }
}
