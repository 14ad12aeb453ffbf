package org.kvcache;

/** Where a primary pool lives (kvc_device_kind_t). */
public enum DeviceKind {
  /** Host memory: the reference backend. */
  CPU(1),
  /** GPU memory of a CUDA device. */
  CUDA(2);

  private final int code;

  DeviceKind(int code) {
    this.code = code;
  }

  /** The C value (KVC_DEVICE_*). */
  public int code() {
    return code;
  }

  /** The device kind of a C value. */
  public static DeviceKind of(long code) {
    for (DeviceKind k : values()) {
      if (k.code == code) {
        return k;
      }
    }
    throw new KvCacheException(Status.INTERNAL, "unknown device kind code " + code);
  }
}
