package org.kvcache;

import java.util.concurrent.atomic.AtomicLong;

/**
 * A native handle that closes once and is never used after it is freed,
 * whatever the threads do: every use runs in {@link #call} (or
 * {@link #callLong}, {@link #callInt}, {@link #run}), which counts it in
 * flight for the duration of the native call; {@link #close} marks the
 * handle closed (later calls throw {@link KvCacheException} with
 * {@link Status#INVALID_STATE}), waits for the uses in flight, and only then
 * lets the caller free the native object.
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
  private long acquire() {
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

  private void release() {
    if (state.decrementAndGet() == CLOSED) {
      synchronized (this) {
        notifyAll();
      }
    }
  }

  /** A native call on the address; it may throw (a failing status is a KvCacheException). */
  @FunctionalInterface
  interface Call<T> {
    T apply(long address);
  }

  /** {@link Call} returning a long, without boxing. */
  @FunctionalInterface
  interface LongCall {
    long apply(long address);
  }

  /** {@link Call} returning an int, without boxing. */
  @FunctionalInterface
  interface IntCall {
    int apply(long address);
  }

  /** {@link Call} returning nothing. */
  @FunctionalInterface
  interface Run {
    void apply(long address);
  }

  /**
   * Runs {@code f} on the address between {@link #acquire} and
   * {@link #release}; a failing native call throws out of {@code f} as
   * {@link KvCacheException}. Every use of the handle goes through here or
   * the variants below, so no caller pairs acquire and release by hand.
   * The call is also a {@link Scratch} call: scratch memory above what a
   * thread keeps is freed when the outermost one returns.
   */
  <T> T call(Call<T> f) {
    long address = acquire();
    Scratch scratch = Scratch.enter();
    try {
      return f.apply(address);
    } finally {
      scratch.exit();
      release();
    }
  }

  long callLong(LongCall f) {
    long address = acquire();
    Scratch scratch = Scratch.enter();
    try {
      return f.apply(address);
    } finally {
      scratch.exit();
      release();
    }
  }

  int callInt(IntCall f) {
    long address = acquire();
    Scratch scratch = Scratch.enter();
    try {
      return f.apply(address);
    } finally {
      scratch.exit();
      release();
    }
  }

  void run(Run f) {
    long address = acquire();
    Scratch scratch = Scratch.enter();
    try {
      f.apply(address);
    } finally {
      scratch.exit();
      release();
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
