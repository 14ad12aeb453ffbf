package org.kvcache;

/**
 * What {@link Cache#prefillAttention} computes (kvc_prefill_args_t): paged
 * prefill attention of one layer over a ragged batch. Sequence b has the
 * new query tokens in rows {@code qoIndptr[b] .. qoIndptr[b + 1]} of query
 * and out ({@code [totalQ][qHeads][headDim]} of {@code qDtype}, totalQ =
 * {@code qoIndptr[batch]}) and {@code kvLens[b]} tokens in the cache, new
 * ones included; query token i sits at position {@code kvLen - qLen + i}
 * and attends causally to every token before it through the block table
 * (int32, padded {@code [batch][tableStride]} or CSR with
 * {@code indptr[batch + 1]}). {@code qoIndptr} and {@code kvLens} are Java
 * arrays on every device (the library reads them on the host); the other
 * memory is host memory on a CPU cache (direct buffers, bounds checked) and
 * device addresses on a CUDA cache.
 */
public final class PrefillArgs {
  int layer;
  int rank;
  int qHeads;
  DType qDtype;
  TableFormat tableFormat = TableFormat.PADDED;
  int[] qoIndptr;
  int[] kvLens;
  int totalQ = -1;
  Memory query;
  Memory out;
  Memory lse;
  Memory blockTable;
  Memory indptr;
  int tableStride;
  int maxKvLen;
  int window;
  float softmaxScale;
  float logitsSoftCap;
  float kScale = 1.0f;
  float vScale = 1.0f;
  Memory workspace;
  long workspaceBytes;

  /** Empty arguments: padded table, scales 1, softmax scale 1/sqrt(head_dim), no soft cap. */
  public PrefillArgs() {}

  /** Model layer. */
  public PrefillArgs layer(int layer) {
    this.layer = Args.u32("layer", layer);
    return this;
  }

  /**
   * Tensor parallelism: the rank whose pool is used ({@link Config#setRanks}; its share of
   * the heads, {@link Cache#layerViewRank}); 0 with one rank.
   */
  public PrefillArgs rank(int rank) {
    this.rank = Args.u32("rank", rank);
    return this;
  }

  /** Query heads, a multiple of the layer's kv heads. */
  public PrefillArgs qHeads(int qHeads) {
    this.qHeads = Args.u32("q_heads", qHeads);
    return this;
  }

  /** Element type of query and out. */
  public PrefillArgs qDtype(DType dtype) {
    this.qDtype = Args.notNull("q_dtype", dtype);
    return this;
  }

  /**
   * The ragged batch: {@code batch + 1} query row offsets from 0 and
   * {@code batch} kv lengths (copied when the call is made).
   */
  public PrefillArgs sequences(int[] qoIndptr, int[] kvLens) {
    this.qoIndptr = Args.notNull("qo_indptr", qoIndptr);
    this.kvLens = Args.notNull("kv_lens", kvLens);
    return this;
  }

  /**
   * Query rows for {@link Cache#prefillWorkspaceSize} when sizing a
   * workspace for a largest step; by default {@code qoIndptr[batch]}.
   */
  public PrefillArgs totalQ(int totalQ) {
    this.totalQ = Args.u32("total_q", totalQ);
    return this;
  }

  /** Padded table (row stride {@code stride}). */
  public PrefillArgs paddedTable(Memory table, int stride) {
    this.tableFormat = TableFormat.PADDED;
    this.blockTable = table;
    this.indptr = null;
    this.tableStride = Args.u32("table_stride", stride);
    return this;
  }

  /** CSR table: indices and indptr. */
  public PrefillArgs csrTable(Memory indices, Memory indptr) {
    this.tableFormat = TableFormat.CSR;
    this.blockTable = indices;
    this.indptr = indptr;
    this.tableStride = 0;
    return this;
  }

  /** Queries. */
  public PrefillArgs query(Memory query) {
    this.query = query;
    return this;
  }

  /** Output, written. */
  public PrefillArgs out(Memory out) {
    this.out = out;
    return this;
  }

  /** float32 {@code [totalQ][qHeads]} log-sum-exp of the scores, written; null for none. */
  public PrefillArgs lse(Memory lse) {
    this.lse = lse;
    return this;
  }

  /** Upper bound of every kv length (&gt; 0 when batch &gt; 0). */
  public PrefillArgs maxKvLen(int maxKvLen) {
    this.maxKvLen = Args.u32("max_kv_len", maxKvLen);
    return this;
  }

  /** Attend to the last {@code window} tokens of each query; 0 = the layer's window. */
  public PrefillArgs window(int window) {
    this.window = Args.u32("window", window);
    return this;
  }

  /** Score scale; 0 = 1 / sqrt(head_dim). */
  public PrefillArgs softmaxScale(float scale) {
    this.softmaxScale = scale;
    return this;
  }

  /** Soft cap of the scores, {@code cap * tanh(s / cap)}; 0 = none. */
  public PrefillArgs logitsSoftCap(float cap) {
    this.logitsSoftCap = cap;
    return this;
  }

  /** fp8 dequantization scale of K. */
  public PrefillArgs kScale(float scale) {
    this.kScale = scale;
    return this;
  }

  /** fp8 dequantization scale of V. */
  public PrefillArgs vScale(float scale) {
    this.vScale = scale;
    return this;
  }

  /** Scratch of {@code bytes} bytes (see {@link Cache#prefillWorkspaceSize}). */
  public PrefillArgs workspace(Memory workspace, long bytes) {
    this.workspace = workspace;
    this.workspaceBytes = Args.count("workspace_bytes", bytes);
    return this;
  }
}
