package org.kvcache;

/**
 * Status codes of the C API (kvc_status_t). The C values are never renumbered
 * (common.h); the tests check them against the generated constants.
 */
public enum Status {
  /** Success (KVC_OK). */
  OK(0),
  /** An argument is out of its domain. */
  INVALID_ARGUMENT(-1),
  /** No object with that id. */
  NOT_FOUND(-2),
  /** An object with that id exists. */
  ALREADY_EXISTS(-3),
  /** Not enough free or evictable blocks. */
  OUT_OF_BLOCKS(-4),
  /** A buffer is too small. */
  BUFFER_TOO_SMALL(-5),
  /** Valid, but not supported here. */
  UNSUPPORTED(-6),
  /** The device is missing or failed. */
  DEVICE(-7),
  /** An allocation failed. */
  OUT_OF_MEMORY(-8),
  /** Not allowed in the object's state (also: a closed Java object). */
  INVALID_STATE(-9),
  /** A bug in kvcache. */
  INTERNAL(-100),
  /** A code this binding does not know (a newer library). */
  UNKNOWN(Integer.MIN_VALUE);

  private final int code;

  Status(int code) {
    this.code = code;
  }

  /** The C value (KVC_OK, KVC_ERR_*). */
  public int code() {
    return code;
  }

  /** The status of a C value; {@link #UNKNOWN} for a value not listed here. */
  public static Status of(int code) {
    for (Status s : values()) {
      if (s.code == code && s != UNKNOWN) {
        return s;
      }
    }
    return UNKNOWN;
  }
}
