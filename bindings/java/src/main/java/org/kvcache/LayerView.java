package org.kvcache;

/**
 * Where one layer's K and V live (kvc_layer_view_t). Element (block b, kv k,
 * token t, head h, dim d) is at {@code base + b * blockStride + k * kvStride
 * + t * tokenStride + h * headStride + d * elemSize} bytes.
 *
 * @param group layer group of the layer
 * @param pool pool the blocks come from
 * @param dtype element type
 * @param layout NHD or HND
 * @param kvHeads KV heads
 * @param headDim head dimension
 * @param tokensPerBlock tokens per block
 * @param kvFactor 2 (K at kv 0, V at kv 1) or 1
 * @param elemSize bytes per element
 * @param base address of byte 0 of block 0 for this layer (device pointer on CUDA)
 * @param numBlocks blocks addressable through the view
 * @param blockStride bytes between consecutive blocks
 * @param kvStride bytes between K and V
 * @param tokenStride bytes between consecutive tokens
 * @param headStride bytes between consecutive heads
 * @param rank the rank whose pool this is (0 with one rank)
 * @param firstKvHead the model's kv head at head 0 of the view
 * @param totalKvHeads the layer's kv heads in the model
 */
public record LayerView(int group, int pool, DType dtype, Layout layout, int kvHeads, int headDim,
    int tokensPerBlock, int kvFactor, int elemSize, long base, long numBlocks, long blockStride,
    long kvStride, long tokenStride, long headStride, int rank, int firstKvHead,
    int totalKvHeads) {}
