package org.kvcache;

/**
 * An extra key (e.g. a multimodal item hash) covering tokens
 * [offset, offset + length) of a sequence (kvc_extra_key_t).
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
}
