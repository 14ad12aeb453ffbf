package org.kvcache;

/** Order of tokens and heads inside a block (kvc_layout_t). */
public enum Layout {
  /** [tokens][heads][head_dim] per slab. */
  NHD(1),
  /** [heads][tokens][head_dim] per slab. */
  HND(2);

  private final int code;

  Layout(int code) {
    this.code = code;
  }

  /** The C value (KVC_LAYOUT_*). */
  public int code() {
    return code;
  }

  /** The layout of a C value. */
  public static Layout of(long code) {
    for (Layout l : values()) {
      if (l.code == code) {
        return l;
      }
    }
    throw new KvCacheException(Status.INTERNAL, "unknown layout code " + code);
  }
}
