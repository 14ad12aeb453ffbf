package org.kvcache;

/**
 * What {@link Cache#decodeAttention} computes (kvc_decode_args_t): paged
 * decode attention of one layer, one query token per sequence. Query and
 * out are {@code [batch][qHeads][headDim]} of {@code qDtype}; sequence
 * lengths are int32 {@code [batch]}; the block table is int32, padded
 * {@code [batch][tableStride]} or CSR (with {@code indptr[batch + 1]}).
 * On a CPU cache the memory is host memory (direct buffers, bounds
 * checked); on a CUDA cache, device addresses.
 */
public final class DecodeArgs {
  int layer;
  int rank;
  int batch;
  int qHeads;
  DType qDtype;
  TableFormat tableFormat = TableFormat.PADDED;
  Memory query;
  Memory out;
  Memory seqLens;
  Memory blockTable;
  Memory indptr;
  int tableStride;
  int maxSeqLen;
  int window;
  float softmaxScale;
  float kScale = 1.0f;
  float vScale = 1.0f;
  Memory workspace;
  long workspaceBytes;

  /** Empty arguments: padded table, scales 1, softmax scale 1/sqrt(head_dim). */
  public DecodeArgs() {}

  /** Model layer. */
  public DecodeArgs layer(int layer) {
    this.layer = Args.u32("layer", layer);
    return this;
  }

  /**
   * Tensor parallelism: the rank whose pool is used ({@link Config#setRanks}; its share of
   * the heads, {@link Cache#layerViewRank}); 0 with one rank.
   */
  public DecodeArgs rank(int rank) {
    this.rank = Args.u32("rank", rank);
    return this;
  }

  /** Sequences; 0 is a no-op. */
  public DecodeArgs batch(int batch) {
    this.batch = Args.u32("batch", batch);
    return this;
  }

  /** Query heads, a multiple of the layer's kv heads. */
  public DecodeArgs qHeads(int qHeads) {
    this.qHeads = Args.u32("q_heads", qHeads);
    return this;
  }

  /** Element type of query and out. */
  public DecodeArgs qDtype(DType dtype) {
    this.qDtype = Args.notNull("q_dtype", dtype);
    return this;
  }

  /** Padded table (row stride {@code stride}). */
  public DecodeArgs paddedTable(Memory table, int stride) {
    this.tableFormat = TableFormat.PADDED;
    this.blockTable = table;
    this.indptr = null;
    this.tableStride = Args.u32("table_stride", stride);
    return this;
  }

  /** CSR table: indices and indptr. */
  public DecodeArgs csrTable(Memory indices, Memory indptr) {
    this.tableFormat = TableFormat.CSR;
    this.blockTable = indices;
    this.indptr = indptr;
    this.tableStride = 0;
    return this;
  }

  /** Queries. */
  public DecodeArgs query(Memory query) {
    this.query = query;
    return this;
  }

  /** Output, written. */
  public DecodeArgs out(Memory out) {
    this.out = out;
    return this;
  }

  /** int32 length of each sequence. */
  public DecodeArgs seqLens(Memory seqLens) {
    this.seqLens = seqLens;
    return this;
  }

  /** Upper bound of every sequence length (&gt; 0 when batch &gt; 0). */
  public DecodeArgs maxSeqLen(int maxSeqLen) {
    this.maxSeqLen = Args.u32("max_seq_len", maxSeqLen);
    return this;
  }

  /** Attend to the last {@code window} tokens; 0 = the layer's window. */
  public DecodeArgs window(int window) {
    this.window = Args.u32("window", window);
    return this;
  }

  /** Score scale; 0 = 1 / sqrt(head_dim). */
  public DecodeArgs softmaxScale(float scale) {
    this.softmaxScale = scale;
    return this;
  }

  /** fp8 dequantization scale of K. */
  public DecodeArgs kScale(float scale) {
    this.kScale = scale;
    return this;
  }

  /** fp8 dequantization scale of V. */
  public DecodeArgs vScale(float scale) {
    this.vScale = scale;
    return this;
  }

  /** Scratch of {@code bytes} bytes (see {@link Cache#decodeWorkspaceSize}). */
  public DecodeArgs workspace(Memory workspace, long bytes) {
    this.workspace = workspace;
    this.workspaceBytes = Args.count("workspace_bytes", bytes);
    return this;
  }
}
