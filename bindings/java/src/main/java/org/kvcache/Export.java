package org.kvcache;

/**
 * Blocks of a sequence held for a transfer to another cache (kvc_export_t;
 * {@link Cache#exportSequence}): eviction, {@link Cache#resetReuse} and the
 * sequence's removal cannot take them until {@link #close()} releases them.
 *
 * <p>Send {@link #keys()} to the receiver and copy the bytes of
 * {@link #blockIds(int)} (addresses from {@link Cache#layerView(int)}).
 * Close it before its cache; a cache closed first has released it, and
 * close then only frees the handle. Calls after close throw
 * {@link KvCacheException} with {@link Status#INVALID_STATE}.
 */
public final class Export implements AutoCloseable {
  private final NativeHandle handle;
  private final NativeHandle cache;

  Export(long address, NativeHandle cache) {
    this.handle = new NativeHandle(address, "Export");
    this.cache = cache;
  }

  /** What the export covers (kvc_export_describe). */
  public TransferDescription describe() {
    return handle.call(h -> Transfers.describe(d -> KvcNative.kvc_export_describe(h, d)));
  }

  /** The exported block ids of layer group {@code group}, position 0 first (kvc_export_block_ids). */
  public int[] blockIds(int group) {
    Args.u32("group", group);
    return handle.call(h -> Transfers.blockIds(
        (ids, capacity, count) -> KvcNative.kvc_export_block_ids(h, group, ids, capacity, count)));
  }

  /** The key blob to send to the receiver (kvc_export_keys; format in transfer.h). */
  public byte[] keys() {
    return handle.call(Transfers::keys);
  }

  /** Releases the blocks and frees the export (kvc_export_release). A second close does nothing. */
  @Override
  public void close() {
    long h = handle.close();
    if (h == 0) {
      return;
    }
    if (cache.isClosed()) {
      KvcNative.kvc_export_release(h);  // the cache released the blocks: frees the handle
      return;
    }
    try {
      cache.run(c -> KvcNative.kvc_export_release(h));
    } catch (KvCacheException e) {
      KvcNative.kvc_export_release(h);  // closed meanwhile
    }
  }
}
