package org.kvcache;

/**
 * A cache configuration (kvc_config_t): typed setters and getters, validated
 * as a whole by {@link #validate()} and by {@link Cache#Cache(Config)}.
 *
 * <p>Setters return {@code this} and throw {@link KvCacheException}
 * ({@link Status#INVALID_ARGUMENT}, with the library's message) for a value
 * out of range; the config is then unchanged. A config is a plain value:
 * the cache copies it at creation. Close it when done (try-with-resources);
 * using it after close throws {@link Status#INVALID_STATE}. Like the C
 * object it is not meant to be changed from two threads at once, but no
 * use of it from any thread can crash the process.
 */
public final class Config implements AutoCloseable {
  private final NativeHandle handle;

  /** A config holding the library's defaults (see config.h). */
  public Config() {
    NativeLibrary.load();
    handle = new NativeHandle(Scratch.scope(unused -> {
      Scratch s = Scratch.get();
      int out = s.alloc(8);
      KvcNative.kvc_config_create(s.address(out));
      return s.getLong(out);
    }), "Config");
  }

  private Config(long address) {
    handle = new NativeHandle(address, "Config");
  }

  /** An independent copy (kvc_config_clone). */
  public Config copy() {
    return handle.call(h -> {
      Scratch s = Scratch.get();
      int out = s.alloc(8);
      KvcNative.kvc_config_clone(h, s.address(out));
      return new Config(s.getLong(out));
    });
  }

  /** Frees the native config. A second close does nothing. */
  @Override
  public void close() {
    long h = handle.close();
    if (h != 0) {
      KvcNative.kvc_config_destroy(h);
    }
  }

  /** Whether {@link #close()} was called. */
  public boolean isClosed() {
    return handle.isClosed();
  }

  /** Checks the config as a whole, as cache creation will. */
  public Config validate() {
    return handle.call(h -> {
      KvcNative.kvc_config_validate(h);
      return this;
    });
  }

  /** Runs {@code f} on the native config, as the caches' constructors read it. */
  long callLong(NativeHandle.LongCall f) {
    return handle.callLong(f);
  }

  /** Runs {@code f} on the native config (kvc_block_hashes reads it). */
  <T> T call(NativeHandle.Call<T> f) {
    return handle.call(f);
  }

  // ----- helpers: one out value through the scratch ---------------------

  private interface Getter {
    void call(long config, long out);
  }

  private long getU32(Getter g) {
    return handle.callLong(h -> {
      Scratch s = Scratch.get();
      int out = s.alloc(8);
      g.call(h, s.address(out));
      return s.getUnsignedInt(out);
    });
  }

  private long getU64(Getter g) {
    return handle.callLong(h -> {
      Scratch s = Scratch.get();
      int out = s.alloc(8);
      g.call(h, s.address(out));
      return s.getLong(out);
    });
  }

  private boolean getBool(Getter g) {
    return handle.call(h -> {
      Scratch s = Scratch.get();
      int out = s.alloc(8);
      g.call(h, s.address(out));
      return s.getBool(out);
    });
  }

  // ----- model shape -----------------------------------------------------

  /** Number of attention layers (> 0). */
  public Config setNumLayers(int numLayers) {
    return handle.call(h -> {
      KvcNative.kvc_config_set_num_layers(h, Args.u32("num_layers", numLayers));
      return this;
    });
  }

  /** Number of attention layers; 0 if unset. */
  public int getNumLayers() {
    return Args.toInt(getU32(KvcNative::kvc_config_get_num_layers));
  }

  /** The same number of KV heads (> 0) for every layer. */
  public Config setKvHeads(int kvHeads) {
    return handle.call(h -> {
      KvcNative.kvc_config_set_kv_heads(h, Args.u32("kv_heads", kvHeads));
      return this;
    });
  }

  /** KV heads per layer; the array length must equal the number of layers (checked by validate). */
  public Config setKvHeadsPerLayer(int... kvHeads) {
    Args.notNull("kv_heads", kvHeads);
    return handle.call(h -> {
      Scratch s = Scratch.get();
      int arr = s.alloc(4L * kvHeads.length);
      s.putInts(arr, kvHeads, 0, kvHeads.length);
      for (int i = 0; i < kvHeads.length; i++) {
        Args.u32("kv_heads[" + i + "]", kvHeads[i]);
      }
      KvcNative.kvc_config_set_kv_heads_per_layer(h, s.address(arr), kvHeads.length);
      return this;
    });
  }

  /** KV heads of one layer, as the cache will use them. */
  public int getKvHeads(int layer) {
    Args.u32("layer", layer);
    return handle.callInt(h -> {
      Scratch s = Scratch.get();
      int out = s.alloc(8);
      KvcNative.kvc_config_get_kv_heads(h, layer, s.address(out));
      return Args.toInt(s.getUnsignedInt(out));
    });
  }

  /** Head dimension (> 0). */
  public Config setHeadDim(int headDim) {
    return handle.call(h -> {
      KvcNative.kvc_config_set_head_dim(h, Args.u32("head_dim", headDim));
      return this;
    });
  }

  /** Head dimension; 0 if unset. */
  public int getHeadDim() {
    return Args.toInt(getU32(KvcNative::kvc_config_get_head_dim));
  }

  /** Element type of the stored K/V. */
  public Config setDtype(DType dtype) {
    Args.notNull("dtype", dtype);
    return handle.call(h -> {
      KvcNative.kvc_config_set_dtype(h, dtype.code());
      return this;
    });
  }

  /** Element type of the stored K/V. */
  public DType getDtype() {
    return DType.of(getU32(KvcNative::kvc_config_get_dtype));
  }

  /** 2 to store K and V, 1 when K and V are one tensor (MLA). */
  public Config setKvFactor(int kvFactor) {
    return handle.call(h -> {
      KvcNative.kvc_config_set_kv_factor(h, Args.u32("kv_factor", kvFactor));
      return this;
    });
  }

  /** The kv factor (1 or 2). */
  public int getKvFactor() {
    return Args.toInt(getU32(KvcNative::kvc_config_get_kv_factor));
  }

  /** Block layout. */
  public Config setLayout(Layout layout) {
    Args.notNull("layout", layout);
    return handle.call(h -> {
      KvcNative.kvc_config_set_layout(h, layout.code());
      return this;
    });
  }

  /** Block layout. */
  public Layout getLayout() {
    return Layout.of(getU32(KvcNative::kvc_config_get_layout));
  }

  /** Tokens per block: a power of two > 1 (at most 1024). */
  public Config setTokensPerBlock(int tokens) {
    return handle.call(h -> {
      KvcNative.kvc_config_set_tokens_per_block(h, Args.u32("tokens_per_block", tokens));
      return this;
    });
  }

  /** Tokens per block. */
  public int getTokensPerBlock() {
    return Args.toInt(getU32(KvcNative::kvc_config_get_tokens_per_block));
  }

  /**
   * Attention window per layer in tokens (0 = full), repeated over the
   * layers; no argument resets every layer to full attention.
   */
  public Config setAttentionWindows(int... windows) {
    Args.notNull("windows", windows);
    for (int i = 0; i < windows.length; i++) {
      Args.u32("windows[" + i + "]", windows[i]);
    }
    return handle.call(h -> {
      Scratch s = Scratch.get();
      int arr = s.alloc(4L * windows.length);
      s.putInts(arr, windows, 0, windows.length);
      KvcNative.kvc_config_set_attention_windows(h, s.address(arr), windows.length);
      return this;
    });
  }

  /** Attention window of one layer after repetition (0 = full). */
  public int getAttentionWindow(int layer) {
    Args.u32("layer", layer);
    return handle.callInt(h -> {
      Scratch s = Scratch.get();
      int out = s.alloc(8);
      KvcNative.kvc_config_get_attention_window(h, layer, s.address(out));
      return Args.toInt(s.getUnsignedInt(out));
    });
  }

  // ----- device and memory ----------------------------------------------

  /** Device of the primary pool: CPU (ordinal 0) or a CUDA ordinal. */
  public Config setDevice(DeviceKind kind, int ordinal) {
    Args.notNull("kind", kind);
    return handle.call(h -> {
      KvcNative.kvc_config_set_device(h, kind.code(), ordinal);
      return this;
    });
  }

  /**
   * Tensor parallelism (kvc_config_set_ranks): one cache over {@code ordinals.length} ranks,
   * rank r on device {@code ordinals[r]} of {@code kind} (CUDA device ordinals; on the CPU
   * distinct names of host pools). KV heads are split across the ranks, or replicated when
   * fewer than the ranks; one set of block ids valid on every rank; every byte budget is per
   * rank. {@link #setDevice} goes back to one rank.
   */
  public Config setRanks(DeviceKind kind, int... ordinals) {
    Args.notNull("kind", kind);
    Args.notNull("ordinals", ordinals);
    return handle.call(h -> {
      Scratch s = Scratch.get();
      int arr = s.alloc(4L * Math.max(1, ordinals.length));
      s.putInts(arr, ordinals, 0, ordinals.length);
      KvcNative.kvc_config_set_ranks(h, kind.code(), s.address(arr), ordinals.length);
      return this;
    });
  }

  /** The ranks' ordinals (one rank: the device ordinal) (kvc_config_get_ranks). */
  public int[] getRanks() {
    return handle.call(h -> {
      Scratch s = Scratch.get();
      int arr = s.alloc(4L * 64);
      int count = s.alloc(8);
      KvcNative.kvc_config_get_ranks(h, s.address(arr), 64, s.address(count));
      int n = Args.toInt(s.getUnsignedInt(count));
      int[] out = new int[n];
      for (int i = 0; i < n; i++) {
        out[i] = s.getInt(arr + 4 * i);
      }
      return out;
    });
  }

  /** Device kind of the primary pool. */
  public DeviceKind getDeviceKind() {
    return handle.call(h -> {
      Scratch s = Scratch.get();
      int out = s.alloc(8);
      KvcNative.kvc_config_get_device(h, s.address(out), 0);
      return DeviceKind.of(s.getUnsignedInt(out));
    });
  }

  /** Device ordinal of the primary pool. */
  public int getDeviceOrdinal() {
    return handle.callInt(h -> {
      Scratch s = Scratch.get();
      int out = s.alloc(8);
      KvcNative.kvc_config_get_device(h, 0, s.address(out));
      return s.getInt(out);
    });
  }

  /** Upper bound of the primary pool in bytes; 0 = none. */
  public Config setPrimaryBytes(long bytes) {
    return handle.call(h -> {
      KvcNative.kvc_config_set_primary_bytes(h, Args.count("primary_bytes", bytes));
      return this;
    });
  }

  /** Byte bound of the primary pool (0 = none). */
  public long getPrimaryBytes() {
    return getU64(KvcNative::kvc_config_get_primary_bytes);
  }

  /**
   * The most primary bytes {@link Cache#resize} may grow the pools to; 0 (default) = the
   * budget at creation. The pools reserve that much address space at creation.
   */
  public Config setMaxPrimaryBytes(long bytes) {
    return handle.call(h -> {
      KvcNative.kvc_config_set_max_primary_bytes(h, Args.count("max_primary_bytes", bytes));
      return this;
    });
  }

  /** Ceiling of {@link Cache#resize} (0 = the budget at creation). */
  public long getMaxPrimaryBytes() {
    return getU64(KvcNative::kvc_config_get_max_primary_bytes);
  }

  // ----- paged KV resources (kv_resource.h) ----------------------------

  /**
   * Adds a paged KV resource: {@code layers} (ascending, distinct model layer ids) with their
   * own kv heads, head dim, dtype, kv factor (2 or 1), layout and window (0 = full); returns
   * its index (kvc_config_add_kv_resource). Refused ({@link Status#INVALID_STATE}) once a
   * global shape setter was called, and those are refused after it.
   */
  public int addKvResource(int[] layers, int kvHeads, int headDim, DType dtype, int kvFactor,
      Layout layout, int window) {
    Args.notNull("layers", layers);
    Args.notNull("dtype", dtype);
    Args.notNull("layout", layout);
    return handle.call(h -> {
      Scratch s = Scratch.get();
      int out = s.alloc(8);
      int l = s.alloc(4L * Math.max(layers.length, 1));
      s.putInts(l, layers, 0, layers.length);
      kvc_kv_resource_t d = new kvc_kv_resource_t();
      try {
        KvcNative.kvc_kv_resource_init(d);
        d.setLayers(s.address(l));
        d.setNum_layers(layers.length);
        d.setKv_heads(Args.u32("kv_heads", kvHeads));
        d.setHead_dim(Args.u32("head_dim", headDim));
        d.setDtype(dtype.code());
        d.setKv_factor(Args.u32("kv_factor", kvFactor));
        d.setLayout(layout.code());
        d.setWindow(Args.u32("window", window));
        KvcNative.kvc_config_add_kv_resource(h, d, s.address(out));
      } finally {
        d.delete();
      }
      return Args.toInt(s.getUnsignedInt(out));
    });
  }

  // ----- state resources (state.h) ------------------------------------

  private interface Adder {
    void call(long config, long index);
  }

  private int addResource(Adder a) {
    return handle.call(h -> {
      Scratch s = Scratch.get();
      int out = s.alloc(8);
      a.call(h, s.address(out));
      return Args.toInt(s.getUnsignedInt(out));
    });
  }

  /**
   * Adds a Mamba SSM state resource, one slot {@code [numHeads][headDim][dState]} of
   * {@code dtype} (kvc_config_add_ssm_state); returns its index.
   */
  public int addSsmState(int numHeads, int headDim, int dState, DType dtype) {
    Args.notNull("dtype", dtype);
    return addResource((h, out) -> KvcNative.kvc_config_add_ssm_state(h,
        Args.u32("num_heads", numHeads), Args.u32("head_dim", headDim),
        Args.u32("d_state", dState), dtype.code(), out));
  }

  /** Adds a causal-conv state resource {@code [convDim][dConv]} (kvc_config_add_conv_state). */
  public int addConvState(int convDim, int dConv, DType dtype) {
    Args.notNull("dtype", dtype);
    return addResource((h, out) -> KvcNative.kvc_config_add_conv_state(h,
        Args.u32("conv_dim", convDim), Args.u32("d_conv", dConv), dtype.code(), out));
  }

  /** Adds a generic per-sequence state; alignment 0 = 256 (kvc_config_add_generic_state). */
  public int addGenericState(long bytes, long alignment) {
    return addResource((h, out) -> KvcNative.kvc_config_add_generic_state(h,
        Args.count("bytes", bytes), Args.count("alignment", alignment), out));
  }

  /** Adds an unpaged per-token resource (kvc_config_add_unpaged_resource). */
  public int addUnpagedResource(long bytesPerToken, long maxTokens) {
    return addResource((h, out) -> KvcNative.kvc_config_add_unpaged_resource(h,
        Args.count("bytes_per_token", bytesPerToken), Args.count("max_tokens", maxTokens), out));
  }

  /** Number of resources added (kvc_config_get_num_resources). */
  public int getNumResources() {
    return Args.toInt(getU32(KvcNative::kvc_config_get_num_resources));
  }

  /** State slots; 0 = planned from the budget (kvc_config_set_max_state_slots). */
  public Config setMaxStateSlots(int slots) {
    return handle.call(h -> {
      KvcNative.kvc_config_set_max_state_slots(h, Args.u32("max_state_slots", slots));
      return this;
    });
  }

  /** The state slot setting (0 = planned). */
  public int getMaxStateSlots() {
    return Args.toInt(getU32(KvcNative::kvc_config_get_max_state_slots));
  }

  /** {@link #setMaxStateSnapshots} value for no snapshot pool (KVC_STATE_SNAPSHOTS_NONE). */
  public static final int STATE_SNAPSHOTS_NONE = -1;

  /**
   * State snapshot slots; 0 = planned from the budget,
   * {@link #STATE_SNAPSHOTS_NONE} = none (kvc_config_set_max_state_snapshots).
   */
  public Config setMaxStateSnapshots(int slots) {
    return handle.call(h -> {
      KvcNative.kvc_config_set_max_state_snapshots(h,
          slots == STATE_SNAPSHOTS_NONE ? 0xFFFFFFFFL : Args.u32("max_state_snapshots", slots));
      return this;
    });
  }

  /** The snapshot slot setting (0 = planned; {@link #STATE_SNAPSHOTS_NONE} = none). */
  public int getMaxStateSnapshots() {
    long v = getU32(KvcNative::kvc_config_get_max_state_snapshots);
    return v == 0xFFFFFFFFL ? STATE_SNAPSHOTS_NONE : Args.toInt(v);
  }

  /** Upper bound of the primary pool in tokens per layer; 0 = none. */
  public Config setMaxTokens(long maxTokens) {
    return handle.call(h -> {
      KvcNative.kvc_config_set_max_tokens(h, Args.count("max_tokens", maxTokens));
      return this;
    });
  }

  /** Token bound of the primary pool (0 = none). */
  public long getMaxTokens() {
    return getU64(KvcNative::kvc_config_get_max_tokens);
  }

  /** Share of the free GPU memory the primary pool may take, in (0, 1]. */
  public Config setFreeGpuMemoryFraction(double fraction) {
    return handle.call(h -> {
      KvcNative.kvc_config_set_free_gpu_memory_fraction(h, fraction);
      return this;
    });
  }

  /** Share of free GPU memory. */
  public double getFreeGpuMemoryFraction() {
    return handle.call(h -> {
      Scratch s = Scratch.get();
      int out = s.alloc(8);
      KvcNative.kvc_config_get_free_gpu_memory_fraction(h, s.address(out));
      return s.getDouble(out);
    });
  }

  /** Bytes of host memory for the secondary tier; 0 = none. */
  public Config setHostCacheBytes(long bytes) {
    return handle.call(h -> {
      KvcNative.kvc_config_set_host_cache_bytes(h, Args.count("host_cache_bytes", bytes));
      return this;
    });
  }

  /** Bytes of the secondary tier. */
  public long getHostCacheBytes() {
    return getU64(KvcNative::kvc_config_get_host_cache_bytes);
  }

  /**
   * Turns the disk tier on: slab files under {@code directory} (which must
   * exist and be writable when the cache is created), at most {@code bytes}
   * of them; null or "" with 0 turns it off (kvc_config_set_disk_cache). A
   * cache created on a directory that a previous cache of the same model
   * geometry and event hash seed used finds its blocks.
   * @throws KvCacheException INVALID_ARGUMENT for a directory with 0 bytes or
   *     bytes without a directory
   */
  public Config setDiskCache(String directory, long bytes) {
    return handle.call(h -> {
      Scratch s = Scratch.get();
      long dir = 0;
      if (directory != null && !directory.isEmpty()) {
        byte[] utf8 = directory.getBytes(java.nio.charset.StandardCharsets.UTF_8);
        int at = s.alloc(utf8.length + 1L);
        s.putBytes(at, java.util.Arrays.copyOf(utf8, utf8.length + 1));
        dir = s.address(at);
      }
      KvcNative.kvc_config_set_disk_cache(h, dir, bytes);
      return this;
    });
  }

  /** The disk tier's directory; "" when off (kvc_config_get_disk_cache). */
  public String getDiskCacheDirectory() {
    return handle.call(h -> {
      Scratch s = Scratch.get();
      int out = s.alloc(8);
      KvcNative.kvc_config_get_disk_cache(h, s.address(out), 0);
      long address = s.getLong(out);
      long n = KvcNative.kvcj_strlen(address);
      if (n == 0) {
        return "";
      }
      byte[] utf8 = new byte[(int) n];
      KvcNative.kvcj_direct_buffer(address, n).get(utf8);
      return new String(utf8, java.nio.charset.StandardCharsets.UTF_8);
    });
  }

  /** The disk tier's byte budget; 0 when off. */
  public long getDiskCacheBytes() {
    return handle.callLong(h -> {
      Scratch s = Scratch.get();
      int out = s.alloc(8);
      KvcNative.kvc_config_get_disk_cache(h, 0, s.address(out));
      return s.getLong(out);
    });
  }

  // ----- remote tier (remote_tier.h) ---------------------------------------

  /** UTF-8 bytes and a NUL of {@code text} in scratch memory; 0 for null. */
  private static long utf8(Scratch s, String text) {
    if (text == null) {
      return 0;
    }
    byte[] utf8 = text.getBytes(java.nio.charset.StandardCharsets.UTF_8);
    int at = s.alloc(utf8.length + 1L);
    s.putBytes(at, java.util.Arrays.copyOf(utf8, utf8.length + 1));
    return s.address(at);
  }

  /** The C string at {@code address} ("" for 0). */
  static String cString(long address) {
    long n = KvcNative.kvcj_strlen(address);
    if (n == 0) {
      return "";
    }
    byte[] utf8 = new byte[(int) n];
    KvcNative.kvcj_direct_buffer(address, n).get(utf8);
    return new String(utf8, java.nio.charset.StandardCharsets.UTF_8);
  }

  /**
   * Turns the remote tier on: the Redis server at {@code url}
   * ("redis://[user:password@]host[:port][/db]", parsed now), keys under
   * {@code keyNamespace} (null for "kvc"), at most {@code bytes} of this
   * cache's blocks; null or "" with 0 turns it off
   * (kvc_config_set_remote_cache). The server is reached when the cache is
   * created.
   * @throws KvCacheException INVALID_ARGUMENT naming the part of the URL or
   *     namespace at fault, for a URL with 0 bytes or bytes without a URL
   */
  public Config setRemoteCache(String url, String keyNamespace, long bytes) {
    return handle.call(h -> {
      Scratch s = Scratch.get();
      KvcNative.kvc_config_set_remote_cache(h, utf8(s, url), utf8(s, keyNamespace), bytes);
      return this;
    });
  }

  /** The remote tier's URL; "" when off (kvc_config_get_remote_cache). */
  public String getRemoteCacheUrl() {
    return handle.call(h -> {
      Scratch s = Scratch.get();
      int out = s.alloc(8);
      KvcNative.kvc_config_get_remote_cache(h, s.address(out), 0, 0);
      return cString(s.getLong(out));
    });
  }

  /** The remote tier's key namespace ("kvc" unless set). */
  public String getRemoteCacheNamespace() {
    return handle.call(h -> {
      Scratch s = Scratch.get();
      int out = s.alloc(8);
      KvcNative.kvc_config_get_remote_cache(h, 0, s.address(out), 0);
      return cString(s.getLong(out));
    });
  }

  /** The remote tier's byte budget; 0 when off. */
  public long getRemoteCacheBytes() {
    return handle.callLong(h -> {
      Scratch s = Scratch.get();
      int out = s.alloc(8);
      KvcNative.kvc_config_get_remote_cache(h, 0, 0, s.address(out));
      return s.getLong(out);
    });
  }

  /** Whole milliseconds of {@code d}, saturated (the library refuses 0 and more than 600000). */
  private static long millis(java.time.Duration d) {
    Args.notNull("timeout", d);
    long ms;
    try {
      ms = d.toMillis();
    } catch (ArithmeticException e) {
      ms = d.isNegative() ? 0 : 0xFFFF_FFFFL;
    }
    return Math.max(0, Math.min(ms, 0xFFFF_FFFFL));
  }

  /**
   * The remote tier's timeouts, whole milliseconds in 1..600000: connecting,
   * and a whole lookup or write batch (kvc_config_set_remote_cache_timeouts;
   * defaults 1 s and 1 s).
   */
  public Config setRemoteCacheTimeouts(java.time.Duration connect, java.time.Duration command) {
    long co = millis(connect);
    long cm = millis(command);
    return handle.call(h -> {
      KvcNative.kvc_config_set_remote_cache_timeouts(h, co, cm);
      return this;
    });
  }

  /** The remote tier's connect timeout. */
  public java.time.Duration getRemoteCacheConnectTimeout() {
    return java.time.Duration.ofMillis(handle.callLong(h -> {
      Scratch s = Scratch.get();
      int out = s.alloc(8);
      KvcNative.kvc_config_get_remote_cache_timeouts(h, s.address(out), 0);
      return s.getUnsignedInt(out);
    }));
  }

  /** The remote tier's command timeout. */
  public java.time.Duration getRemoteCacheCommandTimeout() {
    return java.time.Duration.ofMillis(handle.callLong(h -> {
      Scratch s = Scratch.get();
      int out = s.alloc(8);
      KvcNative.kvc_config_get_remote_cache_timeouts(h, 0, s.address(out));
      return s.getUnsignedInt(out);
    }));
  }

  /**
   * Whether the cache may be created while the server cannot be reached or
   * refuses the credentials: the tier then connects later
   * (kvc_config_set_remote_cache_optional, default false).
   */
  public Config setRemoteCacheOptional(boolean optional) {
    return handle.call(h -> {
      KvcNative.kvc_config_set_remote_cache_optional(h, optional);
      return this;
    });
  }

  /** Whether the remote tier is optional. */
  public boolean getRemoteCacheOptional() {
    return getBool(KvcNative::kvc_config_get_remote_cache_optional);
  }

  /** Blocks evicted with a priority below this (0..100) are dropped, not offloaded. */
  public Config setSecondaryOffloadMinPriority(int priority) {
    return handle.call(h -> {
      KvcNative.kvc_config_set_secondary_offload_min_priority(h, Args.u32("priority", priority));
      return this;
    });
  }

  /** Offload priority threshold. */
  public int getSecondaryOffloadMinPriority() {
    return Args.toInt(getU32(KvcNative::kvc_config_get_secondary_offload_min_priority));
  }

  // ----- reuse and events -----------------------------------------------

  /**
   * Retention durations run on a manual clock that only
   * {@link Cache#advanceClock} moves, instead of the monotonic clock (default
   * off; for tests and simulators).
   */
  public Config setManualClock(boolean enable) {
    return handle.call(h -> {
      KvcNative.kvc_config_set_manual_clock(h, enable);
      return this;
    });
  }

  /** Whether the cache will use a manual retention clock. */
  public boolean getManualClock() {
    return getBool(KvcNative::kvc_config_get_manual_clock);
  }

  /** Reuse of blocks across sequences (default on). */
  public Config setBlockReuse(boolean enable) {
    return handle.call(h -> {
      KvcNative.kvc_config_set_block_reuse(h, enable);
      return this;
    });
  }

  /** Reuse of blocks across sequences. */
  public boolean getBlockReuse() {
    return getBool(KvcNative::kvc_config_get_block_reuse);
  }

  /** Token-by-token reuse of a partly matching block (default on). */
  public Config setPartialReuse(boolean enable) {
    return handle.call(h -> {
      KvcNative.kvc_config_set_partial_reuse(h, enable);
      return this;
    });
  }

  /** Partial reuse. */
  public boolean getPartialReuse() {
    return getBool(KvcNative::kvc_config_get_partial_reuse);
  }

  /** Copy a partly matched block instead of using it in place (default on). */
  public Config setCopyOnPartialReuse(boolean enable) {
    return handle.call(h -> {
      KvcNative.kvc_config_set_copy_on_partial_reuse(h, enable);
      return this;
    });
  }

  /** Copy on partial reuse. */
  public boolean getCopyOnPartialReuse() {
    return getBool(KvcNative::kvc_config_get_copy_on_partial_reuse);
  }

  /** Capacity of the event ring in events; 0 turns events off. */
  public Config setEventBufferSize(int events) {
    return handle.call(h -> {
      KvcNative.kvc_config_set_event_buffer_size(h, Args.u32("events", events));
      return this;
    });
  }

  /** Capacity of the event ring. */
  public int getEventBufferSize() {
    return Args.toInt(getU32(KvcNative::kvc_config_get_event_buffer_size));
  }

  /**
   * Seed of the portable block hashes of events and of {@link #blockHashes}
   * (default 0). Engines and routers that share an index use equal seeds.
   */
  public Config setEventHashSeed(long seed) {
    return handle.call(h -> {
      KvcNative.kvc_config_set_event_hash_seed(h, seed);
      return this;
    });
  }

  /** Seed of the portable block hashes. */
  public long getEventHashSeed() {
    return getU64(KvcNative::kvc_config_get_event_hash_seed);
  }

  /** {@link #blockHashes(int[], int, int, SequenceOptions)} of the whole array. */
  public long[] blockHashes(int[] tokens, SequenceOptions options) {
    return blockHashes(tokens, 0, Args.notNull("tokens", tokens).length, options);
  }

  /**
   * The portable hashes of the full blocks of the prompt {@code tokens[from
   * .. from + count)} under {@code options} (its salt, LoRA id and extra
   * keys; null for none), from this config alone (its tokens per block and
   * event hash seed): what {@link KvEvent.Stored} events of a cache built
   * from an equal config report for them (kvc_block_hashes). Needs no cache
   * and no device; a router in another process computes the same.
   *
   * @throws KvCacheException INVALID_ARGUMENT (a bad extra key)
   */
  public long[] blockHashes(int[] tokens, int from, int count, SequenceOptions options) {
    return Events.blockHashes(this, tokens, from, count, options);
  }
}
