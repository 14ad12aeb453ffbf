package org.kvcache.tests;

import org.kvcache.Cache;
import org.kvcache.Config;
import org.kvcache.DType;

/** Small CPU caches for the tests. */
final class Fixtures {
  static final int TOKENS_PER_BLOCK = 4;

  private Fixtures() {}

  /** 2 layers, 1 kv head of dim 64, f32, 4 tokens per block, {@code blocks} blocks. */
  static Config config(int blocks) {
    return new Config()
        .setNumLayers(2)
        .setKvHeads(1)
        .setHeadDim(64)
        .setDtype(DType.F32)
        .setTokensPerBlock(TOKENS_PER_BLOCK)
        .setMaxTokens((long) blocks * TOKENS_PER_BLOCK);
  }

  static Cache cache(int blocks) {
    try (Config c = config(blocks)) {
      return new Cache(c);
    }
  }

  /** Tokens start, start + 1, ... (count of them). */
  static int[] tokens(int start, int count) {
    int[] t = new int[count];
    for (int i = 0; i < count; i++) {
      t[i] = start + i;
    }
    return t;
  }
}
