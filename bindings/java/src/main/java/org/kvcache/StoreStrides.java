package org.kvcache;

/**
 * Where {@link Cache#storeKvStrided} reads each token's K and V
 * (kvc_store_strides_t): token i is token {@code i % seqLen} of source
 * sequence {@code i / seqLen} ({@code seqLen} 0: one sequence), and head h of
 * it starts at element {@code b * seq + t * token + h * head} of the key
 * (the value likewise); the head dimension is contiguous. Strides count
 * elements of the source dtype and must be &gt;= 0 here (buffers are checked
 * against what they reach). A model's {@code [batch][kvHeads][n][headDim]}
 * tensor with strides {@code (s0, s1, s2, 1)} is
 * {@code seqLen(n).key(s0, s2, s1)}.
 */
public final class StoreStrides {
  int seqLen;
  final long[] key = new long[3];
  final long[] value = new long[3];

  /** Zero strides, one sequence: set the strides before use. */
  public StoreStrides() {}

  /** Tokens per source sequence; 0 means all tokens (one sequence). */
  public StoreStrides seqLen(int seqLen) {
    this.seqLen = Args.u32("seq_len", seqLen);
    return this;
  }

  /** Element strides of the key between sequences, tokens and heads. */
  public StoreStrides key(long seq, long token, long head) {
    set(key, "key", seq, token, head);
    return this;
  }

  /** Element strides of the value (unread when the kv factor is 1). */
  public StoreStrides value(long seq, long token, long head) {
    set(value, "value", seq, token, head);
    return this;
  }

  private static void set(long[] to, String name, long seq, long token, long head) {
    if (seq < 0 || token < 0 || head < 0) {
      throw Args.invalid(name + " strides must be >= 0, got (" + seq + ", " + token + ", "
          + head + ")");
    }
    to[0] = seq;
    to[1] = token;
    to[2] = head;
  }

  /** Bytes from element 0 to the end of the farthest head row addressed. */
  long reach(long[] strides, long sequences, long tokens, long heads, long headDim,
      long elemSize) {
    long last = headDim;
    last = Math.addExact(last, Math.multiplyExact(strides[0], Math.max(sequences - 1, 0)));
    last = Math.addExact(last, Math.multiplyExact(strides[1], Math.max(tokens - 1, 0)));
    last = Math.addExact(last, Math.multiplyExact(strides[2], Math.max(heads - 1, 0)));
    return Math.multiplyExact(last, elemSize);
  }
}
