package org.kvcache;

/**
 * Slot mapping of the tokens added to each sequence of a batch since the
 * previous call: one slot per token ({@code block_id * tokens_per_block +
 * offset}), or -1 for a token whose KV is already cached.
 *
 * @param slots the sequences' slots, one after another
 * @param newTokens slots per sequence
 */
public record SlotMapping(long[] slots, int[] newTokens) {}
