package org.kvcache;

import java.nio.Buffer;
import java.nio.ByteOrder;
import java.nio.ByteBuffer;
import java.nio.IntBuffer;
import java.nio.LongBuffer;

/**
 * Memory a kernel argument points to: a direct NIO buffer in host memory
 * (bounds checked from its position to its limit) or a raw address, e.g. a
 * CUDA device pointer from another library (not checked: the caller vouches
 * for it). Immutable.
 */
public final class Memory {
  private final Buffer buffer;
  private final long address;
  private final int elemSize;

  private Memory(Buffer buffer, long address, int elemSize) {
    this.buffer = buffer;
    this.address = address;
    this.elemSize = elemSize;
  }

  /** Host memory: the remaining bytes of a direct buffer. */
  public static Memory of(ByteBuffer buffer) {
    return direct(buffer, 1);
  }

  /** Host memory: the remaining ints of a direct, native-order buffer. */
  public static Memory of(IntBuffer buffer) {
    checkOrder(buffer.order());
    return direct(buffer, 4);
  }

  /** Host memory: the remaining longs of a direct, native-order buffer. */
  public static Memory of(LongBuffer buffer) {
    checkOrder(buffer.order());
    return direct(buffer, 8);
  }

  /**
   * A raw address (device memory on a CUDA cache, or host memory the caller
   * owns); 0 is NULL. Nothing can be checked about it.
   */
  public static Memory address(long address) {
    return new Memory(null, address, 1);
  }

  private static void checkOrder(ByteOrder order) {
    if (order != ByteOrder.nativeOrder()) {
      throw Args.invalid("buffer must be in native byte order (" + ByteOrder.nativeOrder() + ")");
    }
  }

  private static Memory direct(Buffer buffer, int elemSize) {
    Args.notNull("buffer", buffer);
    if (!buffer.isDirect()) {
      throw Args.invalid("buffer must be a direct buffer (ByteBuffer.allocateDirect)");
    }
    return new Memory(buffer, 0, elemSize);
  }

  /** Whether this is host memory of a buffer (checked), not a raw address. */
  public boolean isBuffer() {
    return buffer != null;
  }

  /** Bytes available, or -1 for a raw address. */
  long bytes() {
    return buffer == null ? -1 : (long) buffer.remaining() * elemSize;
  }

  Buffer buffer() {
    return buffer;
  }

  /**
   * The address to pass, after checking that {@code needed} bytes fit
   * ({@code needed} < 0: unknown, not checked) and that host memory may be
   * used ({@code device}: the cache is on a GPU, which cannot read it).
   */
  long resolve(String name, long needed, boolean device) {
    if (buffer == null) {
      return address;
    }
    if (device) {
      throw Args.invalid(name + ": a CUDA cache takes device addresses (Memory.address), "
          + "not host buffers");
    }
    if (needed >= 0 && bytes() < needed) {
      throw Args.invalid(name + " needs " + needed + " bytes, the buffer has " + bytes());
    }
    long base = KvcNative.kvcj_buffer_address(buffer);
    return base + (long) buffer.position() * elemSize;
  }

  /** Reads int {@code index} of a buffer-backed region (for checks). */
  int intAt(long index) {
    if (buffer instanceof IntBuffer ib) {
      return ib.get(ib.position() + (int) index);
    }
    ByteBuffer bb = ((ByteBuffer) buffer).duplicate().order(ByteOrder.nativeOrder());
    return bb.getInt(bb.position() + (int) (4 * index));
  }
}
