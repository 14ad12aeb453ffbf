package org.kvcache;

import java.util.Arrays;

/**
 * Block tables in CSR form, as FlashInfer takes them: sequence i's blocks
 * are {@code indices[indptr[i] .. indptr[i + 1])}.
 *
 * <p>Compared by value: {@code equals} and {@code hashCode} compare the
 * arrays' contents. The accessors return the arrays themselves, not copies.
 *
 * @param indptr rows + 1 offsets
 * @param indices block ids (exactly indptr[rows] of them)
 * @param lastPageLen tokens in the last block of each sequence (0 if empty)
 */
public record CsrTable(int[] indptr, int[] indices, int[] lastPageLen) {
  /** Equal when the three arrays are, element by element. */
  @Override
  public boolean equals(Object o) {
    return o instanceof CsrTable t && Arrays.equals(indptr, t.indptr)
        && Arrays.equals(indices, t.indices) && Arrays.equals(lastPageLen, t.lastPageLen);
  }

  @Override
  public int hashCode() {
    return (31 * Arrays.hashCode(indptr) + Arrays.hashCode(indices)) * 31
        + Arrays.hashCode(lastPageLen);
  }

  @Override
  public String toString() {
    return "CsrTable[indptr=" + Arrays.toString(indptr) + ", indices="
        + Arrays.toString(indices) + ", lastPageLen=" + Arrays.toString(lastPageLen) + "]";
  }
}
