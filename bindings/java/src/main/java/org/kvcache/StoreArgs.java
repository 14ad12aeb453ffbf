package org.kvcache;

/**
 * What {@link Cache#storeKv} writes (kvc_store_args_t): the K (and V) of
 * {@code numTokens} tokens of one layer, token i into slot
 * {@code slotMapping[i]} (-1 skips it). {@code key} and {@code value} are
 * {@code [numTokens][kvHeads][headDim]} of {@code srcDtype}; the slot
 * mapping is int64. On a CPU cache they are host memory (direct buffers,
 * bounds checked); on a CUDA cache, device addresses.
 */
public final class StoreArgs {
  int layer;
  int rank;
  int numTokens;
  DType srcDtype;
  Memory key;
  Memory value;
  Memory slotMapping;
  float kScale = 1.0f;
  float vScale = 1.0f;

  /** Empty arguments: scales 1, nothing else set. */
  public StoreArgs() {}

  /** Model layer. */
  public StoreArgs layer(int layer) {
    this.layer = Args.u32("layer", layer);
    return this;
  }

  /**
   * Tensor parallelism: the rank whose pool is used ({@link Config#setRanks}; its share of
   * the heads, {@link Cache#layerViewRank}); 0 with one rank.
   */
  public StoreArgs rank(int rank) {
    this.rank = Args.u32("rank", rank);
    return this;
  }

  /** Tokens in key, value and slot mapping; 0 is a no-op. */
  public StoreArgs numTokens(int numTokens) {
    this.numTokens = Args.u32("num_tokens", numTokens);
    return this;
  }

  /** Element type of key and value. */
  public StoreArgs srcDtype(DType dtype) {
    this.srcDtype = Args.notNull("src_dtype", dtype);
    return this;
  }

  /** Keys. */
  public StoreArgs key(Memory key) {
    this.key = key;
    return this;
  }

  /** Values; null when the cache's kv factor is 1. */
  public StoreArgs value(Memory value) {
    this.value = value;
    return this;
  }

  /** int64 slots, -1 to skip a token. */
  public StoreArgs slotMapping(Memory slots) {
    this.slotMapping = slots;
    return this;
  }

  /** fp8 quantization scale of K (&gt; 0). */
  public StoreArgs kScale(float scale) {
    this.kScale = scale;
    return this;
  }

  /** fp8 quantization scale of V (&gt; 0). */
  public StoreArgs vScale(float scale) {
    this.vScale = scale;
    return this;
  }
}
