package org.kvcache;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * Where the members of one transparent C struct lie, measured once from the
 * JNI library, so that a struct the library fills in {@link Scratch} memory
 * is read with plain buffer reads: a record costs one JNI call (the C call
 * itself) instead of one per member through SWIG's getters, plus three for
 * the proxy's life.
 *
 * <p>How it measures: the struct's {@code _init} function, run on a probe
 * buffer, writes {@code struct_size} (the size; that image is also the
 * {@link #prepare template} every call starts from, as {@code _init} would).
 * Then every byte of the probe holds its own offset, so the getter SWIG
 * generated for a member returns a value whose lowest byte (little-endian)
 * is the member's offset. Each offset is checked by writing a known value
 * of the member's declared width there and reading it back through the
 * getter, so a member read with the wrong width fails at class
 * initialization, naming it.
 *
 * @param <T> the SWIG proxy class of the struct
 */
final class StructLayout<T> {
  /** A proxy over memory the caller owns. */
  @FunctionalInterface
  interface Wrap<T> {
    T at(long address);
  }

  @FunctionalInterface
  interface Init<T> {
    void apply(T proxy);
  }

  @FunctionalInterface
  interface LongGetter<T> {
    long get(T proxy);
  }

  @FunctionalInterface
  interface IntGetter<T> {
    int get(T proxy);
  }

  @FunctionalInterface
  interface DoubleGetter<T> {
    double get(T proxy);
  }

  private static final int PROBE_BYTES = 256;

  private final String name;
  private final Wrap<T> wrap;
  private final ByteBuffer probe;
  private final T probeProxy;
  private final byte[] template;
  /** sizeof the struct, as its {@code _init} function writes it. */
  final int size;

  StructLayout(String name, Wrap<T> wrap, Init<T> init) {
    if (ByteOrder.nativeOrder() != ByteOrder.LITTLE_ENDIAN) {
      throw new KvCacheException(Status.UNSUPPORTED, "org.kvcache reads C structs on little-endian machines only");
    }
    this.name = name;
    this.wrap = wrap;
    probe = ByteBuffer.allocateDirect(PROBE_BYTES).order(ByteOrder.nativeOrder());
    probeProxy = wrap.at(KvcNative.kvcj_buffer_address(probe));
    init.apply(probeProxy);
    size = probe.getInt(0);
    if (size < 8 || size >= PROBE_BYTES) {
      throw fail("struct_size " + size + " is outside [8, " + PROBE_BYTES + ")");
    }
    template = new byte[size];
    probe.get(0, template);
  }

  private KvCacheException fail(String what) {
    return new KvCacheException(Status.INTERNAL, "layout of " + name + ": " + what);
  }

  /** Fills the probe so that each byte holds its offset. */
  private void fill() {
    for (int i = 0; i < size; i++) {
      probe.put(i, (byte) i);
    }
  }

  /** The offset a getter's value gives after {@link #fill}, checked against the width. */
  private int locate(long lowByte, int width) {
    int offset = (int) (lowByte & 0xff);
    if (offset + width > size || offset % width != 0) {
      throw fail("a member read as " + width + " bytes at offset " + offset + " of " + size);
    }
    return offset;
  }

  /** Offset of a uint64_t, int64_t, size_t or pointer member. */
  int u64(LongGetter<T> getter) {
    fill();
    int offset = locate(getter.get(probeProxy), 8);
    long known = 0x0123456789abcdefL;
    probe.putLong(offset, known);
    if (getter.get(probeProxy) != known) {
      throw fail("the member at offset " + offset + " is not 8 bytes wide");
    }
    return offset;
  }

  /** Offset of a uint32_t member (SWIG's getter returns it as a long). */
  int u32(LongGetter<T> getter) {
    fill();
    int offset = locate(getter.get(probeProxy), 4);
    int known = 0x89abcdef;
    probe.putLong(offset & ~7, -1L);
    probe.putInt(offset, known);
    if (getter.get(probeProxy) != Integer.toUnsignedLong(known)) {
      throw fail("the member at offset " + offset + " is not a 4-byte unsigned integer");
    }
    return offset;
  }

  /** Offset of an int32_t member. */
  int i32(IntGetter<T> getter) {
    fill();
    int offset = locate(getter.get(probeProxy), 4);
    int known = -123456789;
    probe.putInt(offset, known);
    if (getter.get(probeProxy) != known) {
      throw fail("the member at offset " + offset + " is not a 4-byte signed integer");
    }
    return offset;
  }

  /** Offset of a double member. */
  int f64(DoubleGetter<T> getter) {
    fill();
    int offset = locate(Double.doubleToRawLongBits(getter.get(probeProxy)), 8);
    double known = 0.3125;
    probe.putDouble(offset, known);
    if (getter.get(probeProxy) != known) {
      throw fail("the member at offset " + offset + " is not a double");
    }
    return offset;
  }

  /**
   * Writes the initialized struct ({@code _init}'s image) at {@code offset}
   * of {@code s} and returns a proxy over it for the C call. Take it after
   * the call's last {@link Scratch#alloc}.
   */
  T prepare(Scratch s, int offset) {
    s.putBytes(offset, template);
    return wrap.at(s.address(offset));
  }
}
