package org.kvcache;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.IntBuffer;
import java.nio.LongBuffer;

/**
 * Per-thread native memory through which arguments and results cross JNI:
 * the low-level layer takes addresses, and this is where they point.
 *
 * <p>Use: {@code Scratch s = Scratch.get();} then {@link #alloc} every region
 * the call needs, write the inputs, and only then take {@link #address}es
 * (a later alloc may move the memory; what was written moves with it). One
 * call at a time per thread: idiomatic methods never nest their use. The
 * buffer grows as needed and is kept for the thread's life.
 */
final class Scratch {
  private static final int INITIAL = 64 * 1024;
  private static final ThreadLocal<Scratch> LOCAL = ThreadLocal.withInitial(Scratch::new);

  private ByteBuffer bytes;
  private IntBuffer ints;
  private LongBuffer longs;
  private long base;
  private int top;

  private Scratch() {
    reallocate(INITIAL);
  }

  /** This thread's scratch, emptied. */
  static Scratch get() {
    Scratch s = LOCAL.get();
    s.top = 0;
    return s;
  }

  private void reallocate(int capacity) {
    ByteBuffer next = ByteBuffer.allocateDirect(capacity).order(ByteOrder.nativeOrder());
    if (bytes != null) {
      next.put(0, bytes, 0, top);
    }
    bytes = next;
    ints = next.asIntBuffer();
    longs = next.asLongBuffer();
    base = KvcNative.kvcj_buffer_address(next);
    if (base == 0) {
      throw new KvCacheException(Status.INTERNAL, "the JVM gave no address for a direct buffer");
    }
  }

  /**
   * Reserves {@code size} bytes aligned to 8 (not zeroed) and returns their
   * offset.
   */
  int alloc(long size) {
    if (size < 0) {
      throw new KvCacheException(Status.INVALID_ARGUMENT, "negative size " + size);
    }
    long start = (top + 7L) & ~7L;
    long end = start + Math.max(size, 8L);
    if (end > Integer.MAX_VALUE - 16) {
      throw new KvCacheException(Status.OUT_OF_MEMORY,
          "arguments of " + size + " bytes do not fit a Java direct buffer");
    }
    if (end > bytes.capacity()) {
      long capacity = bytes.capacity();
      while (capacity < end) {
        capacity *= 2;
      }
      reallocate((int) Math.min(capacity, Integer.MAX_VALUE - 16));
    }
    top = (int) end;
    return (int) start;
  }

  /** Native address of an offset; take it after the last alloc of the call. */
  long address(int offset) {
    return base + offset;
  }

  int getInt(int offset) {
    return bytes.getInt(offset);
  }

  long getUnsignedInt(int offset) {
    return Integer.toUnsignedLong(bytes.getInt(offset));
  }

  long getLong(int offset) {
    return bytes.getLong(offset);
  }

  double getDouble(int offset) {
    return bytes.getDouble(offset);
  }

  boolean getBool(int offset) {
    return bytes.get(offset) != 0;
  }

  void putLong(int offset, long value) {
    bytes.putLong(offset, value);
  }

  void putInts(int offset, int[] src, int from, int count) {
    ints.put(offset >> 2, src, from, count);
  }

  void putLongs(int offset, long[] src, int from, int count) {
    longs.put(offset >> 3, src, from, count);
  }

  void putBytes(int offset, byte[] src) {
    bytes.put(offset, src, 0, src.length);
  }

  void getInts(int offset, int[] dst, int from, int count) {
    ints.get(offset >> 2, dst, from, count);
  }

  void getLongs(int offset, long[] dst, int from, int count) {
    longs.get(offset >> 3, dst, from, count);
  }
}
