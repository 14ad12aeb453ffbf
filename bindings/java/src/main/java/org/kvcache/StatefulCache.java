package org.kvcache;

import java.lang.ref.Reference;
import java.nio.ByteBuffer;

/**
 * The stateful contiguous mode (kvc_stateful_t; OpenVINO's stateful KV
 * cache): per layer one K/V buffer for a fixed batch of rows, in-place
 * append with staggered growth, beam search through a beam table (no K/V
 * gathered), indirect decode attention, compaction, trim, reset and row
 * export/import. See include/kvcache/stateful.h.
 *
 * <p>Data arguments are {@link Memory}: direct buffers on a CPU cache
 * (checked against the layer's shape), device addresses on a CUDA cache.
 * Thread safe; {@link #close} waits for calls in flight.
 */
public final class StatefulCache implements AutoCloseable {
  /** The row of {@link #trim} meaning every row. */
  public static final int ALL_ROWS = -1;

  private final NativeHandle handle;
  private final int batch;
  private final boolean device;
  private final int[] kvHeads;
  private final int[] headDim;

  /**
   * Creates a stateful cache for the model of {@code config} (layers, kv
   * heads, head dim, dtype, kv factor, device; the paged settings are not
   * read) with {@code options} (kvc_stateful_create).
   */
  public StatefulCache(Config config, StatefulOptions options) {
    Args.notNull("config", config);
    Args.notNull("options", options);
    long address = config.callLong(c -> {
      kvc_stateful_options_t o = new kvc_stateful_options_t();
      try {
        KvcNative.kvc_stateful_options_init(o);
        options.toNative(o);
        Scratch s = Scratch.get();
        int out = s.alloc(8);
        KvcNative.kvc_stateful_create(c, o, s.address(out));
        return s.getLong(out);
      } finally {
        o.delete();
      }
    });
    handle = new NativeHandle(address, "StatefulCache");
    batch = options.batch;
    device = config.getDeviceKind() == DeviceKind.CUDA;
    int layers = config.getNumLayers();
    kvHeads = new int[layers];
    headDim = new int[layers];
    for (int l = 0; l < layers; l++) {
      StatefulView v = view(l);
      kvHeads[l] = v.kvHeads();
      headDim[l] = v.headDim();
    }
  }

  /** Frees the cache and its memory after the calls in flight. A second close does nothing. */
  @Override
  public void close() {
    long h = handle.close();
    if (h != 0) {
      KvcNative.kvc_stateful_destroy(h);
    }
  }

  /** Whether {@link #close()} was called. */
  public boolean isClosed() {
    return handle.isClosed();
  }

  /** Rows. */
  public int batch() {
    return batch;
  }

  private void checkLayer(int layer) {
    if (layer < 0 || layer >= kvHeads.length) {
      throw Args.invalid("layer must be < num_layers (" + kvHeads.length + "), got " + layer);
    }
  }

  /** Layer {@code layer}'s view (kvc_stateful_layer_view). */
  public StatefulView view(int layer) {
    Args.u32("layer", layer);
    return handle.call(h -> StatefulRecords.statefulView(h, layer));
  }

  /** The rows' lengths in layer {@code layer} (kvc_stateful_get_lengths). */
  public int[] lengths(int layer) {
    Args.u32("layer", layer);
    return handle.call(h -> {
      Scratch s = Scratch.get();
      int out = s.alloc(4L * batch);
      KvcNative.kvc_stateful_get_lengths(h, layer, s.address(out), batch);
      int[] r = new int[batch];
      s.getInts(out, r, 0, batch);
      return r;
    });
  }

  /** {@link #append(int, int, DType, Memory, Memory, int[], float, float, long)}: scales 1, default stream. */
  public void append(int layer, int numTokens, DType srcDtype, Memory key, Memory value,
      int[] rowTokens) {
    append(layer, numTokens, srcDtype, key, value, rowTokens, 1.0f, 1.0f, 0);
  }

  /**
   * Appends {@code numTokens} positions of one layer for every row, in place
   * (kvc_stateful_append). {@code key} and {@code value} hold {@code
   * [batch][numTokens][heads][headDim]} (NHD) or {@code
   * [batch][heads][numTokens][headDim]} (HND) elements of {@code srcDtype};
   * row r takes its first {@code rowTokens[r]} (all when null).
   */
  public void append(int layer, int numTokens, DType srcDtype, Memory key, Memory value,
      int[] rowTokens, float kScale, float vScale, long stream) {
    checkLayer(layer);
    Args.u32("num_tokens", numTokens);
    Args.notNull("src_dtype", srcDtype);
    if (rowTokens != null && rowTokens.length != batch) {
      throw Args.invalid("rowTokens has " + rowTokens.length + " entries, the cache has batch "
          + batch);
    }
    long bytes = (long) batch * numTokens * kvHeads[layer] * headDim[layer] * srcDtype.size();
    handle.run(h -> {
      kvc_stateful_append_args_t a = new kvc_stateful_append_args_t();
      try {
        Scratch s = Scratch.get();
        int rows = rowTokens == null ? -1 : s.alloc(4L * batch);
        if (rowTokens != null) {
          s.putInts(rows, rowTokens, 0, batch);
        }
        KvcNative.kvc_stateful_append_args_init(a);
        a.setLayer(layer);
        a.setNum_tokens(numTokens);
        a.setSrc_dtype(srcDtype.code());
        a.setKey(key == null ? 0 : key.resolve("key", bytes, device));
        a.setValue(value == null ? 0 : value.resolve("value", bytes, device));
        a.setRow_tokens(rows < 0 ? 0 : s.address(rows));
        a.setK_scale(kScale);
        a.setV_scale(vScale);
        KvcNative.kvc_stateful_append(h, a, stream);
      } finally {
        a.delete();
        Reference.reachabilityFence(key);
        Reference.reachabilityFence(value);
      }
    });
  }

  /** {@link #reorder(int[], long)} on the default stream. */
  public void reorder(int[] beamIdx) {
    reorder(beamIdx, 0);
  }

  /**
   * Row b continues row {@code beamIdx[b]}'s history; only beam table
   * entries move (kvc_stateful_reorder).
   */
  public void reorder(int[] beamIdx, long stream) {
    Args.notNull("beam_idx", beamIdx);
    handle.run(h -> {
      Scratch s = Scratch.get();
      int idx = s.alloc(4L * beamIdx.length);
      s.putInts(idx, beamIdx, 0, beamIdx.length);
      KvcNative.kvc_stateful_reorder(h, s.address(idx), beamIdx.length, stream);
    });
  }

  /** {@link #compact(long)} on the default stream. */
  public void compact() {
    compact(0);
  }

  /** Gathers the K/V by the beam table and drops it (kvc_stateful_compact). */
  public void compact(long stream) {
    handle.run(h -> KvcNative.kvc_stateful_compact(h, stream));
  }

  /** {@link #trim(int, int, long)} on the default stream. */
  public void trim(int row, int numTokens) {
    trim(row, numTokens, 0);
  }

  /**
   * Drops the last {@code numTokens} tokens of {@code row} ({@link
   * #ALL_ROWS}: every row) in every layer (kvc_stateful_trim).
   */
  public void trim(int row, int numTokens, long stream) {
    Args.u32("num_tokens", numTokens);
    long r = row == ALL_ROWS ? 0xffffffffL : Args.u32("row", row);
    handle.run(h -> KvcNative.kvc_stateful_trim(h, r, numTokens, stream));
  }

  /** {@link #reset(boolean, long)} on the default stream. */
  public void reset(boolean releaseMemory) {
    reset(releaseMemory, 0);
  }

  /** Empties every row; {@code releaseMemory} frees the buffers too (kvc_stateful_reset). */
  public void reset(boolean releaseMemory, long stream) {
    handle.run(h -> KvcNative.kvc_stateful_reset(h, releaseMemory, stream));
  }

  /** {@link #exportRow(int, long)} on the default stream. */
  public byte[] exportRow(int row) {
    return exportRow(row, 0);
  }

  /** Row {@code row}'s state as bytes (kvc_stateful_export_row). */
  public byte[] exportRow(int row, long stream) {
    Args.u32("row", row);
    return handle.call(h -> {
      Scratch s = Scratch.get();
      int size = s.alloc(8);
      try {
        KvcNative.kvc_stateful_export_row(h, row, 0, 0, s.address(size), stream);
      } catch (KvCacheException e) {
        if (e.status() != Status.BUFFER_TOO_SMALL) {
          throw e;
        }
      }
      int n = Math.toIntExact(s.getLong(size));
      ByteBuffer buf = ByteBuffer.allocateDirect(Math.max(n, 1));
      KvcNative.kvc_stateful_export_row(h, row, KvcNative.kvcj_buffer_address(buf), n,
          s.address(size), stream);
      byte[] out = new byte[n];
      buf.get(out);
      return out;
    });
  }

  /** {@link #importRow(int, byte[], long)} on the default stream. */
  public void importRow(int row, byte[] state) {
    importRow(row, state, 0);
  }

  /** Restores a state from {@link #exportRow} into row {@code row} (kvc_stateful_import_row). */
  public void importRow(int row, byte[] state, long stream) {
    Args.u32("row", row);
    Args.notNull("state", state);
    ByteBuffer buf = ByteBuffer.allocateDirect(Math.max(state.length, 1));
    buf.put(state).flip();
    handle.run(h -> {
      try {
        KvcNative.kvc_stateful_import_row(h, row, KvcNative.kvcj_buffer_address(buf), state.length,
            stream);
      } finally {
        Reference.reachabilityFence(buf);
      }
    });
  }

  /**
   * Workspace bytes {@link #decode} needs for this layer, heads, query dtype
   * and longest length ({@code maxSeqLen} 0: the longest row now);
   * 0 on a CPU cache (kvc_stateful_decode_workspace_size).
   */
  public long decodeWorkspaceSize(int layer, int qHeads, DType qDtype, int maxSeqLen) {
    return StatefulDecode.workspaceSize(handle, layer, qHeads, qDtype, maxSeqLen);
  }

  /**
   * {@link #decode(int, int, DType, Memory, Memory, float, float, float, Memory, long, long)}
   * with the default scales, no workspace (a CPU cache needs none) and the default stream.
   */
  public void decode(int layer, int qHeads, DType qDtype, Memory query, Memory out) {
    decode(layer, qHeads, qDtype, query, out, 0.0f, 1.0f, 1.0f, null, 0, 0);
  }

  /**
   * Decode attention of one layer for every row through the beam table
   * (kvc_stateful_decode): {@code query} and {@code out} are {@code
   * [batch][qHeads][headDim]} of {@code qDtype}; softmaxScale 0 means
   * 1/sqrt(headDim). {@code workspace} holds {@code workspaceBytes} (see
   * {@link #decodeWorkspaceSize}); it may be null when that is 0.
   */
  public void decode(int layer, int qHeads, DType qDtype, Memory query, Memory out,
      float softmaxScale, float kScale, float vScale, Memory workspace, long workspaceBytes,
      long stream) {
    checkLayer(layer);
    Args.u32("q_heads", qHeads);
    Args.notNull("q_dtype", qDtype);
    long bytes = (long) batch * qHeads * headDim[layer] * qDtype.size();
    StatefulDecode.run(handle, device, layer, qHeads, qDtype, query, out, bytes, softmaxScale,
        kScale, vScale, workspace, workspaceBytes, stream);
  }

  /**
   * Waits for {@code stream} and throws the first error of work this cache
   * enqueued (kvc_stateful_get_async_error).
   */
  public void checkAsyncError(long stream) {
    handle.run(h -> {
      Scratch s = Scratch.get();
      int out = s.alloc(8);
      KvcNative.kvc_stateful_get_async_error(h, stream, s.address(out));
    });
  }

  /** Memory and work counts (kvc_stateful_get_stats). */
  public StatefulStats stats() {
    return handle.call(h -> StatefulRecords.statefulStats(h));
  }

  /** One layer's statistics (kvc_stateful_get_layer_stats). */
  public StatefulLayerStats layerStats(int layer) {
    Args.u32("layer", layer);
    return handle.call(h -> StatefulRecords.statefulLayerStats(h, layer));
  }
}
