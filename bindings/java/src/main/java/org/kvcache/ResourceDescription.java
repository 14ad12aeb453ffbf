package org.kvcache;

/**
 * One state resource of a cache and the view a kernel addresses it by (kvc_resource_desc_t):
 * slot {@code s} starts at {@code base + s * slotStride}; strides in bytes as in state.h.
 *
 * @param kind {@link #SSM}, {@link #CONV}, {@link #GENERIC} or {@link #UNPAGED}
 * @param managed managed (a shared slot index) or local
 * @param reason {@link #REASON_MANAGED} or another REASON_ value
 * @param reasonText the reason in words
 * @param dtype SSM and conv: element type; else null
 * @param numHeads SSM heads
 * @param headDim SSM head dimension
 * @param dState SSM state size
 * @param convDim conv channels
 * @param dConv conv kernel width
 * @param nGroups conv meeting the constraint: its n_groups
 * @param numSlots slots of the resource
 * @param slotsUsed slots held by live sequences
 * @param bytesPerToken unpaged: bytes per token
 * @param maxTokens unpaged: tokens per slot
 * @param alignment alignment of every slot's start
 * @param slotBytes bytes of the state in one slot
 * @param slotStride bytes from one slot to the next
 * @param strides the three per-dimension strides (state.h)
 * @param base address of slot 0 (device memory on CUDA); valid while the cache lives
 */
public record ResourceDescription(int kind, boolean managed, int reason, String reasonText,
    DType dtype, int numHeads, int headDim, int dState, int convDim, int dConv, int nGroups,
    int numSlots, int slotsUsed, long bytesPerToken, long maxTokens, long alignment,
    long slotBytes, long slotStride, long[] strides, long base) {
  /** Mamba SSM state. */
  public static final int SSM = KvcNativeConstants.KVC_RESOURCE_SSM;
  /** Causal-conv state. */
  public static final int CONV = KvcNativeConstants.KVC_RESOURCE_CONV;
  /** Generic per-sequence state. */
  public static final int GENERIC = KvcNativeConstants.KVC_RESOURCE_GENERIC;
  /** Unpaged per-token resource. */
  public static final int UNPAGED = KvcNativeConstants.KVC_RESOURCE_UNPAGED;
  /** Managed with the others. */
  public static final int REASON_MANAGED = KvcNativeConstants.KVC_RESOURCE_REASON_MANAGED;
  /** SSM shape or dtype differ from the first SSM resource's. */
  public static final int REASON_SSM_SHAPE_DIFFERS =
      KvcNativeConstants.KVC_RESOURCE_REASON_SSM_SHAPE_DIFFERS;
  /** A conv resource without an SSM resource. */
  public static final int REASON_NO_SSM = KvcNativeConstants.KVC_RESOURCE_REASON_NO_SSM;
  /** conv_dim fails the n_groups constraint. */
  public static final int REASON_N_GROUPS = KvcNativeConstants.KVC_RESOURCE_REASON_N_GROUPS;
  /** Conv shape or dtype differ from the first managed conv's. */
  public static final int REASON_CONV_SHAPE_DIFFERS =
      KvcNativeConstants.KVC_RESOURCE_REASON_CONV_SHAPE_DIFFERS;
}
