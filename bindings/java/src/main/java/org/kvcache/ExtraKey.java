package org.kvcache;

import java.util.Arrays;
import java.util.Objects;

/**
 * An extra key (e.g. a multimodal item hash) covering tokens
 * [offset, offset + length) of a sequence (kvc_extra_key_t).
 *
 * <p>Compared by value: {@code equals} and {@code hashCode} compare the
 * arrays' contents. The accessors return the arrays themselves, not copies.
 *
 * @param offset first token position covered
 * @param length tokens covered (&gt; 0)
 * @param data the key bytes (copied for each call)
 */
public record ExtraKey(long offset, long length, byte[] data) {
  /** Checks the arguments; the data array is used as given. */
  public ExtraKey {
    Args.count("extra key offset", offset);
    Args.count("extra key length", length);
    Args.notNull("extra key data", data);
  }

  /** Equal when offset, length and the data bytes are. */
  @Override
  public boolean equals(Object o) {
    return o instanceof ExtraKey k && offset == k.offset && length == k.length
        && Arrays.equals(data, k.data);
  }

  @Override
  public int hashCode() {
    return 31 * Objects.hash(offset, length) + Arrays.hashCode(data);
  }

  @Override
  public String toString() {
    return "ExtraKey[offset=" + offset + ", length=" + length + ", data="
        + Arrays.toString(data) + "]";
  }
}
