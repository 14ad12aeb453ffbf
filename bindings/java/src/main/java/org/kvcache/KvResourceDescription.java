package org.kvcache;

/**
 * One paged KV resource of a cache (kvc_kv_resource_desc_t): its geometry, and whether it is
 * managed together with KV resource 0 (same head dim, dtype, kv factor and layout) or local,
 * in pools of its own (kv_resource.h).
 *
 * @param managed managed together with KV resource 0, else local
 * @param reason {@link ResourceDescription#REASON_MANAGED} or a {@code REASON_KV_} value here
 * @param reasonText the reason in words
 * @param managedWith the first KV resource of its class
 * @param numLayers its layers
 * @param kvHeads kv heads of each layer
 * @param headDim head dimension
 * @param dtype element type
 * @param kvFactor 2 (K and V) or 1
 * @param layout block layout
 * @param window attention window; 0 = full
 * @param group the layer group holding its layers
 * @param pool that group's pool
 * @param blockBytes bytes of one block of that group
 */
public record KvResourceDescription(boolean managed, int reason, String reasonText,
    int managedWith, int numLayers, int kvHeads, int headDim, DType dtype, int kvFactor,
    Layout layout, int window, int group, int pool, long blockBytes) {
  /** Local: head dim differs from KV resource 0's. */
  public static final int REASON_KV_HEAD_DIM_DIFFERS =
      KvcNativeConstants.KVC_RESOURCE_REASON_KV_HEAD_DIM_DIFFERS;
  /** Local: dtype differs from KV resource 0's. */
  public static final int REASON_KV_DTYPE_DIFFERS =
      KvcNativeConstants.KVC_RESOURCE_REASON_KV_DTYPE_DIFFERS;
  /** Local: kv factor differs from KV resource 0's. */
  public static final int REASON_KV_FACTOR_DIFFERS =
      KvcNativeConstants.KVC_RESOURCE_REASON_KV_FACTOR_DIFFERS;
  /** Local: layout differs from KV resource 0's. */
  public static final int REASON_KV_LAYOUT_DIFFERS =
      KvcNativeConstants.KVC_RESOURCE_REASON_KV_LAYOUT_DIFFERS;
}
