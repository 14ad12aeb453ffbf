package org.kvcache;

import java.util.Arrays;
import java.util.Objects;

/**
 * Padded block tables of a batch: row i ({@code table[i * maxBlocks ..]})
 * holds the block ids of sequence i, then the pad value.
 *
 * <p>Compared by value: {@code equals} and {@code hashCode} compare the
 * arrays' contents. The accessors return the arrays themselves, not copies.
 *
 * @param table [rows][maxBlocks] block ids, row-major
 * @param rows sequences in the batch
 * @param maxBlocks entries per row (the stride)
 * @param blocksNeeded the longest row over the batch
 */
public record BlockTable(int[] table, int rows, int maxBlocks, long blocksNeeded) {
  /** Equal when every component is, the table compared element by element. */
  @Override
  public boolean equals(Object o) {
    return o instanceof BlockTable t && rows == t.rows && maxBlocks == t.maxBlocks
        && blocksNeeded == t.blocksNeeded && Arrays.equals(table, t.table);
  }

  @Override
  public int hashCode() {
    return 31 * Objects.hash(rows, maxBlocks, blocksNeeded) + Arrays.hashCode(table);
  }

  @Override
  public String toString() {
    return "BlockTable[table=" + Arrays.toString(table) + ", rows=" + rows + ", maxBlocks="
        + maxBlocks + ", blocksNeeded=" + blocksNeeded + "]";
  }
}
