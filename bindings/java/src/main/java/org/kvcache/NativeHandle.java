package org.kvcache;

import java.util.concurrent.atomic.AtomicLong;

/**
 * A native handle that closes once and is never used after it is freed,
 * whatever the threads do: every use runs between {@link #acquire} and
 * {@link #release}; {@link #close} marks the handle closed (later acquires
 * throw {@link KvCacheException} with {@link Status#INVALID_STATE}), waits
 * for the uses in flight, and only then lets the caller free the native
 * object.
 */
final class NativeHandle {
  private static final long CLOSED = 1L << 62;

  private final AtomicLong state = new AtomicLong();
  private final long address;
  private final String what;

  NativeHandle(long address, String what) {
    this.address = address;
    this.what = what;
  }

  /** The address, counted as in use until {@link #release}. */
  long acquire() {
    for (;;) {
      long s = state.get();
      if ((s & CLOSED) != 0) {
        throw new KvCacheException(Status.INVALID_STATE, what + " is closed");
      }
      if (state.compareAndSet(s, s + 1)) {
        return address;
      }
    }
  }

  void release() {
    if (state.decrementAndGet() == CLOSED) {
      synchronized (this) {
        notifyAll();
      }
    }
  }

  boolean isClosed() {
    return (state.get() & CLOSED) != 0;
  }

  /**
   * Closes the handle and waits until no use is in flight. Returns the
   * address to free for the first close, 0 for every later one.
   */
  long close() {
    for (;;) {
      long s = state.get();
      if ((s & CLOSED) != 0) {
        return 0;
      }
      if (state.compareAndSet(s, s | CLOSED)) {
        break;
      }
    }
    boolean interrupted = false;
    synchronized (this) {
      while (state.get() != CLOSED) {
        try {
          wait();
        } catch (InterruptedException e) {
          interrupted = true;
        }
      }
    }
    if (interrupted) {
      Thread.currentThread().interrupt();
    }
    return address;
  }
}
