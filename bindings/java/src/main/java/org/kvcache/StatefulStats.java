package org.kvcache;

/**
 * Memory and work counts of a {@link StatefulCache} (kvc_stateful_stats_t).
 *
 * @param numLayers layers
 * @param bytesAllocated device bytes held now (K/V, beam table, lengths)
 * @param peakBytes most bytes held at once since creation
 * @param kvBytes of bytesAllocated: the layers' buffers
 * @param tableBytes of bytesAllocated: the beam table
 * @param reallocations layer growths (a first allocation is not one)
 * @param reorders reorders that moved rows
 * @param tableEntriesCopied beam table entries those reorders copied
 * @param compactions compactions that gathered
 */
public record StatefulStats(int numLayers, long bytesAllocated, long peakBytes, long kvBytes,
    long tableBytes, long reallocations, long reorders, long tableEntriesCopied,
    long compactions) {}
