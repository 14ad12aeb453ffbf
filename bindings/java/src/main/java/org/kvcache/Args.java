package org.kvcache;

/** Argument checks shared by the idiomatic classes (before any native call). */
final class Args {
  private Args() {}

  static KvCacheException invalid(String message) {
    return new KvCacheException(Status.INVALID_ARGUMENT, message);
  }

  /** A uint32_t parameter given as a Java int: must be >= 0. */
  static int u32(String name, int value) {
    if (value < 0) {
      throw invalid(name + " must be >= 0, got " + value);
    }
    return value;
  }

  /** A count given as a Java long: must be >= 0. */
  static long count(String name, long value) {
    if (value < 0) {
      throw invalid(name + " must be >= 0, got " + value);
    }
    return value;
  }

  static <T> T notNull(String name, T value) {
    if (value == null) {
      throw invalid(name + " must not be null");
    }
    return value;
  }

  /** A uint32_t value read back from C, as an int (shape values are small). */
  static int toInt(long value) {
    if (value < 0 || value > Integer.MAX_VALUE) {
      throw new KvCacheException(Status.INTERNAL, "value " + value + " does not fit a Java int");
    }
    return (int) value;
  }

  static void range(String name, int length, int from, int count) {
    if (from < 0 || count < 0 || from > length - count) {
      throw invalid(name + ": range [" + from + ", " + from + " + " + count
          + ") is outside an array of " + length);
    }
  }
}
