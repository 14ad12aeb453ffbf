package org.kvcache;

/**
 * Summary of a cache (kvc_cache_desc_t).
 *
 * @param deviceKind where the primary pools live
 * @param deviceOrdinal CUDA ordinal; 0 on CPU
 * @param dtype stored element type
 * @param layout block layout
 * @param numLayers attention layers
 * @param numGroups layer groups
 * @param numPools block pools
 * @param tokensPerBlock tokens per block
 * @param kvFactor 2 (K and V) or 1
 * @param numBlocks primary blocks over all pools
 * @param tokenCapacity tokens every layer can hold at once
 * @param primaryBytes bytes of the primary pools
 * @param hostCacheBytes bytes of the secondary (host) tier's pools: the configured bytes
 *     rounded down to whole block sets; 0 without a host tier
 * @param deviceFreeBytes free device memory seen at sizing (CUDA); 0 on CPU
 * @param deviceTotalBytes total device memory (CUDA); 0 on CPU
 * @param numResources state resources (state.h); 0 without
 * @param numStateSlots slots of every state resource
 * @param stateBytes bytes of all state slots (out of the budget)
 * @param numRanks tensor-parallel ranks (Config#setRanks), 1 without; the block counts
 *     and bytes are one rank's
 * @param maxHeadReplication the most ranks holding one kv head (1: none replicated)
 * @param numKvResources paged KV resources (kv_resource.h); 0 with the global shape setters
 */
public record CacheDescription(DeviceKind deviceKind, int deviceOrdinal, DType dtype,
    Layout layout, int numLayers, int numGroups, int numPools, int tokensPerBlock,
    int kvFactor, long numBlocks, long tokenCapacity, long primaryBytes, long hostCacheBytes,
    long deviceFreeBytes, long deviceTotalBytes, int numResources, int numStateSlots,
    long stateBytes, int numRanks, int maxHeadReplication, int numKvResources) {}
