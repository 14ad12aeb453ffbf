package org.kvcache;

import java.util.Arrays;

/**
 * Slot mapping of the tokens added to each sequence of a batch since the
 * previous call: one slot per token ({@code block_id * tokens_per_block +
 * offset}), or -1 for a token whose KV is already cached.
 *
 * <p>Compared by value: {@code equals} and {@code hashCode} compare the
 * arrays' contents. The accessors return the arrays themselves, not copies.
 *
 * @param slots the sequences' slots, one after another
 * @param newTokens slots per sequence
 */
public record SlotMapping(long[] slots, int[] newTokens) {
  /** Equal when both arrays are, element by element. */
  @Override
  public boolean equals(Object o) {
    return o instanceof SlotMapping m && Arrays.equals(slots, m.slots)
        && Arrays.equals(newTokens, m.newTokens);
  }

  @Override
  public int hashCode() {
    return 31 * Arrays.hashCode(slots) + Arrays.hashCode(newTokens);
  }

  @Override
  public String toString() {
    return "SlotMapping[slots=" + Arrays.toString(slots) + ", newTokens="
        + Arrays.toString(newTokens) + "]";
  }
}
