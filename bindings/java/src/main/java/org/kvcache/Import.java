package org.kvcache;

/**
 * Blocks reserved in this cache for a transfer from another one
 * (kvc_import_t; {@link Cache#importBegin}): write the bytes of
 * {@link #blockIds(int)} (addresses from {@link Cache#layerView(int)}),
 * then {@link #complete(long)} publishes them, or {@link #abort()} gives
 * them back. {@link #close()} frees it, aborting it if still open. Close it
 * before its cache; calls after close throw {@link KvCacheException} with
 * {@link Status#INVALID_STATE}.
 */
public final class Import implements AutoCloseable {
  private final NativeHandle handle;
  private final NativeHandle cache;

  Import(long address, NativeHandle cache) {
    this.handle = new NativeHandle(address, "Import");
    this.cache = cache;
  }

  /** What the import covers: write positions firstBlock to numBlocks - 1 (kvc_import_describe). */
  public TransferDescription describe() {
    return handle.call(h -> Transfers.describe(d -> KvcNative.kvc_import_describe(h, d)));
  }

  /**
   * The block ids to write in layer group {@code group}: entry i is position firstBlock + i; -1
   * where nothing is to be written (kvc_import_block_ids).
   */
  public int[] blockIds(int group) {
    Args.u32("group", group);
    return handle.call(h -> Transfers.blockIds(
        (ids, capacity, count) -> KvcNative.kvc_import_block_ids(h, group, ids, capacity, count)));
  }

  /**
   * The blocks are written: publishes them (kvc_import_complete). {@code blocksWritten} must be
   * numBlocks - firstBlock; another count is refused and the import stays open.
   */
  public void complete(long blocksWritten) {
    Args.count("blocks_written", blocksWritten);
    handle.run(h -> cache.run(c -> KvcNative.kvc_import_complete(h, blocksWritten)));
  }

  /** Gives every block back, removing the import's sequence (kvc_import_abort). */
  public void abort() {
    handle.run(h -> cache.run(c -> KvcNative.kvc_import_abort(h)));
  }

  /** Frees the import, aborting it if still open (kvc_import_destroy). A second close does nothing. */
  @Override
  public void close() {
    long h = handle.close();
    if (h == 0) {
      return;
    }
    if (cache.isClosed()) {
      KvcNative.kvc_import_destroy(h);
      return;
    }
    try {
      cache.run(c -> KvcNative.kvc_import_destroy(h));
    } catch (KvCacheException e) {
      KvcNative.kvc_import_destroy(h);  // closed meanwhile
    }
  }
}
