package org.kvcache;

/** Where a cached block lives (kvc_tier_t), in {@link KvEvent}s and {@link SnapshotEntry}s. */
public enum Tier {
  /** The cache's device (or CPU) pools. */
  PRIMARY(0),
  /** The host tier ({@link Config#setHostCacheBytes(long)}). */
  HOST(1),
  /** The disk tier ({@link Config#setDiskCache(String, long)}): STORED and REMOVED of its records. */
  DISK(2),
  /** A remote store shared by caches: STORED and REMOVED of this cache's own writes. */
  REMOTE(3);

  private final int code;

  Tier(int code) {
    this.code = code;
  }

  /** The C value (KVC_TIER_*). */
  public int code() {
    return code;
  }

  /** The tier of a C value. */
  public static Tier of(long code) {
    for (Tier t : values()) {
      if (t.code == code) {
        return t;
      }
    }
    throw new KvCacheException(Status.INTERNAL, "unknown tier code " + code);
  }
}
