package org.kvcache;

/**
 * Padded block tables of a batch: row i ({@code table[i * maxBlocks ..]})
 * holds the block ids of sequence i, then the pad value.
 *
 * @param table [rows][maxBlocks] block ids, row-major
 * @param rows sequences in the batch
 * @param maxBlocks entries per row (the stride)
 * @param blocksNeeded the longest row over the batch
 */
public record BlockTable(int[] table, int rows, int maxBlocks, long blocksNeeded) {}
