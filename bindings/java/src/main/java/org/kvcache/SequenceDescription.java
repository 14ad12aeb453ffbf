package org.kvcache;

/**
 * State of one sequence (kvc_sequence_desc_t).
 *
 * @param promptPriority priority of its prompt blocks
 * @param decodePriority priority of its generated blocks
 * @param numTokens current length
 * @param promptTokens length of the prompt given to add
 * @param cachedTokens prompt tokens reused at add
 * @param committedTokens tokens committed as computed
 * @param numBlocks block positions (blocks per layer group)
 */
public record SequenceDescription(int promptPriority, int decodePriority, long numTokens,
    long promptTokens, long cachedTokens, long committedTokens, long numBlocks) {}
