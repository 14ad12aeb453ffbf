package org.kvcache;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.IntBuffer;
import java.nio.LongBuffer;

/**
 * Per-thread native memory through which arguments and results cross JNI:
 * the low-level layer takes addresses, and this is where they point.
 *
 * <p>Use, inside a {@link NativeHandle} call (or {@link #scope}): {@code
 * Scratch s = Scratch.get();} then {@link #alloc} every region the call
 * needs, write the inputs, and only then take {@link #address}es (a later
 * alloc may move the memory; what was written moves with it). One call at a
 * time per thread: idiomatic methods never nest their use. {@link #get}
 * outside a call throws, so no memory can outlive one.
 *
 * <p>Memory, bounded: a platform thread keeps one direct buffer of at most
 * {@link #RETAINED_BYTES} (64 KiB, system property {@code
 * org.kvcache.scratch.retainedBytes}) between calls, which is enough for
 * every call but large batch tables and host buffers. A call that needs
 * more gets native memory (malloc) that is freed when the outermost
 * {@link NativeHandle} call of the thread returns. A virtual thread keeps
 * nothing: each call's memory is freed when it returns. So idle threads hold
 * at most RETAINED_BYTES each, and threads that never call hold none.
 */
final class Scratch {
  /** The most a platform thread keeps between calls. */
  static final int RETAINED_BYTES =
      Integer.getInteger("org.kvcache.scratch.retainedBytes", 64 * 1024);
  private static final int INITIAL = 4 * 1024;
  private static final ThreadLocal<Scratch> LOCAL = ThreadLocal.withInitial(Scratch::new);
  private static final java.lang.reflect.Method IS_VIRTUAL = isVirtualMethod();

  /** What this thread may keep between calls: RETAINED_BYTES, or 0 on a virtual thread. */
  private final int retained;
  /** The direct buffer kept between calls, or null. */
  private ByteBuffer kept;
  /** malloc'd address of {@link #bytes} when it is not {@link #kept}, else 0. */
  private long allocated;
  private ByteBuffer bytes;
  private IntBuffer ints;
  private LongBuffer longs;
  private long base;
  private int top;
  /** NativeHandle calls (and scopes) in progress on this thread. */
  private int depth;

  private Scratch() {
    retained = isVirtualThread() ? 0 : Math.max(RETAINED_BYTES, 0);
  }

  private static java.lang.reflect.Method isVirtualMethod() {
    try {
      return Thread.class.getMethod("isVirtual"); // Java 21 (19 preview)
    } catch (NoSuchMethodException e) {
      return null;
    }
  }

  private static boolean isVirtualThread() {
    if (IS_VIRTUAL == null) {
      return false;
    }
    try {
      return (Boolean) IS_VIRTUAL.invoke(Thread.currentThread());
    } catch (ReflectiveOperationException e) {
      return false;
    }
  }

  /** Begins a call on this thread: scratch may be used until {@link #exit}. */
  static Scratch enter() {
    Scratch s = LOCAL.get();
    s.depth++;
    return s;
  }

  /** Ends a call begun by {@link #enter}; the outermost frees what is above the retained size. */
  void exit() {
    if (--depth == 0 && allocated != 0) {
      long a = allocated;
      allocated = 0;
      use(kept);
      KvcNative.kvcj_free(a);
    }
  }

  /** Runs {@code f} as a call of its own (for native calls made outside a NativeHandle). */
  static long scope(NativeHandle.LongCall f) {
    Scratch s = enter();
    try {
      return f.apply(0);
    } finally {
      s.exit();
    }
  }

  /** For tests: the bytes this thread keeps between calls. */
  static int keptBytes() {
    ByteBuffer k = LOCAL.get().kept;
    return k == null ? 0 : k.capacity();
  }

  /** For tests: whether this thread holds malloc'd scratch now. */
  static boolean holdsAllocatedMemory() {
    return LOCAL.get().allocated != 0;
  }

  /** This thread's scratch, emptied; only inside a call (see {@link #enter}). */
  static Scratch get() {
    Scratch s = LOCAL.get();
    if (s.depth == 0) {
      throw new IllegalStateException("Scratch.get() outside a NativeHandle call or Scratch.scope");
    }
    s.top = 0;
    return s;
  }

  /** Makes {@code next} (or nothing) the current buffer. */
  private void use(ByteBuffer next) {
    bytes = next;
    if (next == null) {
      ints = null;
      longs = null;
      base = 0;
      return;
    }
    ints = next.asIntBuffer();
    longs = next.asLongBuffer();
    base = KvcNative.kvcj_buffer_address(next);
    if (base == 0) {
      throw new KvCacheException(Status.INTERNAL, "the JVM gave no address for a direct buffer");
    }
  }

  /** Grows the current buffer to at least {@code capacity} bytes, keeping its first {@code top}. */
  private void grow(long needed) {
    long capacity = bytes == null ? INITIAL : bytes.capacity();
    while (capacity < needed) {
      capacity *= 2;
    }
    capacity = Math.min(capacity, Integer.MAX_VALUE - 16);
    ByteBuffer next;
    long nextAllocated = 0;
    if (capacity <= retained) {
      next = ByteBuffer.allocateDirect((int) capacity);
    } else {
      nextAllocated = KvcNative.kvcj_malloc(capacity);
      if (nextAllocated == 0) {
        throw new KvCacheException(Status.OUT_OF_MEMORY,
            "cannot allocate " + capacity + " bytes of native memory for the call's arguments");
      }
      next = KvcNative.kvcj_direct_buffer(nextAllocated, capacity);
    }
    next.order(ByteOrder.nativeOrder());
    if (bytes != null && top > 0) {
      next.put(0, bytes, 0, top);
    }
    if (allocated != 0) {
      KvcNative.kvcj_free(allocated);
    }
    allocated = nextAllocated;
    if (nextAllocated == 0) {
      kept = next;
    }
    use(next);
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
    if (bytes == null || end > bytes.capacity()) {
      grow(end);
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

  void getBytes(int offset, byte[] dst) {
    bytes.get(offset, dst, 0, dst.length);
  }

  void getInts(int offset, int[] dst, int from, int count) {
    ints.get(offset >> 2, dst, from, count);
  }

  void getLongs(int offset, long[] dst, int from, int count) {
    longs.get(offset >> 3, dst, from, count);
  }
}
