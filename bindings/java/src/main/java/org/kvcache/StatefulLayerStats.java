package org.kvcache;

/**
 * One layer of a {@link StatefulCache} (kvc_stateful_layer_stats_t).
 *
 * @param layer the layer
 * @param capacity positions allocated per row
 * @param growthOffset the growth policy's offset of this layer
 * @param bytes bytes of the layer's buffer
 * @param reallocations growths of the buffer
 * @param lastGrowthLength longest row when the layer last grew
 * @param maxLength longest row now
 */
public record StatefulLayerStats(int layer, int capacity, int growthOffset, long bytes,
    long reallocations, int lastGrowthLength, int maxLength) {}
