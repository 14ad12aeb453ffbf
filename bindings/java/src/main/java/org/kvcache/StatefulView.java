package org.kvcache;

/**
 * Where one layer of a {@link StatefulCache} lives (kvc_stateful_view_t).
 * Element (row r, head h, position t, dim d) of K is at {@code key + r *
 * rowStride + h * headStride + t * tokenStride + d * elemSize} bytes, V the
 * same from {@code value}; with a beam table, position t of row r is read
 * from row {@code beamTable[r * beamTableStride + t]}. Addresses are device
 * pointers on CUDA, valid until the next append, import, compact or reset.
 *
 * @param layer the layer
 * @param key K of row 0
 * @param value V of row 0 (equal to key when kv_factor is 1)
 * @param rowStride bytes between rows
 * @param headStride bytes between heads
 * @param tokenStride bytes between positions
 * @param batch rows
 * @param capacity positions allocated per row
 * @param kvHeads KV heads of the layer
 * @param headDim head dimension
 * @param dtype element type
 * @param layout HND or NHD
 * @param maxLength longest row now
 * @param lengths address of the rows' int32 lengths
 * @param beamTable address of the int32 beam table, or 0 without one
 * @param beamTableStride entries per table row (0 without a table)
 */
public record StatefulView(int layer, long key, long value, long rowStride, long headStride,
    long tokenStride, int batch, int capacity, int kvHeads, int headDim, DType dtype,
    Layout layout, int maxLength, long lengths, long beamTable, int beamTableStride) {}
