package org.kvcache;

/**
 * What an export or an import covers (kvc_transfer_desc_t; {@link Export#describe},
 * {@link Import#describe}).
 *
 * @param numGroups layer groups
 * @param tokensPerBlock tokens per block
 * @param seqId the sequence exported, or the import's
 * @param numBlocks full blocks the key blob names (prompt positions 0 to numBlocks - 1)
 * @param firstBlock export: 0; import: the first position the caller writes
 * @param numTokens numBlocks * tokensPerBlock
 * @param keysBytes size of the key blob (import: 0)
 */
public record TransferDescription(int numGroups, int tokensPerBlock, long seqId, long numBlocks,
    long firstBlock, long numTokens, long keysBytes) {}
