package org.kvcache;

import java.lang.ref.Reference;
import java.nio.IntBuffer;
import java.nio.LongBuffer;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A KV cache (kvc_cache_t): its memory, its sequences, the tables of a
 * scheduling step, statistics and the kernels on its memory.
 *
 * <p>Every method may be called from any thread (the library serializes the
 * calls on one cache). {@link #close()} waits for calls in flight on other
 * threads, frees the cache, and makes every later call throw
 * {@link KvCacheException} with {@link Status#INVALID_STATE}; closing twice
 * does nothing. A failing call changes nothing and throws
 * {@link KvCacheException} carrying the status and the library's message.
 *
 * <p>Sequence ids, token counts and block counts are Java longs (ids may be
 * any 64-bit value); tokens and block ids are ints, as in the C API.
 * Methods taking a {@code stream} accept a cudaStream_t address (0: the
 * default stream); on a CPU cache it is ignored and the work is done before
 * the call returns.
 */
public final class Cache implements AutoCloseable {
  private final NativeHandle handle;
  private final CacheDescription description;
  private final LayerView[] views;
  /** Row length tried first by {@link #blockTable(int, long[], int)}. */
  private final AtomicInteger tableHint = new AtomicInteger(16);

  /**
   * Validates the config, sizes and allocates the primary pool, and creates
   * the cache (kvc_cache_create). The config may be closed afterwards.
   */
  public Cache(Config config) {
    Args.notNull("config", config);
    long c = config.acquire();
    long address;
    try {
      Scratch s = Scratch.get();
      int out = s.alloc(8);
      KvcNative.kvc_cache_create(c, s.address(out));
      address = s.getLong(out);
    } finally {
      config.release();
    }
    handle = new NativeHandle(address, "Cache");
    try {
      description = describe();
      views = new LayerView[description.numLayers()];
      for (int i = 0; i < views.length; i++) {
        views[i] = layerView(i);
      }
    } catch (RuntimeException e) {
      close();
      throw e;
    }
  }

  /** Same as {@code new Cache(config)}. */
  public static Cache create(Config config) {
    return new Cache(config);
  }

  /** Frees the cache and its pools, after the calls in flight. A second close does nothing. */
  @Override
  public void close() {
    long h = handle.close();
    if (h != 0) {
      KvcNative.kvc_cache_destroy(h);
    }
  }

  /** Whether {@link #close()} was called. */
  public boolean isClosed() {
    return handle.isClosed();
  }

  private boolean onDevice() {
    return description.deviceKind() == DeviceKind.CUDA;
  }

  // ======================================================================
  // Description
  // ======================================================================

  /** Summary of the cache (kvc_cache_describe). */
  public CacheDescription describe() {
    long h = handle.acquire();
    kvc_cache_desc_t d = new kvc_cache_desc_t();
    try {
      KvcNative.kvc_cache_desc_init(d);
      KvcNative.kvc_cache_describe(h, d);
      return new CacheDescription(DeviceKind.of(d.getDevice_kind()), d.getDevice_ordinal(),
          DType.of(d.getDtype()), Layout.of(d.getLayout()), Args.toInt(d.getNum_layers()),
          Args.toInt(d.getNum_groups()), Args.toInt(d.getNum_pools()),
          Args.toInt(d.getTokens_per_block()), Args.toInt(d.getKv_factor()), d.getNum_blocks(),
          d.getToken_capacity(), d.getPrimary_bytes(), d.getHost_cache_bytes(),
          d.getDevice_free_bytes(), d.getDevice_total_bytes());
    } finally {
      d.delete();
      handle.release();
    }
  }

  /** Layer group {@code group} (kvc_cache_describe_group). */
  public GroupDescription describeGroup(int group) {
    Args.u32("group", group);
    long h = handle.acquire();
    kvc_group_desc_t d = new kvc_group_desc_t();
    try {
      KvcNative.kvc_group_desc_init(d);
      KvcNative.kvc_cache_describe_group(h, group, d);
      return new GroupDescription(Args.toInt(d.getWindow()), Args.toInt(d.getKv_heads()),
          Args.toInt(d.getHead_dim()), Args.toInt(d.getNum_layers()), Args.toInt(d.getPool()),
          d.getBlock_bytes(), d.getBytes_per_token());
    } finally {
      d.delete();
      handle.release();
    }
  }

  /** Block pool {@code pool} (kvc_cache_describe_pool). */
  public PoolDescription describePool(int pool) {
    Args.u32("pool", pool);
    long h = handle.acquire();
    kvc_pool_desc_t d = new kvc_pool_desc_t();
    try {
      KvcNative.kvc_pool_desc_init(d);
      KvcNative.kvc_cache_describe_pool(h, pool, d);
      return new PoolDescription(Args.toInt(d.getNum_groups()), d.getBlock_bytes(),
          d.getNum_blocks(), d.getBytes(), d.getBase());
    } finally {
      d.delete();
      handle.release();
    }
  }

  /** Tensor view of layer {@code layer} (kvc_cache_layer_view). */
  public LayerView layerView(int layer) {
    Args.u32("layer", layer);
    long h = handle.acquire();
    kvc_layer_view_t v = new kvc_layer_view_t();
    try {
      KvcNative.kvc_layer_view_init(v);
      KvcNative.kvc_cache_layer_view(h, layer, v);
      return new LayerView(Args.toInt(v.getGroup()), Args.toInt(v.getPool()),
          DType.of(v.getDtype()), Layout.of(v.getLayout()), Args.toInt(v.getKv_heads()),
          Args.toInt(v.getHead_dim()), Args.toInt(v.getTokens_per_block()),
          Args.toInt(v.getKv_factor()), Args.toInt(v.getElem_size()), v.getBase(),
          v.getNum_blocks(), v.getBlock_stride(), v.getKv_stride(), v.getToken_stride(),
          v.getHead_stride());
    } finally {
      v.delete();
      handle.release();
    }
  }

  // ======================================================================
  // Sequences
  // ======================================================================

  private static kvc_sequence_options_t nativeOptions(SequenceOptions options, Scratch s,
      SequenceOptions.Regions regions) {
    if (options == null) {
      return null;
    }
    kvc_sequence_options_t o = new kvc_sequence_options_t();
    KvcNative.kvc_sequence_options_init(o);
    options.toNative(s, regions, o);
    return o;
  }

  /** {@link #addSequence(long, int[], int, int, SequenceOptions, long)} of the whole array, default options. */
  public long addSequence(long id, int[] tokens) {
    return addSequence(id, tokens, 0, Args.notNull("tokens", tokens).length, null, 0);
  }

  /** {@link #addSequence(long, int[], int, int, SequenceOptions, long)} of the whole array. */
  public long addSequence(long id, int[] tokens, SequenceOptions options) {
    return addSequence(id, tokens, 0, Args.notNull("tokens", tokens).length, options, 0);
  }

  /**
   * Adds sequence {@code id} with its prompt {@code tokens[from .. from +
   * count)} and reuses its cached prefix (kvc_sequence_add).
   *
   * @param options null for the defaults
   * @return the prompt tokens already cached (never the last one): the
   *     caller skips computing them
   * @throws KvCacheException ALREADY_EXISTS, OUT_OF_BLOCKS (nothing is
   *     evicted or changed), INVALID_ARGUMENT
   */
  public long addSequence(long id, int[] tokens, int from, int count, SequenceOptions options,
      long stream) {
    Args.notNull("tokens", tokens);
    Args.range("tokens", tokens.length, from, count);
    long h = handle.acquire();
    kvc_sequence_options_t o = null;
    try {
      Scratch s = Scratch.get();
      int tok = s.alloc(4L * count);
      s.putInts(tok, tokens, from, count);
      int out = s.alloc(8);
      SequenceOptions.Regions r = options == null ? null : options.reserve(s);
      o = nativeOptions(options, s, r);
      KvcNative.kvc_sequence_add(h, id, s.address(tok), count, o, stream, s.address(out));
      return s.getLong(out);
    } finally {
      if (o != null) {
        o.delete();
      }
      handle.release();
    }
  }

  /** Appends tokens to sequence {@code id} (kvc_sequence_extend). */
  public void extendSequence(long id, int... tokens) {
    extendSequence(id, tokens, 0, Args.notNull("tokens", tokens).length, 0);
  }

  /**
   * Appends {@code tokens[from .. from + count)} to sequence {@code id},
   * allocating blocks as needed (kvc_sequence_extend).
   * @throws KvCacheException NOT_FOUND, OUT_OF_BLOCKS, INVALID_ARGUMENT
   */
  public void extendSequence(long id, int[] tokens, int from, int count, long stream) {
    Args.notNull("tokens", tokens);
    Args.range("tokens", tokens.length, from, count);
    long h = handle.acquire();
    try {
      Scratch s = Scratch.get();
      int tok = s.alloc(4L * count);
      s.putInts(tok, tokens, from, count);
      KvcNative.kvc_sequence_extend(h, id, s.address(tok), count, stream);
    } finally {
      handle.release();
    }
  }

  /**
   * Declares the KV of the first {@code numComputed} tokens written: full
   * blocks among them become reusable (kvc_sequence_commit).
   */
  public void commit(long id, long numComputed) {
    Args.count("num_computed", numComputed);
    long h = handle.acquire();
    try {
      KvcNative.kvc_sequence_commit(h, id, numComputed);
    } finally {
      handle.release();
    }
  }

  /** Drops the last {@code numTokens} tokens of sequence {@code id} (kvc_sequence_rewind). */
  public void rewind(long id, long numTokens) {
    Args.count("num_tokens", numTokens);
    long h = handle.acquire();
    try {
      KvcNative.kvc_sequence_rewind(h, id, numTokens);
    } finally {
      handle.release();
    }
  }

  /** Creates sequence {@code child} sharing every block of {@code parent} (kvc_sequence_fork). */
  public void fork(long parent, long child) {
    long h = handle.acquire();
    try {
      KvcNative.kvc_sequence_fork(h, parent, child);
    } finally {
      handle.release();
    }
  }

  /** Removes sequence {@code id}; its committed blocks stay cached (kvc_sequence_remove). */
  public void removeSequence(long id) {
    long h = handle.acquire();
    try {
      KvcNative.kvc_sequence_remove(h, id);
    } finally {
      handle.release();
    }
  }

  /**
   * Pins the published blocks of sequence {@code id} (its committed full
   * blocks): they are never evicted, even after the sequence is removed,
   * until {@link #unpin} (kvc_sequence_pin).
   * @throws KvCacheException NOT_FOUND, ALREADY_EXISTS (already pinned)
   */
  public void pin(long id) {
    long h = handle.acquire();
    try {
      KvcNative.kvc_sequence_pin(h, id);
    } finally {
      handle.release();
    }
  }

  /** Releases the blocks pinned under {@code id} (kvc_sequence_unpin). */
  public void unpin(long id) {
    long h = handle.acquire();
    try {
      KvcNative.kvc_sequence_unpin(h, id);
    } finally {
      handle.release();
    }
  }

  /** State of sequence {@code id} (kvc_sequence_describe). */
  public SequenceDescription describeSequence(long id) {
    long h = handle.acquire();
    kvc_sequence_desc_t d = new kvc_sequence_desc_t();
    try {
      KvcNative.kvc_sequence_desc_init(d);
      KvcNative.kvc_sequence_describe(h, id, d);
      return new SequenceDescription(Args.toInt(d.getPrompt_priority()),
          Args.toInt(d.getDecode_priority()), d.getNum_tokens(), d.getPrompt_tokens(),
          d.getCached_tokens(), d.getCommitted_tokens(), d.getNum_blocks());
    } finally {
      d.delete();
      handle.release();
    }
  }

  /** Block ids of sequence {@code id} in layer group {@code group}, in token order. */
  public int[] blockIds(long id, int group) {
    Args.u32("group", group);
    long h = handle.acquire();
    try {
      long capacity = 256;
      for (;;) {
        Scratch s = Scratch.get();
        int count = s.alloc(8);
        int ids = s.alloc(4 * capacity);
        try {
          KvcNative.kvc_sequence_block_ids(h, id, group, s.address(ids), capacity,
              s.address(count));
        } catch (KvCacheException e) {
          if (e.status() != Status.BUFFER_TOO_SMALL) {
            throw e;
          }
          capacity = s.getLong(count);
          continue;
        }
        int n = Math.toIntExact(s.getLong(count));
        int[] result = new int[n];
        s.getInts(ids, result, 0, n);
        return result;
      }
    } finally {
      handle.release();
    }
  }

  /**
   * Block ids of sequence {@code id} in {@code group} written into
   * {@code out[from ..]} (kvc_sequence_block_ids).
   * @return the number of blocks
   * @throws KvCacheException BUFFER_TOO_SMALL when they do not fit (nothing written)
   */
  public int blockIds(long id, int group, int[] out, int from) {
    Args.u32("group", group);
    Args.notNull("out", out);
    Args.range("out", out.length, from, 0);
    int capacity = out.length - from;
    long h = handle.acquire();
    try {
      Scratch s = Scratch.get();
      int count = s.alloc(8);
      int ids = s.alloc(4L * capacity);
      KvcNative.kvc_sequence_block_ids(h, id, group, s.address(ids), capacity, s.address(count));
      int n = Math.toIntExact(s.getLong(count));
      s.getInts(ids, out, from, n);
      return n;
    } finally {
      handle.release();
    }
  }

  /** Blocks per layer group that {@code numTokens} more tokens of {@code id} need (kvc_sequence_blocks_needed). */
  public long blocksNeeded(long id, long numTokens) {
    Args.count("num_tokens", numTokens);
    long h = handle.acquire();
    try {
      Scratch s = Scratch.get();
      int out = s.alloc(8);
      KvcNative.kvc_sequence_blocks_needed(h, id, numTokens, s.address(out));
      return s.getLong(out);
    } finally {
      handle.release();
    }
  }

  /** {@link #probe(int[], int, int, SequenceOptions)} of the whole array. */
  public long probe(int[] tokens, SequenceOptions options) {
    return probe(tokens, 0, Args.notNull("tokens", tokens).length, options);
  }

  /**
   * How many tokens of this prompt {@link #addSequence} would find cached,
   * with no side effect (kvc_cache_probe).
   * @param options null for the defaults; the scope must be the add's
   */
  public long probe(int[] tokens, int from, int count, SequenceOptions options) {
    Args.notNull("tokens", tokens);
    Args.range("tokens", tokens.length, from, count);
    long h = handle.acquire();
    kvc_sequence_options_t o = null;
    try {
      Scratch s = Scratch.get();
      int tok = s.alloc(4L * count);
      s.putInts(tok, tokens, from, count);
      int out = s.alloc(8);
      SequenceOptions.Regions r = options == null ? null : options.reserve(s);
      o = nativeOptions(options, s, r);
      KvcNative.kvc_cache_probe(h, s.address(tok), count, o, s.address(out));
      return s.getLong(out);
    } finally {
      if (o != null) {
        o.delete();
      }
      handle.release();
    }
  }

  // ======================================================================
  // Batches
  // ======================================================================

  private static void checkIds(long[] ids) {
    Args.notNull("ids", ids);
  }

  /** One decode step: appends {@code tokens[i]} to sequence {@code ids[i]} (kvc_batch_extend). */
  public void extendBatch(long[] ids, int[] tokens) {
    extendBatch(ids, tokens, 0);
  }

  /**
   * One decode step, all or nothing: appends {@code tokens[i]} to sequence
   * {@code ids[i]} for every i (kvc_batch_extend).
   */
  public void extendBatch(long[] ids, int[] tokens, long stream) {
    checkIds(ids);
    Args.notNull("tokens", tokens);
    if (tokens.length != ids.length) {
      throw Args.invalid("ids and tokens differ in length: " + ids.length + " != "
          + tokens.length);
    }
    long h = handle.acquire();
    try {
      Scratch s = Scratch.get();
      int i = s.alloc(8L * ids.length);
      s.putLongs(i, ids, 0, ids.length);
      int t = s.alloc(4L * tokens.length);
      s.putInts(t, tokens, 0, tokens.length);
      KvcNative.kvc_batch_extend(h, s.address(i), s.address(t), ids.length, stream);
    } finally {
      handle.release();
    }
  }

  /**
   * Padded block tables of group {@code group}, sized to fit
   * (kvc_batch_block_table).
   */
  public BlockTable blockTable(int group, long[] ids, int pad) {
    Args.u32("group", group);
    checkIds(ids);
    long h = handle.acquire();
    try {
      int maxBlocks = tableHint.get();
      for (;;) {
        Scratch s = Scratch.get();
        int needed = s.alloc(8);
        int i = s.alloc(8L * ids.length);
        s.putLongs(i, ids, 0, ids.length);
        long cells = (long) ids.length * maxBlocks;
        int t = s.alloc(4L * cells);
        try {
          KvcNative.kvc_batch_block_table(h, group, s.address(i), ids.length, s.address(t),
              maxBlocks, pad, s.address(needed));
        } catch (KvCacheException e) {
          if (e.status() != Status.BUFFER_TOO_SMALL) {
            throw e;
          }
          maxBlocks = Math.toIntExact(Math.max(s.getLong(needed), maxBlocks + 1L));
          tableHint.accumulateAndGet(maxBlocks, Math::max);
          continue;
        }
        int[] table = new int[Math.toIntExact(cells)];
        s.getInts(t, table, 0, table.length);
        return new BlockTable(table, ids.length, maxBlocks, s.getLong(needed));
      }
    } finally {
      handle.release();
    }
  }

  /**
   * Padded block tables into {@code table} ({@code [ids.length][maxBlocks]}
   * from index 0; kvc_batch_block_table).
   * @return the longest row over the batch
   * @throws KvCacheException BUFFER_TOO_SMALL when a row is longer than maxBlocks
   */
  public long blockTable(int group, long[] ids, int[] table, int maxBlocks, int pad) {
    Args.u32("group", group);
    Args.u32("max_blocks", maxBlocks);
    checkIds(ids);
    Args.notNull("table", table);
    long cells = (long) ids.length * maxBlocks;
    if (table.length < cells) {
      throw Args.invalid("table needs " + cells + " entries, has " + table.length);
    }
    long h = handle.acquire();
    try {
      Scratch s = Scratch.get();
      int needed = s.alloc(8);
      int i = s.alloc(8L * ids.length);
      s.putLongs(i, ids, 0, ids.length);
      int t = s.alloc(4L * cells);
      KvcNative.kvc_batch_block_table(h, group, s.address(i), ids.length, s.address(t),
          maxBlocks, pad, s.address(needed));
      s.getInts(t, table, 0, (int) cells);
      return s.getLong(needed);
    } finally {
      handle.release();
    }
  }

  /**
   * Padded block tables written straight into a direct, native-order
   * buffer from its position (no copy; kvc_batch_block_table).
   * @return the longest row over the batch
   */
  public long blockTable(int group, long[] ids, IntBuffer table, int maxBlocks, int pad) {
    Args.u32("group", group);
    Args.u32("max_blocks", maxBlocks);
    checkIds(ids);
    Memory m = Memory.of(Args.notNull("table", table));
    long h = handle.acquire();
    try {
      long dst = m.resolve("table", 4L * ids.length * maxBlocks, false);
      Scratch s = Scratch.get();
      int needed = s.alloc(8);
      int i = s.alloc(8L * ids.length);
      s.putLongs(i, ids, 0, ids.length);
      KvcNative.kvc_batch_block_table(h, group, s.address(i), ids.length, dst, maxBlocks, pad,
          s.address(needed));
      return s.getLong(needed);
    } finally {
      Reference.reachabilityFence(table);
      handle.release();
    }
  }

  /** Block tables of group {@code group} in CSR form, sized to fit (kvc_batch_block_table_csr). */
  public CsrTable blockTableCsr(int group, long[] ids) {
    Args.u32("group", group);
    checkIds(ids);
    long h = handle.acquire();
    try {
      long capacity = (long) ids.length * tableHint.get();
      for (;;) {
        Scratch s = Scratch.get();
        int num = s.alloc(8);
        int i = s.alloc(8L * ids.length);
        s.putLongs(i, ids, 0, ids.length);
        int indptr = s.alloc(4L * (ids.length + 1));
        int indices = s.alloc(4L * capacity);
        int last = s.alloc(4L * ids.length);
        try {
          KvcNative.kvc_batch_block_table_csr(h, group, s.address(i), ids.length,
              s.address(indptr), s.address(indices), capacity, s.address(last), s.address(num));
        } catch (KvCacheException e) {
          if (e.status() != Status.BUFFER_TOO_SMALL) {
            throw e;
          }
          capacity = Math.max(s.getLong(num), capacity + 1);
          continue;
        }
        int n = Math.toIntExact(s.getLong(num));
        int[] p = new int[ids.length + 1];
        int[] x = new int[n];
        int[] l = new int[ids.length];
        s.getInts(indptr, p, 0, p.length);
        s.getInts(indices, x, 0, n);
        s.getInts(last, l, 0, l.length);
        return new CsrTable(p, x, l);
      }
    } finally {
      handle.release();
    }
  }

  /**
   * CSR block tables into caller arrays (kvc_batch_block_table_csr):
   * {@code indptr} needs ids.length + 1 entries, {@code lastPageLen}
   * ids.length, {@code indices} as many as the blocks.
   * @return the number of indices written
   * @throws KvCacheException BUFFER_TOO_SMALL when indices is too short
   */
  public long blockTableCsr(int group, long[] ids, int[] indptr, int[] indices,
      int[] lastPageLen) {
    Args.u32("group", group);
    checkIds(ids);
    Args.notNull("indptr", indptr);
    Args.notNull("indices", indices);
    Args.notNull("last_page_len", lastPageLen);
    if (indptr.length < ids.length + 1L || lastPageLen.length < ids.length) {
      throw Args.invalid("indptr needs " + (ids.length + 1L) + " entries and last_page_len "
          + ids.length + "; they have " + indptr.length + " and " + lastPageLen.length);
    }
    long h = handle.acquire();
    try {
      Scratch s = Scratch.get();
      int num = s.alloc(8);
      int i = s.alloc(8L * ids.length);
      s.putLongs(i, ids, 0, ids.length);
      int p = s.alloc(4L * (ids.length + 1));
      int x = s.alloc(4L * indices.length);
      int l = s.alloc(4L * ids.length);
      KvcNative.kvc_batch_block_table_csr(h, group, s.address(i), ids.length, s.address(p),
          s.address(x), indices.length, s.address(l), s.address(num));
      int n = Math.toIntExact(s.getLong(num));
      s.getInts(p, indptr, 0, ids.length + 1);
      s.getInts(x, indices, 0, n);
      s.getInts(l, lastPageLen, 0, ids.length);
      return n;
    } finally {
      handle.release();
    }
  }

  /**
   * CSR block tables written straight into direct, native-order buffers
   * from their positions (kvc_batch_block_table_csr).
   * @return the number of indices written
   */
  public long blockTableCsr(int group, long[] ids, IntBuffer indptr, IntBuffer indices,
      IntBuffer lastPageLen) {
    Args.u32("group", group);
    checkIds(ids);
    Memory p = Memory.of(Args.notNull("indptr", indptr));
    Memory x = Memory.of(Args.notNull("indices", indices));
    Memory l = Memory.of(Args.notNull("last_page_len", lastPageLen));
    long h = handle.acquire();
    try {
      long pa = p.resolve("indptr", 4L * (ids.length + 1), false);
      long xa = x.resolve("indices", 0, false);
      long la = l.resolve("last_page_len", 4L * ids.length, false);
      Scratch s = Scratch.get();
      int num = s.alloc(8);
      int i = s.alloc(8L * ids.length);
      s.putLongs(i, ids, 0, ids.length);
      KvcNative.kvc_batch_block_table_csr(h, group, s.address(i), ids.length, pa, xa,
          indices.remaining(), la, s.address(num));
      return s.getLong(num);
    } finally {
      Reference.reachabilityFence(indptr);
      Reference.reachabilityFence(indices);
      Reference.reachabilityFence(lastPageLen);
      handle.release();
    }
  }

  /** Current lengths of the sequences (kvc_batch_sequence_lengths). */
  public int[] sequenceLengths(long[] ids) {
    checkIds(ids);
    int[] lengths = new int[ids.length];
    sequenceLengths(ids, lengths);
    return lengths;
  }

  /** Current lengths of the sequences into {@code lengths[0 .. ids.length)}. */
  public void sequenceLengths(long[] ids, int[] lengths) {
    checkIds(ids);
    Args.notNull("lengths", lengths);
    if (lengths.length < ids.length) {
      throw Args.invalid("lengths needs " + ids.length + " entries, has " + lengths.length);
    }
    long h = handle.acquire();
    try {
      Scratch s = Scratch.get();
      int i = s.alloc(8L * ids.length);
      s.putLongs(i, ids, 0, ids.length);
      int l = s.alloc(4L * ids.length);
      KvcNative.kvc_batch_sequence_lengths(h, s.address(i), ids.length, s.address(l));
      s.getInts(l, lengths, 0, ids.length);
    } finally {
      handle.release();
    }
  }

  /** Current lengths written straight into a direct, native-order buffer from its position. */
  public void sequenceLengths(long[] ids, IntBuffer lengths) {
    checkIds(ids);
    Memory m = Memory.of(Args.notNull("lengths", lengths));
    long h = handle.acquire();
    try {
      long dst = m.resolve("lengths", 4L * ids.length, false);
      Scratch s = Scratch.get();
      int i = s.alloc(8L * ids.length);
      s.putLongs(i, ids, 0, ids.length);
      KvcNative.kvc_batch_sequence_lengths(h, s.address(i), ids.length, dst);
    } finally {
      Reference.reachabilityFence(lengths);
      handle.release();
    }
  }

  /**
   * Slot mapping of the tokens added to each sequence since the previous
   * call for {@code group}, sized to fit; advances each sequence's cursor
   * (kvc_batch_slot_mapping).
   */
  public SlotMapping slotMapping(int group, long[] ids) {
    Args.u32("group", group);
    checkIds(ids);
    long h = handle.acquire();
    try {
      long capacity = Math.max(64, 4L * ids.length);
      for (;;) {
        Scratch s = Scratch.get();
        int num = s.alloc(8);
        int i = s.alloc(8L * ids.length);
        s.putLongs(i, ids, 0, ids.length);
        int slots = s.alloc(8L * capacity);
        int fresh = s.alloc(4L * ids.length);
        try {
          KvcNative.kvc_batch_slot_mapping(h, group, s.address(i), ids.length,
              s.address(slots), capacity, s.address(num), s.address(fresh));
        } catch (KvCacheException e) {
          if (e.status() != Status.BUFFER_TOO_SMALL) {
            throw e;
          }
          capacity = Math.max(s.getLong(num), capacity + 1);
          continue;
        }
        int n = Math.toIntExact(s.getLong(num));
        long[] out = new long[n];
        int[] perSequence = new int[ids.length];
        s.getLongs(slots, out, 0, n);
        s.getInts(fresh, perSequence, 0, ids.length);
        return new SlotMapping(out, perSequence);
      }
    } finally {
      handle.release();
    }
  }

  /**
   * Slot mapping into caller arrays (kvc_batch_slot_mapping): {@code slots}
   * from index 0, {@code newTokens} (may be null) ids.length entries.
   * @return the number of slots written
   * @throws KvCacheException BUFFER_TOO_SMALL when slots is too short (no cursor advances)
   */
  public long slotMapping(int group, long[] ids, long[] slots, int[] newTokens) {
    Args.u32("group", group);
    checkIds(ids);
    Args.notNull("slots", slots);
    if (newTokens != null && newTokens.length < ids.length) {
      throw Args.invalid("new_tokens needs " + ids.length + " entries, has " + newTokens.length);
    }
    long h = handle.acquire();
    try {
      Scratch s = Scratch.get();
      int num = s.alloc(8);
      int i = s.alloc(8L * ids.length);
      s.putLongs(i, ids, 0, ids.length);
      int o = s.alloc(8L * slots.length);
      int f = newTokens == null ? -1 : s.alloc(4L * ids.length);
      KvcNative.kvc_batch_slot_mapping(h, group, s.address(i), ids.length, s.address(o),
          slots.length, s.address(num), f < 0 ? 0 : s.address(f));
      int n = Math.toIntExact(s.getLong(num));
      s.getLongs(o, slots, 0, n);
      if (newTokens != null) {
        s.getInts(f, newTokens, 0, ids.length);
      }
      return n;
    } finally {
      handle.release();
    }
  }

  /**
   * Slot mapping written straight into a direct, native-order buffer from
   * its position (kvc_batch_slot_mapping); {@code newTokens} may be null.
   * @return the number of slots written
   */
  public long slotMapping(int group, long[] ids, LongBuffer slots, IntBuffer newTokens) {
    Args.u32("group", group);
    checkIds(ids);
    Memory m = Memory.of(Args.notNull("slots", slots));
    Memory f = newTokens == null ? null : Memory.of(newTokens);
    long h = handle.acquire();
    try {
      long sa = m.resolve("slots", 0, false);
      long fa = f == null ? 0 : f.resolve("new_tokens", 4L * ids.length, false);
      Scratch s = Scratch.get();
      int num = s.alloc(8);
      int i = s.alloc(8L * ids.length);
      s.putLongs(i, ids, 0, ids.length);
      KvcNative.kvc_batch_slot_mapping(h, group, s.address(i), ids.length, sa,
          slots.remaining(), s.address(num), fa);
      return s.getLong(num);
    } finally {
      Reference.reachabilityFence(slots);
      Reference.reachabilityFence(newTokens);
      handle.release();
    }
  }

  // ======================================================================
  // Statistics
  // ======================================================================

  /** Current statistics (kvc_cache_get_stats). */
  public CacheStats stats() {
    long h = handle.acquire();
    kvc_cache_stats_t st = new kvc_cache_stats_t();
    try {
      KvcNative.kvc_cache_stats_init(st);
      KvcNative.kvc_cache_get_stats(h, st);
      return new CacheStats(st.getNum_blocks(), st.getFree_blocks(), st.getCached_blocks(),
          st.getIn_use_blocks(), st.getReused_blocks(), st.getMissed_blocks(), st.getHit_rate(),
          st.getEvicted_blocks(), st.getNum_sequences(), st.getNum_pinned(), st.getTree_nodes(),
          st.getOffloaded_blocks(), st.getOnboarded_blocks(), st.getOffloaded_bytes(),
          st.getOnboarded_bytes(), st.getHost_blocks(), st.getHost_free_blocks(),
          st.getHost_cached_blocks());
    } finally {
      st.delete();
      handle.release();
    }
  }

  /**
   * Current statistics of layer group {@code group}, 0 &lt;= group &lt;
   * numGroups (kvc_cache_get_group_stats). See {@link GroupStats} for what a
   * windowed group counts.
   * @throws KvCacheException INVALID_ARGUMENT for a group out of range
   */
  public GroupStats groupStats(int group) {
    Args.u32("group", group);
    long h = handle.acquire();
    kvc_group_stats_t st = new kvc_group_stats_t();
    try {
      KvcNative.kvc_group_stats_init(st);
      KvcNative.kvc_cache_get_group_stats(h, group, st);
      return new GroupStats(Args.toInt(st.getPool()), st.getIn_use_blocks(),
          st.getCached_blocks(), st.getPool_free_blocks(), st.getReused_blocks(),
          st.getMissed_blocks(), st.getEvicted_blocks(), st.getReleased_blocks());
    } finally {
      st.delete();
      handle.release();
    }
  }

  /**
   * Moves the manual retention clock forward; expired retention priorities
   * revert to the default at once (kvc_cache_advance_clock).
   * @throws KvCacheException INVALID_STATE on a cache reading the monotonic clock
   */
  public void advanceClock(long milliseconds) {
    long h = handle.acquire();
    try {
      KvcNative.kvc_cache_advance_clock(h, milliseconds);
    } finally {
      handle.release();
    }
  }

  /**
   * Evicts every cached block (kvc_cache_reset_reuse).
   * @throws KvCacheException INVALID_STATE while any block is in use
   */
  public void resetReuse() {
    long h = handle.acquire();
    try {
      KvcNative.kvc_cache_reset_reuse(h);
    } finally {
      handle.release();
    }
  }

  /**
   * Runs the invariant checker (kvc_cache_check).
   * @throws KvCacheException INTERNAL naming the first broken invariant
   */
  public void check() {
    long h = handle.acquire();
    try {
      KvcNative.kvc_cache_check(h);
    } finally {
      handle.release();
    }
  }

  // ======================================================================
  // Kernels
  // ======================================================================

  private LayerView view(int layer) {
    if (layer >= views.length) {
      throw Args.invalid("layer " + layer + " is outside [0, " + views.length + ")");
    }
    return views[layer];
  }

  private static long need(Memory m, String name, long bytes, boolean device, boolean required) {
    if (m == null) {
      if (required) {
        throw Args.invalid(name + " is not set");
      }
      return 0;
    }
    return m.resolve(name, bytes, device);
  }

  /** {@link #storeKv(StoreArgs, long)} on the default stream. */
  public void storeKv(StoreArgs args) {
    storeKv(args, 0);
  }

  /**
   * Writes the K (and V) of {@code args.numTokens} tokens of one layer into
   * their slots (kvc_store_kv). Host buffers are checked against the
   * layer's shape; on a CUDA cache the work is enqueued on {@code stream}.
   */
  public void storeKv(StoreArgs args, long stream) {
    Args.notNull("args", args);
    Args.notNull("src_dtype", args.srcDtype);
    LayerView v = view(args.layer);
    long h = handle.acquire();
    kvc_store_args_t a = new kvc_store_args_t();
    try {
      boolean dev = onDevice();
      long rows = (long) args.numTokens * v.kvHeads() * v.headDim() * args.srcDtype.size();
      KvcNative.kvc_store_args_init(a);
      a.setLayer(args.layer);
      a.setNum_tokens(args.numTokens);
      a.setSrc_dtype(args.srcDtype.code());
      a.setKey(need(args.key, "key", rows, dev, args.numTokens > 0));
      a.setValue(need(args.value, "value", rows, dev, false));
      a.setSlot_mapping(need(args.slotMapping, "slot_mapping", 8L * args.numTokens, dev,
          args.numTokens > 0));
      a.setK_scale(args.kScale);
      a.setV_scale(args.vScale);
      KvcNative.kvc_store_kv(h, a, stream);
    } finally {
      a.delete();
      Reference.reachabilityFence(args);
      handle.release();
    }
  }

  /** {@link #storeKvStrided(StoreArgs, StoreStrides, long)} on the default stream. */
  public void storeKvStrided(StoreArgs args, StoreStrides strides) {
    storeKvStrided(args, strides, 0);
  }

  /**
   * {@link #storeKv} reading K and V through {@code strides}
   * (kvc_store_kv_strided), so a model's {@code [batch][kvHeads][n][headDim]}
   * tensors are stored without a copy: {@code key} and {@code value} start
   * at element 0 of their tensors. Host buffers must hold every element the
   * strides reach; {@code numTokens} must be a multiple of the sequence
   * length.
   */
  public void storeKvStrided(StoreArgs args, StoreStrides strides, long stream) {
    Args.notNull("args", args);
    Args.notNull("strides", strides);
    Args.notNull("src_dtype", args.srcDtype);
    LayerView v = view(args.layer);
    long seqLen = strides.seqLen == 0 ? args.numTokens : strides.seqLen;
    if (seqLen > 0 && args.numTokens % seqLen != 0) {
      throw Args.invalid("num_tokens (" + args.numTokens + ") must be a multiple of seq_len ("
          + seqLen + ")");
    }
    long sequences = seqLen == 0 ? 0 : args.numTokens / seqLen;
    long keyBytes = strides.reach(strides.key, sequences, seqLen, v.kvHeads(), v.headDim(),
        args.srcDtype.size());
    long valueBytes = strides.reach(strides.value, sequences, seqLen, v.kvHeads(), v.headDim(),
        args.srcDtype.size());
    long h = handle.acquire();
    kvc_store_args_t a = new kvc_store_args_t();
    kvc_store_strides_t s = new kvc_store_strides_t();
    try {
      boolean dev = onDevice();
      boolean any = args.numTokens > 0;
      KvcNative.kvc_store_args_init(a);
      a.setLayer(args.layer);
      a.setNum_tokens(args.numTokens);
      a.setSrc_dtype(args.srcDtype.code());
      a.setKey(need(args.key, "key", any ? keyBytes : 0, dev, any));
      a.setValue(need(args.value, "value", any ? valueBytes : 0, dev, false));
      a.setSlot_mapping(need(args.slotMapping, "slot_mapping", 8L * args.numTokens, dev, any));
      a.setK_scale(args.kScale);
      a.setV_scale(args.vScale);
      KvcNative.kvc_store_strides_init(s);
      s.setSeq_len(strides.seqLen);
      s.setKey_seq_stride(strides.key[0]);
      s.setKey_token_stride(strides.key[1]);
      s.setKey_head_stride(strides.key[2]);
      s.setValue_seq_stride(strides.value[0]);
      s.setValue_token_stride(strides.value[1]);
      s.setValue_head_stride(strides.value[2]);
      KvcNative.kvc_store_kv_strided(h, a, s, stream);
    } finally {
      a.delete();
      s.delete();
      Reference.reachabilityFence(args);
      handle.release();
    }
  }

  /** {@link #copyBlocks(int, int[], int[], int[], long)} on the default stream. */
  public void copyBlocks(int group, int[] src, int[] dst, int[] numTokens) {
    copyBlocks(group, src, dst, numTokens, 0);
  }

  /**
   * Copies block {@code src[i]} to {@code dst[i]} in layer group
   * {@code group}, whole or only the first {@code numTokens[i]} token rows
   * ({@code numTokens} may be null), in one batched launch (kvc_copy_blocks).
   */
  public void copyBlocks(int group, int[] src, int[] dst, int[] numTokens, long stream) {
    Args.u32("group", group);
    Args.notNull("src", src);
    Args.notNull("dst", dst);
    if (dst.length != src.length || (numTokens != null && numTokens.length != src.length)) {
      throw Args.invalid("src, dst and num_tokens differ in length");
    }
    long h = handle.acquire();
    try {
      Scratch s = Scratch.get();
      int n = src.length;
      int a = s.alloc(4L * n);
      s.putInts(a, src, 0, n);
      int b = s.alloc(4L * n);
      s.putInts(b, dst, 0, n);
      int c = numTokens == null ? -1 : s.alloc(4L * n);
      if (numTokens != null) {
        s.putInts(c, numTokens, 0, n);
      }
      KvcNative.kvc_copy_blocks(h, group, s.address(a), s.address(b),
          c < 0 ? 0 : s.address(c), n, stream);
    } finally {
      handle.release();
    }
  }

  private kvc_decode_args_t decodeStruct(DecodeArgs args, boolean required) {
    Args.notNull("q_dtype", args.qDtype);
    LayerView v = view(args.layer);
    boolean dev = onDevice();
    boolean req = required && args.batch > 0;
    kvc_decode_args_t a = new kvc_decode_args_t();
    try {
      KvcNative.kvc_decode_args_init(a);
      a.setLayer(args.layer);
      a.setBatch(args.batch);
      a.setQ_heads(args.qHeads);
      a.setQ_dtype(args.qDtype.code());
      a.setTable_format(args.tableFormat.code());
      a.setTable_stride(args.tableStride);
      a.setMax_seq_len(args.maxSeqLen);
      a.setWindow(args.window);
      a.setSoftmax_scale(args.softmaxScale);
      a.setK_scale(args.kScale);
      a.setV_scale(args.vScale);
      a.setWorkspace_bytes(args.workspaceBytes);
      long b = args.batch;
      long qBytes = b * args.qHeads * v.headDim() * args.qDtype.size();
      a.setQuery(need(args.query, "query", qBytes, dev, req));
      a.setOut(need(args.out, "out", qBytes, dev, req));
      a.setSeq_lens(need(args.seqLens, "seq_lens", 4 * b, dev, req));
      if (args.tableFormat == TableFormat.CSR) {
        a.setIndptr(need(args.indptr, "indptr", 4 * (b + 1), dev, req));
        long entries = -1;
        if (args.indptr != null && args.indptr.isBuffer() && b > 0) {
          entries = args.indptr.intAt(b);
          if (entries < 0) {
            throw Args.invalid("indptr[" + b + "] = " + entries + " is negative");
          }
        }
        a.setBlock_table(need(args.blockTable, "block_table", entries < 0 ? -1 : 4 * entries,
            dev, req));
      } else {
        a.setBlock_table(need(args.blockTable, "block_table", 4 * b * args.tableStride, dev,
            req));
      }
      a.setWorkspace(need(args.workspace, "workspace", args.workspaceBytes, dev,
          req && args.workspaceBytes > 0));
      return a;
    } catch (RuntimeException e) {
      a.delete();
      throw e;
    }
  }

  /**
   * Bytes of workspace {@link #decodeAttention} needs for these arguments
   * (kvc_decode_workspace_size); the size depends only on layer, batch, q
   * heads and max sequence length, but the library checks the arguments as
   * decode does (query, out, seq_lens and the table must be set). 0 on a
   * CPU cache.
   */
  public long decodeWorkspaceSize(DecodeArgs args) {
    Args.notNull("args", args);
    long h = handle.acquire();
    kvc_decode_args_t a = null;
    try {
      a = decodeStruct(args, false);
      Scratch s = Scratch.get();
      int out = s.alloc(8);
      KvcNative.kvc_decode_workspace_size(h, a, s.address(out));
      return s.getLong(out);
    } finally {
      if (a != null) {
        a.delete();
      }
      handle.release();
    }
  }

  /** {@link #decodeAttention(DecodeArgs, long)} on the default stream. */
  public void decodeAttention(DecodeArgs args) {
    decodeAttention(args, 0);
  }

  /**
   * Paged decode attention of one layer (kvc_decode_attention). Host
   * buffers are checked against the arguments' shapes.
   */
  public void decodeAttention(DecodeArgs args, long stream) {
    Args.notNull("args", args);
    long h = handle.acquire();
    kvc_decode_args_t a = null;
    try {
      a = decodeStruct(args, true);
      KvcNative.kvc_decode_attention(h, a, stream);
    } finally {
      if (a != null) {
        a.delete();
      }
      Reference.reachabilityFence(args);
      handle.release();
    }
  }

  /**
   * Waits for the kernel work enqueued on {@code stream} and throws the
   * first error it recorded since the previous check
   * (kvc_cache_get_async_error; the status and message are read inside the
   * same native call). Returns normally when there was none.
   */
  public void checkAsyncError(long stream) {
    long h = handle.acquire();
    try {
      Scratch s = Scratch.get();
      int out = s.alloc(8);
      KvcNative.kvc_cache_get_async_error(h, stream, s.address(out));
    } finally {
      handle.release();
    }
  }
}
