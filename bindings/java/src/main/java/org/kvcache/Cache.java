package org.kvcache;

import java.nio.IntBuffer;
import java.nio.LongBuffer;
import java.util.List;

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
 *
 * <p>This class is the facade: it describes the cache, reads its statistics
 * and closes it, and hands each module's calls to a package-private class,
 * as the Go and Rust packages split them by file: {@link Sequences},
 * {@link Batches} (the tables of a scheduling step) and {@link Kernels}
 * (store, copy, decode and prefill attention).
 */
public final class Cache implements AutoCloseable {
  private final NativeHandle handle;
  private final Sequences sequences;
  private final Events events;
  private final Batches batches;
  private final Kernels kernels;
  private LayerView[] views;  // the kernels' shapes, read again after a resize

  /**
   * Validates the config, sizes and allocates the primary pool, and creates
   * the cache (kvc_cache_create). The config may be closed afterwards.
   */
  public Cache(Config config) {
    Args.notNull("config", config);
    long address = config.callLong(c -> {
      Scratch s = Scratch.get();
      int out = s.alloc(8);
      KvcNative.kvc_cache_create(c, s.address(out));
      return s.getLong(out);
    });
    handle = new NativeHandle(address, "Cache");
    sequences = new Sequences(handle);
    events = new Events(handle);
    batches = new Batches(handle);
    try {
      CacheDescription description = describe();
      views = new LayerView[description.numLayers()];
      for (int i = 0; i < views.length; i++) {
        views[i] = layerView(i);
      }
      kernels = new Kernels(handle, description.deviceKind() == DeviceKind.CUDA, views);
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

  // ======================================================================
  // Description
  // ======================================================================

  /** Summary of the cache (kvc_cache_describe). */
  public CacheDescription describe() {
    return handle.call(h -> Records.cacheDescription(h));
  }

  /** State resource {@code index}: kind, managed or local and why, the view (state.h). */
  public ResourceDescription describeResource(int index) {
    Args.u32("index", index);
    return handle.call(h -> Records.resourceDescription(h, index));
  }

  /**
   * Paged KV resource {@code index}: its geometry, and whether it is managed together with KV
   * resource 0 or in pools of its own, and why (kvc_cache_describe_kv_resource).
   */
  public KvResourceDescription describeKvResource(int index) {
    Args.u32("index", index);
    return handle.call(h -> Records.kvResourceDescription(h, index));
  }

  /** {@code resource} value of {@link #stateSlots} meaning every resource (KVC_STATE_ALL). */
  public static final int STATE_ALL = -1;

  /**
   * Each sequence's slot of {@code resource} (kvc_batch_state_slots; AutoDeploy's slot_idx);
   * with {@link #STATE_ALL}, every resource's at {@code [i * numResources + r]}.
   */
  public int[] stateSlots(long[] ids, int resource) {
    Args.notNull("ids", ids);
    int per = resource == STATE_ALL ? describe().numResources() : 1;
    int[] slots = new int[ids.length * per];
    handle.run(h -> {
      Scratch s = Scratch.get();
      int i = s.alloc(8L * ids.length + 8);
      s.putLongs(i, ids, 0, ids.length);
      int o = s.alloc(4L * slots.length + 4);
      KvcNative.kvc_batch_state_slots(h, s.address(i), ids.length, resource, s.address(o));
      s.getInts(o, slots, 0, slots.length);
    });
    return slots;
  }

  /**
   * {@link #publishState(long, long, long)} on the default stream.
   */
  public void publishState(long id, long position) {
    publishState(id, position, 0);
  }

  /**
   * Publishes sequence {@code id}'s state at {@code position} (a positive
   * multiple of tokens_per_block, at most its committed tokens) as the
   * snapshot of its block ending there, copied on {@code stream}
   * (kvc_sequence_publish_state): a later prompt with that prefix reuses it,
   * and a rewind to {@code position} restores it (state.h).
   * @throws KvCacheException NOT_FOUND, INVALID_ARGUMENT (the position, no
   *     state resources), INVALID_STATE (the block is not published, no
   *     snapshot slots)
   */
  public void publishState(long id, long position, long stream) {
    Args.count("position", position);
    handle.run(h -> KvcNative.kvc_sequence_publish_state(h, id, position, stream));
  }

  /** The state snapshot pool and its counters (kvc_cache_get_snapshot_stats). */
  public SnapshotStats snapshotStats() {
    return handle.call(h -> Records.snapshotStats(h));
  }

  /** Layer group {@code group} (kvc_cache_describe_group). */
  public GroupDescription describeGroup(int group) {
    Args.u32("group", group);
    return handle.call(h -> Records.groupDescription(h, group));
  }

  /** Block pool {@code pool} (kvc_cache_describe_pool). */
  public PoolDescription describePool(int pool) {
    Args.u32("pool", pool);
    return handle.call(h -> Records.poolDescription(h, pool));
  }

  /** Tensor view of layer {@code layer} (kvc_cache_layer_view). */
  public LayerView layerView(int layer) {
    Args.u32("layer", layer);
    return handle.call(h -> Records.layerView(h, layer));
  }

  /**
   * Tensor view of layer {@code layer} on rank {@code rank} (kvc_cache_layer_view_rank;
   * tensor parallelism, {@link Config#setRanks}): the rank's pool and its share of the heads.
   */
  public LayerView layerViewRank(int rank, int layer) {
    Args.u32("rank", rank);
    Args.u32("layer", layer);
    return handle.call(h -> Records.layerViewRank(h, rank, layer));
  }

  // ======================================================================
  // Moving blocks between caches (transfer.h)
  // ======================================================================

  /**
   * Holds the committed full blocks of sequence {@code id} for a transfer
   * (kvc_cache_export_sequence): {@code numTokens} 0 for every committed full block, else a
   * block-aligned count no larger than that. Close the export to release them.
   */
  public Export exportSequence(long id, long numTokens) {
    Args.count("num_tokens", numTokens);
    return new Export(handle.callLong(h -> Transfers.exportSequence(h, id, numTokens)), handle);
  }

  /**
   * The memory backing pool {@code pool} of rank {@code rank}, for another process to map
   * (kvc_cache_describe_pool_share; CUDA IPC, transfer.h). The CPU backend, and memory the driver
   * would not create shareable, throw {@link KvCacheException} with {@link Status#UNSUPPORTED} and
   * the reason.
   */
  public PoolShare describePoolShare(int rank, int pool) {
    Args.u32("rank", rank);
    Args.u32("pool", pool);
    return handle.call(h -> Transfers.poolShare(h, rank, pool));
  }

  /**
   * Exports chunk {@code chunk} of pool {@code pool} of rank {@code rank}
   * (kvc_cache_export_pool_chunk): its {@link ShareChunk#fd} is a new POSIX file descriptor the
   * caller owns and closes.
   */
  public ShareChunk exportPoolChunk(int rank, int pool, long chunk) {
    Args.u32("rank", rank);
    Args.u32("pool", pool);
    Args.count("chunk", chunk);
    return handle.call(h -> Transfers.exportChunk(h, rank, pool, chunk));
  }

  /**
   * Verifies a peer's key blob against this cache and the receiver's own tokens and options,
   * then adds sequence {@code id} with them, reserving blocks for the positions this cache lacks
   * (kvc_cache_import_begin). A blob of another prompt, salt, geometry or format is refused with
   * nothing changed, naming the first block that differs.
   *
   * @param options the options the sender's sequence had (salt, LoRA id, extra keys); null: none
   */
  public Import importBegin(long id, int[] tokens, SequenceOptions options, byte[] keys) {
    Args.notNull("tokens", tokens);
    Args.notNull("keys", keys);
    return new Import(handle.callLong(h -> Transfers.importBegin(h, id, tokens, options, keys)),
        handle);
  }

  // ======================================================================
  // Sequences
  // ======================================================================

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
    return sequences.addSequence(id, tokens, from, count, options, stream);
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
    sequences.extendSequence(id, tokens, from, count, stream);
  }

  /**
   * Declares the KV of the first {@code numComputed} tokens written: full
   * blocks among them become reusable (kvc_sequence_commit).
   */
  public void commit(long id, long numComputed) {
    sequences.commit(id, numComputed);
  }

  /** Drops the last {@code numTokens} tokens of sequence {@code id} (kvc_sequence_rewind). */
  public void rewind(long id, long numTokens) {
    sequences.rewind(id, numTokens);
  }

  /** Creates sequence {@code child} sharing every block of {@code parent} (kvc_sequence_fork). */
  public void fork(long parent, long child) {
    sequences.fork(parent, child);
  }

  /** Removes sequence {@code id}; its committed blocks stay cached (kvc_sequence_remove). */
  public void removeSequence(long id) {
    sequences.removeSequence(id);
  }

  /**
   * Pins the published blocks of sequence {@code id} (its committed full
   * blocks): they are never evicted, even after the sequence is removed,
   * until {@link #unpin} (kvc_sequence_pin).
   * @throws KvCacheException NOT_FOUND, ALREADY_EXISTS (already pinned)
   */
  public void pin(long id) {
    sequences.pin(id);
  }

  /** Releases the blocks pinned under {@code id} (kvc_sequence_unpin). */
  public void unpin(long id) {
    sequences.unpin(id);
  }

  /** State of sequence {@code id} (kvc_sequence_describe). */
  public SequenceDescription describeSequence(long id) {
    return sequences.describeSequence(id);
  }

  /** Block ids of sequence {@code id} in layer group {@code group}, in token order. */
  public int[] blockIds(long id, int group) {
    return sequences.blockIds(id, group);
  }

  /**
   * Block ids of sequence {@code id} in {@code group} written into
   * {@code out[from ..]} (kvc_sequence_block_ids).
   * @return the number of blocks
   * @throws KvCacheException BUFFER_TOO_SMALL when they do not fit (nothing written)
   */
  public int blockIds(long id, int group, int[] out, int from) {
    return sequences.blockIds(id, group, out, from);
  }

  /** Blocks per layer group that {@code numTokens} more tokens of {@code id} need (kvc_sequence_blocks_needed). */
  public long blocksNeeded(long id, long numTokens) {
    return sequences.blocksNeeded(id, numTokens);
  }

  /** {@link #probe(int[], int, int, SequenceOptions)} of the whole array. */
  public long probe(int[] tokens, SequenceOptions options) {
    return probe(tokens, 0, Args.notNull("tokens", tokens).length, options);
  }

  /**
   * How many tokens of this prompt {@link #addSequence} would find cached,
   * with no side effect (kvc_cache_probe). It looks at the primary and host
   * tiers only: an add on a cache with a disk or remote tier may find more
   * (the blocks it loads from them).
   * @param options null for the defaults; the scope must be the add's
   */
  public long probe(int[] tokens, int from, int count, SequenceOptions options) {
    return sequences.probe(tokens, from, count, options);
  }

  // ======================================================================
  // Batches
  // ======================================================================

  /** One decode step: appends {@code tokens[i]} to sequence {@code ids[i]} (kvc_batch_extend). */
  public void extendBatch(long[] ids, int[] tokens) {
    extendBatch(ids, tokens, 0);
  }

  /**
   * One decode step, all or nothing: appends {@code tokens[i]} to sequence
   * {@code ids[i]} for every i (kvc_batch_extend).
   */
  public void extendBatch(long[] ids, int[] tokens, long stream) {
    batches.extendBatch(ids, tokens, stream);
  }

  /**
   * Padded block tables of group {@code group}, sized to fit
   * (kvc_batch_block_table).
   */
  public BlockTable blockTable(int group, long[] ids, int pad) {
    return batches.blockTable(group, ids, pad);
  }

  /**
   * Padded block tables into {@code table} ({@code [ids.length][maxBlocks]}
   * from index 0; kvc_batch_block_table).
   * @return the longest row over the batch
   * @throws KvCacheException BUFFER_TOO_SMALL when a row is longer than maxBlocks
   */
  public long blockTable(int group, long[] ids, int[] table, int maxBlocks, int pad) {
    return batches.blockTable(group, ids, table, maxBlocks, pad);
  }

  /**
   * Padded block tables written straight into a direct, native-order
   * buffer from its position (no copy; kvc_batch_block_table).
   * @return the longest row over the batch
   */
  public long blockTable(int group, long[] ids, IntBuffer table, int maxBlocks, int pad) {
    return batches.blockTable(group, ids, table, maxBlocks, pad);
  }

  /** Block tables of group {@code group} in CSR form, sized to fit (kvc_batch_block_table_csr). */
  public CsrTable blockTableCsr(int group, long[] ids) {
    return batches.blockTableCsr(group, ids);
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
    return batches.blockTableCsr(group, ids, indptr, indices, lastPageLen);
  }

  /**
   * CSR block tables written straight into direct, native-order buffers
   * from their positions (kvc_batch_block_table_csr).
   * @return the number of indices written
   */
  public long blockTableCsr(int group, long[] ids, IntBuffer indptr, IntBuffer indices,
      IntBuffer lastPageLen) {
    return batches.blockTableCsr(group, ids, indptr, indices, lastPageLen);
  }

  /** Current lengths of the sequences (kvc_batch_sequence_lengths). */
  public int[] sequenceLengths(long[] ids) {
    return batches.sequenceLengths(ids);
  }

  /** Current lengths of the sequences into {@code lengths[0 .. ids.length)}. */
  public void sequenceLengths(long[] ids, int[] lengths) {
    batches.sequenceLengths(ids, lengths);
  }

  /** Current lengths written straight into a direct, native-order buffer from its position. */
  public void sequenceLengths(long[] ids, IntBuffer lengths) {
    batches.sequenceLengths(ids, lengths);
  }

  /**
   * Slot mapping of the tokens added to each sequence since the previous
   * call for {@code group}, sized to fit; advances each sequence's cursor
   * (kvc_batch_slot_mapping).
   */
  public SlotMapping slotMapping(int group, long[] ids) {
    return batches.slotMapping(group, ids);
  }

  /**
   * Slot mapping into caller arrays (kvc_batch_slot_mapping): {@code slots}
   * from index 0, {@code newTokens} (may be null) ids.length entries.
   * @return the number of slots written
   * @throws KvCacheException BUFFER_TOO_SMALL when slots is too short (no cursor advances)
   */
  public long slotMapping(int group, long[] ids, long[] slots, int[] newTokens) {
    return batches.slotMapping(group, ids, slots, newTokens);
  }

  /**
   * Slot mapping written straight into a direct, native-order buffer from
   * its position (kvc_batch_slot_mapping); {@code newTokens} may be null.
   * @return the number of slots written
   */
  public long slotMapping(int group, long[] ids, LongBuffer slots, IntBuffer newTokens) {
    return batches.slotMapping(group, ids, slots, newTokens);
  }

  // ======================================================================
  // Statistics
  // ======================================================================

  /** Current statistics (kvc_cache_get_stats). */
  public CacheStats stats() {
    return handle.call(h -> Records.cacheStats(h));
  }

  /**
   * Current statistics of layer group {@code group}, 0 &lt;= group &lt;
   * numGroups (kvc_cache_get_group_stats). See {@link GroupStats} for what a
   * windowed group counts.
   * @throws KvCacheException INVALID_ARGUMENT for a group out of range
   */
  public GroupStats groupStats(int group) {
    Args.u32("group", group);
    return handle.call(h -> Records.groupStats(h, group));
  }

  /**
   * Moves the manual retention clock forward; expired retention priorities
   * revert to the default at once (kvc_cache_advance_clock).
   * @throws KvCacheException INVALID_STATE on a cache reading the monotonic clock
   */
  public void advanceClock(long milliseconds) {
    handle.run(h -> KvcNative.kvc_cache_advance_clock(h, milliseconds));
  }

  /** {@link #makeRoom(long, long)} on the default stream. */
  public long makeRoom(long blockSets) {
    return makeRoom(blockSets, 0);
  }

  /**
   * Evicts cached blocks ahead of need until {@code blockSets} block sets
   * are free, as the next adds and extends would (the same victims; a host
   * tier takes those at or above its offload priority, its copies on
   * {@code stream}); call it while the device runs a step. Blocks in use
   * never go: asking for more than the cached blocks can free is no error
   * (kvc_cache_make_room).
   * @return the block sets free afterwards
   * @throws KvCacheException DEVICE (a host-tier copy failed)
   */
  public long makeRoom(long blockSets, long stream) {
    Args.count("block_sets", blockSets);
    return handle.callLong(h -> {
      Scratch s = Scratch.get();
      int out = s.alloc(8);
      KvcNative.kvc_cache_make_room(h, blockSets, stream, s.address(out));
      return s.getLong(out);
    });
  }

  /**
   * Evicts every cached block (kvc_cache_reset_reuse).
   * @throws KvCacheException INVALID_STATE while any block is in use
   */
  public void resetReuse() {
    handle.run(h -> KvcNative.kvc_cache_reset_reuse(h));
  }

  /**
   * Plans a resize from measured memory, changing nothing (kvc_cache_plan_resize):
   * {@code memForPaged = (freeBytes - nonPagedBytes - forwardBytes) * fraction}, AutoDeploy's
   * formula. {@code freeBytes} 0: the device's free memory now plus this cache's pools.
   */
  public ResizePlan planResize(double fraction, long freeBytes, long nonPagedBytes,
      long forwardBytes) {
    int pools = describe().numPools();
    return handle.call(h -> Records.resizePlan(h, fraction, freeBytes, nonPagedBytes,
        forwardBytes, pools));
  }

  /**
   * Resizes the primary pools in place (kvc_cache_resize): base addresses, layer views and the
   * ids of blocks in use stay; a grow adds blocks, a shrink evicts cached blocks in victim order
   * (to the host tier where they qualify) until the rest fit, moves the cached blocks past the
   * new end below it, and is refused ({@link Status#OUT_OF_BLOCKS}, nothing changed) over a
   * block in use past the end.
   */
  public void resize(long primaryBytes) {
    handle.run(h -> KvcNative.kvc_cache_resize(h, Args.count("primary_bytes", primaryBytes)));
    for (int i = 0; i < views.length; i++) {
      views[i] = layerView(i);  // the kernels check against the new block counts
    }
  }

  /**
   * Statistics of tier {@code tier} ({@link Tier#DISK} or {@link Tier#REMOTE};
   * kvc_cache_get_tier_stats).
   * @throws KvCacheException NOT_FOUND when the cache has no such tier,
   *     INVALID_ARGUMENT for the primary or host tier (see {@link #stats()})
   */
  public TierStats tierStats(Tier tier) {
    return handle.call(h -> Records.tierStats(h, tier));
  }

  /**
   * Waits until every block queued for writing to the cache's stores is
   * written or dropped (kvc_cache_flush_tiers); closing the cache waits the
   * same way.
   */
  public void flushTiers() {
    handle.run(h -> KvcNative.kvc_cache_flush_tiers(h));
  }

  /**
   * Runs the invariant checker (kvc_cache_check).
   * @throws KvCacheException INTERNAL naming the first broken invariant
   */
  public void check() {
    handle.run(h -> KvcNative.kvc_cache_check(h));
  }

  // ======================================================================
  // Events
  // ======================================================================

  /**
   * Moves every pending event of the cache, in id order, into a list
   * (kvc_cache_drain_events): drains until nothing is pending or until the
   * newest event emitted when the call began is drained, so a producer on
   * another thread cannot keep it looping. With {@code withTokens},
   * {@link KvEvent.Stored} carries the block's token ids. When events were
   * dropped because the ring was full, the first event is a
   * {@link KvEvent.Lost}: rebuild the index from {@link #snapshot()}.
   * Drained events are gone from the cache. May run on another thread than
   * the serving calls.
   *
   * @throws KvCacheException UNSUPPORTED when events are off
   *     ({@link Config#setEventBufferSize(int)} 0)
   */
  public List<KvEvent> drainEvents(boolean withTokens) {
    return events.drain(withTokens);
  }

  /**
   * Every cached block (both tiers), parents before children, as of the
   * snapshot's event id (kvc_cache_snapshot).
   *
   * @throws KvCacheException UNSUPPORTED when events are off
   */
  public Snapshot snapshot() {
    return events.snapshot();
  }

  // ======================================================================
  // Kernels
  // ======================================================================

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
    kernels.storeKv(args, stream);
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
    kernels.storeKvStrided(args, strides, stream);
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
    kernels.copyBlocks(group, src, dst, numTokens, stream);
  }

  /**
   * Bytes of workspace {@link #decodeAttention} needs for these arguments
   * (kvc_decode_workspace_size); the size depends only on layer, batch, q
   * heads and max sequence length, but the library checks the arguments as
   * decode does (query, out, seq_lens and the table must be set). 0 on a
   * CPU cache.
   */
  public long decodeWorkspaceSize(DecodeArgs args) {
    return kernels.decodeWorkspaceSize(args);
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
    kernels.decodeAttention(args, stream);
  }

  /**
   * Bytes of workspace {@link #prefillAttention} needs for these arguments
   * (kvc_prefill_workspace_size); the size depends only on layer, batch,
   * total query rows, q heads and max kv length and never decreases as one
   * of them grows: size one workspace for the largest step. 0 on a CPU
   * cache.
   */
  public long prefillWorkspaceSize(PrefillArgs args) {
    return kernels.prefillWorkspaceSize(args);
  }

  /** {@link #prefillAttention(PrefillArgs, long)} on the default stream. */
  public void prefillAttention(PrefillArgs args) {
    prefillAttention(args, 0);
  }

  /**
   * Paged prefill attention of one layer (kvc_prefill_attention): new query
   * tokens, causal among themselves, against all the cached K/V of their
   * sequences. Host buffers are checked against the arguments' shapes.
   */
  public void prefillAttention(PrefillArgs args, long stream) {
    kernels.prefillAttention(args, stream);
  }

  /**
   * Waits for the kernel work enqueued on {@code stream} and throws the
   * first error it recorded since the previous check
   * (kvc_cache_get_async_error; the status and message are read inside the
   * same native call). Returns normally when there was none.
   */
  public void checkAsyncError(long stream) {
    kernels.checkAsyncError(stream);
  }
}
