package org.kvcache;

/** Element type of stored K/V (kvc_dtype_t). */
public enum DType {
  /** IEEE float32. */
  F32(1, 4),
  /** IEEE float16. */
  F16(2, 2),
  /** bfloat16. */
  BF16(3, 2),
  /** float8 e4m3 with a per-tensor scale. */
  FP8_E4M3(4, 1);

  private final int code;
  private final int size;

  DType(int code, int size) {
    this.code = code;
    this.size = size;
  }

  /** The C value (KVC_DTYPE_*). */
  public int code() {
    return code;
  }

  /** Bytes per element. */
  public int size() {
    return size;
  }

  /** The dtype of a C value. */
  public static DType of(long code) {
    for (DType d : values()) {
      if (d.code == code) {
        return d;
      }
    }
    throw new KvCacheException(Status.INTERNAL, "unknown dtype code " + code);
  }
}
