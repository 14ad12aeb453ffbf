package org.kvcache;

import java.util.OptionalLong;

/**
 * One cached block of a {@link Snapshot} (kvc_snapshot_entry_t).
 *
 * @param hash portable hash
 * @param parentHash the previous block's hash, 0 for a first block
 * @param groups layer groups holding a block here (bit g: group g)
 * @param lora the LoRA id of the block's scope, if any
 * @param tier where the block lives
 * @param priority eviction priority (0..100)
 * @param numTokens tokens in the block
 */
public record SnapshotEntry(long hash, long parentHash, long groups, OptionalLong lora, Tier tier,
    int priority, int numTokens) {}
