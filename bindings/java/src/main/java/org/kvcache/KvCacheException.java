package org.kvcache;

import java.nio.charset.StandardCharsets;

/**
 * A kvcache call failed. Carries the C status and the library's message,
 * which the JNI wrapper reads with kvc_last_error_message() inside the same
 * native call that failed (so no other call, thread or carrier can replace
 * it). Errors found by this binding before a native call (a closed object,
 * a Java array too short) carry a status too, with the binding's message.
 */
public class KvCacheException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final int statusCode;
  private final String nativeMessage;

  /** Called from JNI (kvcj_throw_status); the message bytes are UTF-8. */
  KvCacheException(int statusCode, byte[] message) {
    this(statusCode, new String(message, StandardCharsets.UTF_8));
  }

  KvCacheException(int statusCode, String message) {
    super(format(statusCode, message));
    this.statusCode = statusCode;
    this.nativeMessage = message;
  }

  KvCacheException(Status status, String message) {
    this(status.code(), message);
  }

  private static String format(int statusCode, String message) {
    Status s = Status.of(statusCode);
    String name = s == Status.UNKNOWN ? "status " + statusCode : s.name();
    return message.isEmpty() ? name : name + ": " + message;
  }

  /** The status as an enum ({@link Status#UNKNOWN} for a code this binding does not know). */
  public Status status() {
    return Status.of(statusCode);
  }

  /** The C status value (negative). */
  public int statusCode() {
    return statusCode;
  }

  /** The message alone, as the library wrote it (may be empty). */
  public String nativeMessage() {
    return nativeMessage;
  }
}
