package org.kvcache;

/**
 * One layer group (kvc_group_desc_t): the layers sharing (window, kv heads,
 * head dim).
 *
 * @param window attention window in tokens; 0 = full
 * @param kvHeads KV heads of each layer of the group
 * @param headDim head dimension
 * @param numLayers layers in the group
 * @param pool index of the pool its blocks come from
 * @param blockBytes bytes of one block (all layers of the group)
 * @param bytesPerToken blockBytes / tokensPerBlock
 * @param kvHeadsPerRank kv heads each rank holds (kvHeads with one rank)
 * @param headReplication ranks holding each of those heads (1: split)
 * @param dtype element type of the group's layers (KV resources may differ)
 * @param kvFactor 2 (K and V) or 1
 * @param layout block layout of the group
 */
public record GroupDescription(int window, int kvHeads, int headDim, int numLayers, int pool,
    long blockBytes, long bytesPerToken, int kvHeadsPerRank, int headReplication, DType dtype,
    int kvFactor, Layout layout) {}
