package org.kvcache;

/**
 * A retention range (kvc_retention_range_t): prompt tokens [start, end) get
 * {@code priority} for {@code durationMs} milliseconds (0: for ever) after
 * their block becomes reusable. A block takes the range holding its first
 * token. Ranges must not overlap; only the last may end at
 * {@link #OPEN_END}. Values are checked by the library.
 *
 * @param start first token position
 * @param end one past the last token, or {@link #OPEN_END}
 * @param priority eviction priority, 0..100
 * @param durationMs how long the priority lasts; 0 for ever
 */
public record RetentionRange(long start, long end, int priority, long durationMs) {
  /** End of a range reaching to the end of the sequence (KVC_RETENTION_OPEN_END). */
  public static final long OPEN_END = -1L;

  /** Checks that the priority fits a uint32. */
  public RetentionRange {
    Args.u32("retention range priority", priority);
  }
}
