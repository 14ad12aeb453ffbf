package org.kvcache;

/**
 * Block tables in CSR form, as FlashInfer takes them: sequence i's blocks
 * are {@code indices[indptr[i] .. indptr[i + 1])}.
 *
 * @param indptr rows + 1 offsets
 * @param indices block ids (exactly indptr[rows] of them)
 * @param lastPageLen tokens in the last block of each sequence (0 if empty)
 */
public record CsrTable(int[] indptr, int[] indices, int[] lastPageLen) {}
