package org.kvcache;

/**
 * The records of the calls that return a struct (descriptions, views,
 * statistics), read in one JNI call each: the struct is initialized in
 * {@link Scratch} memory from its {@link StructLayout} template, the C call
 * fills it, and its members are read from the buffer at the offsets the
 * layout measured. Each struct's layout is measured when first used (one
 * holder class per struct).
 *
 * <p>Every method runs inside a {@link NativeHandle} call on the handle's
 * address; a failing status throws {@link KvCacheException} from inside the
 * C call, as everywhere in the binding.
 */
final class Records {
  private Records() {}

  /** {@code kvc_cache_desc_t}. */
  private static final class CacheDesc {
    static final StructLayout<kvc_cache_desc_t> L = new StructLayout<>("kvc_cache_desc_t",
        a -> new kvc_cache_desc_t(a, false), KvcNative::kvc_cache_desc_init);
    static final int DEVICE_KIND = L.u32(kvc_cache_desc_t::getDevice_kind);
    static final int DEVICE_ORDINAL = L.i32(kvc_cache_desc_t::getDevice_ordinal);
    static final int DTYPE = L.u32(kvc_cache_desc_t::getDtype);
    static final int LAYOUT = L.u32(kvc_cache_desc_t::getLayout);
    static final int NUM_LAYERS = L.u32(kvc_cache_desc_t::getNum_layers);
    static final int NUM_GROUPS = L.u32(kvc_cache_desc_t::getNum_groups);
    static final int NUM_POOLS = L.u32(kvc_cache_desc_t::getNum_pools);
    static final int TOKENS_PER_BLOCK = L.u32(kvc_cache_desc_t::getTokens_per_block);
    static final int KV_FACTOR = L.u32(kvc_cache_desc_t::getKv_factor);
    static final int NUM_BLOCKS = L.u64(kvc_cache_desc_t::getNum_blocks);
    static final int TOKEN_CAPACITY = L.u64(kvc_cache_desc_t::getToken_capacity);
    static final int PRIMARY_BYTES = L.u64(kvc_cache_desc_t::getPrimary_bytes);
    static final int HOST_CACHE_BYTES = L.u64(kvc_cache_desc_t::getHost_cache_bytes);
    static final int DEVICE_FREE_BYTES = L.u64(kvc_cache_desc_t::getDevice_free_bytes);
    static final int DEVICE_TOTAL_BYTES = L.u64(kvc_cache_desc_t::getDevice_total_bytes);
    static final int NUM_RESOURCES = L.u32(kvc_cache_desc_t::getNum_resources);
    static final int NUM_STATE_SLOTS = L.u32(kvc_cache_desc_t::getNum_state_slots);
    static final int STATE_BYTES = L.u64(kvc_cache_desc_t::getState_bytes);
    static final int NUM_RANKS = L.u32(kvc_cache_desc_t::getNum_ranks);
    static final int MAX_HEAD_REPLICATION = L.u32(kvc_cache_desc_t::getMax_head_replication);
    static final int NUM_KV_RESOURCES = L.u32(kvc_cache_desc_t::getNum_kv_resources);
  }

  /** {@code kvc_resource_desc_t}. */
  private static final class ResourceDesc {
    static final StructLayout<kvc_resource_desc_t> L = new StructLayout<>("kvc_resource_desc_t",
        a -> new kvc_resource_desc_t(a, false), KvcNative::kvc_resource_desc_init);
    static final int KIND = L.u32(kvc_resource_desc_t::getKind);
    static final int MANAGED = L.u32(kvc_resource_desc_t::getManaged);
    static final int REASON = L.u32(kvc_resource_desc_t::getReason);
    static final int REASON_TEXT = L.u64(kvc_resource_desc_t::getReason_text);
    static final int DTYPE = L.u32(kvc_resource_desc_t::getDtype);
    static final int NUM_HEADS = L.u32(kvc_resource_desc_t::getNum_heads);
    static final int HEAD_DIM = L.u32(kvc_resource_desc_t::getHead_dim);
    static final int D_STATE = L.u32(kvc_resource_desc_t::getD_state);
    static final int CONV_DIM = L.u32(kvc_resource_desc_t::getConv_dim);
    static final int D_CONV = L.u32(kvc_resource_desc_t::getD_conv);
    static final int N_GROUPS = L.u32(kvc_resource_desc_t::getN_groups);
    static final int NUM_SLOTS = L.u32(kvc_resource_desc_t::getNum_slots);
    static final int SLOTS_USED = L.u32(kvc_resource_desc_t::getSlots_used);
    static final int BYTES_PER_TOKEN = L.u64(kvc_resource_desc_t::getBytes_per_token);
    static final int MAX_TOKENS = L.u64(kvc_resource_desc_t::getMax_tokens);
    static final int ALIGNMENT = L.u64(kvc_resource_desc_t::getAlignment);
    static final int SLOT_BYTES = L.u64(kvc_resource_desc_t::getSlot_bytes);
    static final int SLOT_STRIDE = L.u64(kvc_resource_desc_t::getSlot_stride);
    static final int STRIDE0 = L.u64(kvc_resource_desc_t::getStride0);
    static final int STRIDE1 = L.u64(kvc_resource_desc_t::getStride1);
    static final int STRIDE2 = L.u64(kvc_resource_desc_t::getStride2);
    static final int BASE = L.u64(kvc_resource_desc_t::getBase);
  }

  static ResourceDescription resourceDescription(long cache, int index) {
    Scratch s = Scratch.get();
    int at = s.alloc(ResourceDesc.L.size);
    kvc_resource_desc_t out = ResourceDesc.L.prepare(s, at);
    KvcNative.kvc_cache_describe_resource(cache, index, out);
    long dtype = s.getUnsignedInt(at + ResourceDesc.DTYPE);
    return new ResourceDescription(
        Args.toInt(s.getUnsignedInt(at + ResourceDesc.KIND)),
        s.getUnsignedInt(at + ResourceDesc.MANAGED) != 0,
        Args.toInt(s.getUnsignedInt(at + ResourceDesc.REASON)),
        Config.cString(s.getLong(at + ResourceDesc.REASON_TEXT)),
        dtype == 0 ? null : DType.of(dtype),
        Args.toInt(s.getUnsignedInt(at + ResourceDesc.NUM_HEADS)),
        Args.toInt(s.getUnsignedInt(at + ResourceDesc.HEAD_DIM)),
        Args.toInt(s.getUnsignedInt(at + ResourceDesc.D_STATE)),
        Args.toInt(s.getUnsignedInt(at + ResourceDesc.CONV_DIM)),
        Args.toInt(s.getUnsignedInt(at + ResourceDesc.D_CONV)),
        Args.toInt(s.getUnsignedInt(at + ResourceDesc.N_GROUPS)),
        Args.toInt(s.getUnsignedInt(at + ResourceDesc.NUM_SLOTS)),
        Args.toInt(s.getUnsignedInt(at + ResourceDesc.SLOTS_USED)),
        s.getLong(at + ResourceDesc.BYTES_PER_TOKEN),
        s.getLong(at + ResourceDesc.MAX_TOKENS),
        s.getLong(at + ResourceDesc.ALIGNMENT),
        s.getLong(at + ResourceDesc.SLOT_BYTES),
        s.getLong(at + ResourceDesc.SLOT_STRIDE),
        new long[] {s.getLong(at + ResourceDesc.STRIDE0), s.getLong(at + ResourceDesc.STRIDE1),
            s.getLong(at + ResourceDesc.STRIDE2)},
        s.getLong(at + ResourceDesc.BASE));
  }

  /** {@code kvc_kv_resource_desc_t}. */
  private static final class KvResourceDesc {
    static final StructLayout<kvc_kv_resource_desc_t> L = new StructLayout<>(
        "kvc_kv_resource_desc_t", a -> new kvc_kv_resource_desc_t(a, false),
        KvcNative::kvc_kv_resource_desc_init);
    static final int MANAGED = L.u32(kvc_kv_resource_desc_t::getManaged);
    static final int REASON = L.u32(kvc_kv_resource_desc_t::getReason);
    static final int REASON_TEXT = L.u64(kvc_kv_resource_desc_t::getReason_text);
    static final int MANAGED_WITH = L.u32(kvc_kv_resource_desc_t::getManaged_with);
    static final int NUM_LAYERS = L.u32(kvc_kv_resource_desc_t::getNum_layers);
    static final int KV_HEADS = L.u32(kvc_kv_resource_desc_t::getKv_heads);
    static final int HEAD_DIM = L.u32(kvc_kv_resource_desc_t::getHead_dim);
    static final int DTYPE = L.u32(kvc_kv_resource_desc_t::getDtype);
    static final int KV_FACTOR = L.u32(kvc_kv_resource_desc_t::getKv_factor);
    static final int LAYOUT = L.u32(kvc_kv_resource_desc_t::getLayout);
    static final int WINDOW = L.u32(kvc_kv_resource_desc_t::getWindow);
    static final int GROUP = L.u32(kvc_kv_resource_desc_t::getGroup);
    static final int POOL = L.u32(kvc_kv_resource_desc_t::getPool);
    static final int BLOCK_BYTES = L.u64(kvc_kv_resource_desc_t::getBlock_bytes);
  }

  static KvResourceDescription kvResourceDescription(long cache, int index) {
    Scratch s = Scratch.get();
    int at = s.alloc(KvResourceDesc.L.size);
    kvc_kv_resource_desc_t out = KvResourceDesc.L.prepare(s, at);
    KvcNative.kvc_cache_describe_kv_resource(cache, index, out);
    return new KvResourceDescription(
        s.getUnsignedInt(at + KvResourceDesc.MANAGED) != 0,
        Args.toInt(s.getUnsignedInt(at + KvResourceDesc.REASON)),
        Config.cString(s.getLong(at + KvResourceDesc.REASON_TEXT)),
        Args.toInt(s.getUnsignedInt(at + KvResourceDesc.MANAGED_WITH)),
        Args.toInt(s.getUnsignedInt(at + KvResourceDesc.NUM_LAYERS)),
        Args.toInt(s.getUnsignedInt(at + KvResourceDesc.KV_HEADS)),
        Args.toInt(s.getUnsignedInt(at + KvResourceDesc.HEAD_DIM)),
        DType.of(s.getUnsignedInt(at + KvResourceDesc.DTYPE)),
        Args.toInt(s.getUnsignedInt(at + KvResourceDesc.KV_FACTOR)),
        Layout.of(s.getUnsignedInt(at + KvResourceDesc.LAYOUT)),
        Args.toInt(s.getUnsignedInt(at + KvResourceDesc.WINDOW)),
        Args.toInt(s.getUnsignedInt(at + KvResourceDesc.GROUP)),
        Args.toInt(s.getUnsignedInt(at + KvResourceDesc.POOL)),
        s.getLong(at + KvResourceDesc.BLOCK_BYTES));
  }

  /** {@code kvc_snapshot_stats_t}. */
  private static final class SnapshotStatsDesc {
    static final StructLayout<kvc_snapshot_stats_t> L = new StructLayout<>("kvc_snapshot_stats_t",
        a -> new kvc_snapshot_stats_t(a, false), KvcNative::kvc_snapshot_stats_init);
    static final int NUM_SLOTS = L.u32(kvc_snapshot_stats_t::getNum_slots);
    static final int SLOTS_USED = L.u32(kvc_snapshot_stats_t::getSlots_used);
    static final int BYTES_PER_SNAPSHOT = L.u64(kvc_snapshot_stats_t::getBytes_per_snapshot);
    static final int BYTES = L.u64(kvc_snapshot_stats_t::getBytes);
    static final int PUBLISHED = L.u64(kvc_snapshot_stats_t::getPublished);
    static final int HITS = L.u64(kvc_snapshot_stats_t::getHits);
    static final int HIT_TOKENS = L.u64(kvc_snapshot_stats_t::getHit_tokens);
    static final int RESTORES = L.u64(kvc_snapshot_stats_t::getRestores);
    static final int EVICTED = L.u64(kvc_snapshot_stats_t::getEvicted);
    static final int DROPPED = L.u64(kvc_snapshot_stats_t::getDropped);
    static final int HOST_NUM_SLOTS = L.u32(kvc_snapshot_stats_t::getHost_num_slots);
    static final int HOST_SLOTS_USED = L.u32(kvc_snapshot_stats_t::getHost_slots_used);
    static final int HOST_BYTES = L.u64(kvc_snapshot_stats_t::getHost_bytes);
    static final int OFFLOADED = L.u64(kvc_snapshot_stats_t::getOffloaded);
    static final int ONBOARDED = L.u64(kvc_snapshot_stats_t::getOnboarded);
    static final int HOST_EVICTED = L.u64(kvc_snapshot_stats_t::getHost_evicted);
  }

  static SnapshotStats snapshotStats(long cache) {
    Scratch s = Scratch.get();
    int at = s.alloc(SnapshotStatsDesc.L.size);
    kvc_snapshot_stats_t out = SnapshotStatsDesc.L.prepare(s, at);
    KvcNative.kvc_cache_get_snapshot_stats(cache, out);
    return new SnapshotStats(
        Args.toInt(s.getUnsignedInt(at + SnapshotStatsDesc.NUM_SLOTS)),
        Args.toInt(s.getUnsignedInt(at + SnapshotStatsDesc.SLOTS_USED)),
        s.getLong(at + SnapshotStatsDesc.BYTES_PER_SNAPSHOT),
        s.getLong(at + SnapshotStatsDesc.BYTES),
        s.getLong(at + SnapshotStatsDesc.PUBLISHED),
        s.getLong(at + SnapshotStatsDesc.HITS),
        s.getLong(at + SnapshotStatsDesc.HIT_TOKENS),
        s.getLong(at + SnapshotStatsDesc.RESTORES),
        s.getLong(at + SnapshotStatsDesc.EVICTED),
        s.getLong(at + SnapshotStatsDesc.DROPPED),
        Args.toInt(s.getUnsignedInt(at + SnapshotStatsDesc.HOST_NUM_SLOTS)),
        Args.toInt(s.getUnsignedInt(at + SnapshotStatsDesc.HOST_SLOTS_USED)),
        s.getLong(at + SnapshotStatsDesc.HOST_BYTES),
        s.getLong(at + SnapshotStatsDesc.OFFLOADED),
        s.getLong(at + SnapshotStatsDesc.ONBOARDED),
        s.getLong(at + SnapshotStatsDesc.HOST_EVICTED));
  }

  /** {@code kvc_resize_plan_t}. */
  private static final class PlanL {
    static final StructLayout<kvc_resize_plan_t> L = new StructLayout<>("kvc_resize_plan_t",
        a -> new kvc_resize_plan_t(a, false), KvcNative::kvc_resize_plan_init);
    static final int NUM_POOLS = L.u32(kvc_resize_plan_t::getNum_pools);
    static final int FREE_BYTES = L.u64(kvc_resize_plan_t::getFree_bytes);
    static final int MEM_FOR_PAGED = L.u64(kvc_resize_plan_t::getMem_for_paged);
    static final int PRIMARY_BYTES = L.u64(kvc_resize_plan_t::getPrimary_bytes);
    static final int MAX_PRIMARY_BYTES = L.u64(kvc_resize_plan_t::getMax_primary_bytes);
    static final int BLOCKS_PER_GROUP = L.u64(kvc_resize_plan_t::getBlocks_per_group);
    static final int TOKEN_CAPACITY = L.u64(kvc_resize_plan_t::getToken_capacity);
    static final int NUM_BLOCKS = L.u64(kvc_resize_plan_t::getNum_blocks);
    static final int TOTAL_BYTES = L.u64(kvc_resize_plan_t::getTotal_bytes);
  }

  static ResizePlan resizePlan(long cache, double fraction, long freeBytes, long nonPagedBytes,
      long forwardBytes, int numPools) {
    kvc_resize_inputs_t in = new kvc_resize_inputs_t();
    try {
      KvcNative.kvc_resize_inputs_init(in);
      in.setFree_gpu_memory_fraction(fraction);
      in.setFree_bytes(freeBytes);
      in.setNon_paged_bytes(nonPagedBytes);
      in.setForward_bytes(forwardBytes);
      Scratch s = Scratch.get();
      int at = s.alloc(PlanL.L.size);
      kvc_resize_plan_t out = PlanL.L.prepare(s, at);
      int pools = s.alloc(8L * (numPools + 1));
      KvcNative.kvc_cache_plan_resize(cache, in, out, s.address(pools), numPools);
      long[] blocks = new long[Args.toInt(s.getUnsignedInt(at + PlanL.NUM_POOLS))];
      s.getLongs(pools, blocks, 0, blocks.length);
      return new ResizePlan(s.getLong(at + PlanL.FREE_BYTES), s.getLong(at + PlanL.MEM_FOR_PAGED),
          s.getLong(at + PlanL.PRIMARY_BYTES), s.getLong(at + PlanL.MAX_PRIMARY_BYTES),
          s.getLong(at + PlanL.BLOCKS_PER_GROUP), s.getLong(at + PlanL.TOKEN_CAPACITY),
          s.getLong(at + PlanL.NUM_BLOCKS), s.getLong(at + PlanL.TOTAL_BYTES), blocks);
    } finally {
      in.delete();
    }
  }

  static CacheDescription cacheDescription(long cache) {
    Scratch s = Scratch.get();
    int at = s.alloc(CacheDesc.L.size);
    kvc_cache_desc_t out = CacheDesc.L.prepare(s, at);
    KvcNative.kvc_cache_describe(cache, out);
    return new CacheDescription(
        DeviceKind.of(s.getUnsignedInt(at + CacheDesc.DEVICE_KIND)),
        s.getInt(at + CacheDesc.DEVICE_ORDINAL),
        DType.of(s.getUnsignedInt(at + CacheDesc.DTYPE)),
        Layout.of(s.getUnsignedInt(at + CacheDesc.LAYOUT)),
        Args.toInt(s.getUnsignedInt(at + CacheDesc.NUM_LAYERS)),
        Args.toInt(s.getUnsignedInt(at + CacheDesc.NUM_GROUPS)),
        Args.toInt(s.getUnsignedInt(at + CacheDesc.NUM_POOLS)),
        Args.toInt(s.getUnsignedInt(at + CacheDesc.TOKENS_PER_BLOCK)),
        Args.toInt(s.getUnsignedInt(at + CacheDesc.KV_FACTOR)),
        s.getLong(at + CacheDesc.NUM_BLOCKS),
        s.getLong(at + CacheDesc.TOKEN_CAPACITY),
        s.getLong(at + CacheDesc.PRIMARY_BYTES),
        s.getLong(at + CacheDesc.HOST_CACHE_BYTES),
        s.getLong(at + CacheDesc.DEVICE_FREE_BYTES),
        s.getLong(at + CacheDesc.DEVICE_TOTAL_BYTES),
        Args.toInt(s.getUnsignedInt(at + CacheDesc.NUM_RESOURCES)),
        Args.toInt(s.getUnsignedInt(at + CacheDesc.NUM_STATE_SLOTS)),
        s.getLong(at + CacheDesc.STATE_BYTES),
        Args.toInt(s.getUnsignedInt(at + CacheDesc.NUM_RANKS)),
        Args.toInt(s.getUnsignedInt(at + CacheDesc.MAX_HEAD_REPLICATION)),
        Args.toInt(s.getUnsignedInt(at + CacheDesc.NUM_KV_RESOURCES)));
  }

  /** {@code kvc_group_desc_t}. */
  private static final class GroupDesc {
    static final StructLayout<kvc_group_desc_t> L = new StructLayout<>("kvc_group_desc_t",
        a -> new kvc_group_desc_t(a, false), KvcNative::kvc_group_desc_init);
    static final int WINDOW = L.u32(kvc_group_desc_t::getWindow);
    static final int KV_HEADS = L.u32(kvc_group_desc_t::getKv_heads);
    static final int HEAD_DIM = L.u32(kvc_group_desc_t::getHead_dim);
    static final int NUM_LAYERS = L.u32(kvc_group_desc_t::getNum_layers);
    static final int POOL = L.u32(kvc_group_desc_t::getPool);
    static final int BLOCK_BYTES = L.u64(kvc_group_desc_t::getBlock_bytes);
    static final int BYTES_PER_TOKEN = L.u64(kvc_group_desc_t::getBytes_per_token);
    static final int KV_HEADS_PER_RANK = L.u32(kvc_group_desc_t::getKv_heads_per_rank);
    static final int HEAD_REPLICATION = L.u32(kvc_group_desc_t::getHead_replication);
    static final int DTYPE = L.u32(kvc_group_desc_t::getDtype);
    static final int KV_FACTOR = L.u32(kvc_group_desc_t::getKv_factor);
    static final int LAYOUT = L.u32(kvc_group_desc_t::getLayout);
  }

  static GroupDescription groupDescription(long cache, int group) {
    Scratch s = Scratch.get();
    int at = s.alloc(GroupDesc.L.size);
    kvc_group_desc_t out = GroupDesc.L.prepare(s, at);
    KvcNative.kvc_cache_describe_group(cache, group, out);
    return new GroupDescription(
        Args.toInt(s.getUnsignedInt(at + GroupDesc.WINDOW)),
        Args.toInt(s.getUnsignedInt(at + GroupDesc.KV_HEADS)),
        Args.toInt(s.getUnsignedInt(at + GroupDesc.HEAD_DIM)),
        Args.toInt(s.getUnsignedInt(at + GroupDesc.NUM_LAYERS)),
        Args.toInt(s.getUnsignedInt(at + GroupDesc.POOL)),
        s.getLong(at + GroupDesc.BLOCK_BYTES),
        s.getLong(at + GroupDesc.BYTES_PER_TOKEN),
        Args.toInt(s.getUnsignedInt(at + GroupDesc.KV_HEADS_PER_RANK)),
        Args.toInt(s.getUnsignedInt(at + GroupDesc.HEAD_REPLICATION)),
        DType.of(s.getUnsignedInt(at + GroupDesc.DTYPE)),
        Args.toInt(s.getUnsignedInt(at + GroupDesc.KV_FACTOR)),
        Layout.of(s.getUnsignedInt(at + GroupDesc.LAYOUT)));
  }

  /** {@code kvc_pool_desc_t}. */
  private static final class PoolDesc {
    static final StructLayout<kvc_pool_desc_t> L = new StructLayout<>("kvc_pool_desc_t",
        a -> new kvc_pool_desc_t(a, false), KvcNative::kvc_pool_desc_init);
    static final int NUM_GROUPS = L.u32(kvc_pool_desc_t::getNum_groups);
    static final int BLOCK_BYTES = L.u64(kvc_pool_desc_t::getBlock_bytes);
    static final int NUM_BLOCKS = L.u64(kvc_pool_desc_t::getNum_blocks);
    static final int BYTES = L.u64(kvc_pool_desc_t::getBytes);
    static final int BASE = L.u64(kvc_pool_desc_t::getBase);
  }

  static PoolDescription poolDescription(long cache, int pool) {
    Scratch s = Scratch.get();
    int at = s.alloc(PoolDesc.L.size);
    kvc_pool_desc_t out = PoolDesc.L.prepare(s, at);
    KvcNative.kvc_cache_describe_pool(cache, pool, out);
    return new PoolDescription(
        Args.toInt(s.getUnsignedInt(at + PoolDesc.NUM_GROUPS)),
        s.getLong(at + PoolDesc.BLOCK_BYTES),
        s.getLong(at + PoolDesc.NUM_BLOCKS),
        s.getLong(at + PoolDesc.BYTES),
        s.getLong(at + PoolDesc.BASE));
  }

  /** {@code kvc_layer_view_t}. */
  private static final class View {
    static final StructLayout<kvc_layer_view_t> L = new StructLayout<>("kvc_layer_view_t",
        a -> new kvc_layer_view_t(a, false), KvcNative::kvc_layer_view_init);
    static final int GROUP = L.u32(kvc_layer_view_t::getGroup);
    static final int POOL = L.u32(kvc_layer_view_t::getPool);
    static final int DTYPE = L.u32(kvc_layer_view_t::getDtype);
    static final int LAYOUT = L.u32(kvc_layer_view_t::getLayout);
    static final int KV_HEADS = L.u32(kvc_layer_view_t::getKv_heads);
    static final int HEAD_DIM = L.u32(kvc_layer_view_t::getHead_dim);
    static final int TOKENS_PER_BLOCK = L.u32(kvc_layer_view_t::getTokens_per_block);
    static final int KV_FACTOR = L.u32(kvc_layer_view_t::getKv_factor);
    static final int ELEM_SIZE = L.u32(kvc_layer_view_t::getElem_size);
    static final int BASE = L.u64(kvc_layer_view_t::getBase);
    static final int NUM_BLOCKS = L.u64(kvc_layer_view_t::getNum_blocks);
    static final int BLOCK_STRIDE = L.u64(kvc_layer_view_t::getBlock_stride);
    static final int KV_STRIDE = L.u64(kvc_layer_view_t::getKv_stride);
    static final int TOKEN_STRIDE = L.u64(kvc_layer_view_t::getToken_stride);
    static final int HEAD_STRIDE = L.u64(kvc_layer_view_t::getHead_stride);
    static final int RANK = L.u32(kvc_layer_view_t::getRank);
    static final int FIRST_KV_HEAD = L.u32(kvc_layer_view_t::getFirst_kv_head);
    static final int TOTAL_KV_HEADS = L.u32(kvc_layer_view_t::getTotal_kv_heads);
  }

  static LayerView layerView(long cache, int layer) {
    Scratch s = Scratch.get();
    int at = s.alloc(View.L.size);
    kvc_layer_view_t out = View.L.prepare(s, at);
    KvcNative.kvc_cache_layer_view(cache, layer, out);
    return layerViewAt(s, at);
  }

  static LayerView layerViewRank(long cache, int rank, int layer) {
    Scratch s = Scratch.get();
    int at = s.alloc(View.L.size);
    kvc_layer_view_t out = View.L.prepare(s, at);
    KvcNative.kvc_cache_layer_view_rank(cache, rank, layer, out);
    return layerViewAt(s, at);
  }

  private static LayerView layerViewAt(Scratch s, int at) {
    return new LayerView(
        Args.toInt(s.getUnsignedInt(at + View.GROUP)),
        Args.toInt(s.getUnsignedInt(at + View.POOL)),
        DType.of(s.getUnsignedInt(at + View.DTYPE)),
        Layout.of(s.getUnsignedInt(at + View.LAYOUT)),
        Args.toInt(s.getUnsignedInt(at + View.KV_HEADS)),
        Args.toInt(s.getUnsignedInt(at + View.HEAD_DIM)),
        Args.toInt(s.getUnsignedInt(at + View.TOKENS_PER_BLOCK)),
        Args.toInt(s.getUnsignedInt(at + View.KV_FACTOR)),
        Args.toInt(s.getUnsignedInt(at + View.ELEM_SIZE)),
        s.getLong(at + View.BASE),
        s.getLong(at + View.NUM_BLOCKS),
        s.getLong(at + View.BLOCK_STRIDE),
        s.getLong(at + View.KV_STRIDE),
        s.getLong(at + View.TOKEN_STRIDE),
        s.getLong(at + View.HEAD_STRIDE),
        Args.toInt(s.getUnsignedInt(at + View.RANK)),
        Args.toInt(s.getUnsignedInt(at + View.FIRST_KV_HEAD)),
        Args.toInt(s.getUnsignedInt(at + View.TOTAL_KV_HEADS)));
  }

  /** {@code kvc_cache_stats_t}. */
  private static final class Stats {
    static final StructLayout<kvc_cache_stats_t> L = new StructLayout<>("kvc_cache_stats_t",
        a -> new kvc_cache_stats_t(a, false), KvcNative::kvc_cache_stats_init);
    static final int NUM_BLOCKS = L.u64(kvc_cache_stats_t::getNum_blocks);
    static final int FREE_BLOCKS = L.u64(kvc_cache_stats_t::getFree_blocks);
    static final int CACHED_BLOCKS = L.u64(kvc_cache_stats_t::getCached_blocks);
    static final int IN_USE_BLOCKS = L.u64(kvc_cache_stats_t::getIn_use_blocks);
    static final int REUSED_BLOCKS = L.u64(kvc_cache_stats_t::getReused_blocks);
    static final int MISSED_BLOCKS = L.u64(kvc_cache_stats_t::getMissed_blocks);
    static final int HIT_RATE = L.f64(kvc_cache_stats_t::getHit_rate);
    static final int EVICTED_BLOCKS = L.u64(kvc_cache_stats_t::getEvicted_blocks);
    static final int NUM_SEQUENCES = L.u64(kvc_cache_stats_t::getNum_sequences);
    static final int NUM_PINNED = L.u64(kvc_cache_stats_t::getNum_pinned);
    static final int TREE_NODES = L.u64(kvc_cache_stats_t::getTree_nodes);
    static final int OFFLOADED_BLOCKS = L.u64(kvc_cache_stats_t::getOffloaded_blocks);
    static final int ONBOARDED_BLOCKS = L.u64(kvc_cache_stats_t::getOnboarded_blocks);
    static final int OFFLOADED_BYTES = L.u64(kvc_cache_stats_t::getOffloaded_bytes);
    static final int ONBOARDED_BYTES = L.u64(kvc_cache_stats_t::getOnboarded_bytes);
    static final int HOST_BLOCKS = L.u64(kvc_cache_stats_t::getHost_blocks);
    static final int HOST_FREE_BLOCKS = L.u64(kvc_cache_stats_t::getHost_free_blocks);
    static final int HOST_CACHED_BLOCKS = L.u64(kvc_cache_stats_t::getHost_cached_blocks);
  }

  static CacheStats cacheStats(long cache) {
    Scratch s = Scratch.get();
    int at = s.alloc(Stats.L.size);
    kvc_cache_stats_t out = Stats.L.prepare(s, at);
    KvcNative.kvc_cache_get_stats(cache, out);
    return new CacheStats(
        s.getLong(at + Stats.NUM_BLOCKS),
        s.getLong(at + Stats.FREE_BLOCKS),
        s.getLong(at + Stats.CACHED_BLOCKS),
        s.getLong(at + Stats.IN_USE_BLOCKS),
        s.getLong(at + Stats.REUSED_BLOCKS),
        s.getLong(at + Stats.MISSED_BLOCKS),
        s.getDouble(at + Stats.HIT_RATE),
        s.getLong(at + Stats.EVICTED_BLOCKS),
        s.getLong(at + Stats.NUM_SEQUENCES),
        s.getLong(at + Stats.NUM_PINNED),
        s.getLong(at + Stats.TREE_NODES),
        s.getLong(at + Stats.OFFLOADED_BLOCKS),
        s.getLong(at + Stats.ONBOARDED_BLOCKS),
        s.getLong(at + Stats.OFFLOADED_BYTES),
        s.getLong(at + Stats.ONBOARDED_BYTES),
        s.getLong(at + Stats.HOST_BLOCKS),
        s.getLong(at + Stats.HOST_FREE_BLOCKS),
        s.getLong(at + Stats.HOST_CACHED_BLOCKS));
  }

  /** {@code kvc_group_stats_t}. */
  private static final class GroupStat {
    static final StructLayout<kvc_group_stats_t> L = new StructLayout<>("kvc_group_stats_t",
        a -> new kvc_group_stats_t(a, false), KvcNative::kvc_group_stats_init);
    static final int POOL = L.u32(kvc_group_stats_t::getPool);
    static final int IN_USE_BLOCKS = L.u64(kvc_group_stats_t::getIn_use_blocks);
    static final int CACHED_BLOCKS = L.u64(kvc_group_stats_t::getCached_blocks);
    static final int POOL_FREE_BLOCKS = L.u64(kvc_group_stats_t::getPool_free_blocks);
    static final int REUSED_BLOCKS = L.u64(kvc_group_stats_t::getReused_blocks);
    static final int MISSED_BLOCKS = L.u64(kvc_group_stats_t::getMissed_blocks);
    static final int EVICTED_BLOCKS = L.u64(kvc_group_stats_t::getEvicted_blocks);
    static final int RELEASED_BLOCKS = L.u64(kvc_group_stats_t::getReleased_blocks);
  }

  static GroupStats groupStats(long cache, int group) {
    Scratch s = Scratch.get();
    int at = s.alloc(GroupStat.L.size);
    kvc_group_stats_t out = GroupStat.L.prepare(s, at);
    KvcNative.kvc_cache_get_group_stats(cache, group, out);
    return new GroupStats(
        Args.toInt(s.getUnsignedInt(at + GroupStat.POOL)),
        s.getLong(at + GroupStat.IN_USE_BLOCKS),
        s.getLong(at + GroupStat.CACHED_BLOCKS),
        s.getLong(at + GroupStat.POOL_FREE_BLOCKS),
        s.getLong(at + GroupStat.REUSED_BLOCKS),
        s.getLong(at + GroupStat.MISSED_BLOCKS),
        s.getLong(at + GroupStat.EVICTED_BLOCKS),
        s.getLong(at + GroupStat.RELEASED_BLOCKS));
  }

  /** {@code kvc_tier_stats_t}. */
  private static final class TierStat {
    static final StructLayout<kvc_tier_stats_t> L = new StructLayout<>("kvc_tier_stats_t",
        a -> new kvc_tier_stats_t(a, false), KvcNative::kvc_tier_stats_init);
    static final int TIER = L.u32(kvc_tier_stats_t::getTier);
    static final int BLOCKS = L.u64(kvc_tier_stats_t::getBlocks);
    static final int BYTES = L.u64(kvc_tier_stats_t::getBytes);
    static final int CAPACITY_BYTES = L.u64(kvc_tier_stats_t::getCapacity_bytes);
    static final int HITS = L.u64(kvc_tier_stats_t::getHits);
    static final int MISSES = L.u64(kvc_tier_stats_t::getMisses);
    static final int REJECTED = L.u64(kvc_tier_stats_t::getRejected);
    static final int ONBOARDED_BLOCKS = L.u64(kvc_tier_stats_t::getOnboarded_blocks);
    static final int ONBOARDED_BYTES = L.u64(kvc_tier_stats_t::getOnboarded_bytes);
    static final int OFFERED_BLOCKS = L.u64(kvc_tier_stats_t::getOffered_blocks);
    static final int STORED_BLOCKS = L.u64(kvc_tier_stats_t::getStored_blocks);
    static final int DROPPED_BLOCKS = L.u64(kvc_tier_stats_t::getDropped_blocks);
    static final int ERRORS = L.u64(kvc_tier_stats_t::getErrors);
    static final int EVICTED_BLOCKS = L.u64(kvc_tier_stats_t::getEvicted_blocks);
    static final int QUEUED_BLOCKS = L.u64(kvc_tier_stats_t::getQueued_blocks);
    static final int LOAD_COUNT = L.u64(kvc_tier_stats_t::getLoad_count);
    static final int LOAD_P50_US = L.u64(kvc_tier_stats_t::getLoad_p50_us);
    static final int LOAD_P99_US = L.u64(kvc_tier_stats_t::getLoad_p99_us);
    static final int LOAD_MAX_US = L.u64(kvc_tier_stats_t::getLoad_max_us);
    static final int WRITE_COUNT = L.u64(kvc_tier_stats_t::getWrite_count);
    static final int WRITE_P50_US = L.u64(kvc_tier_stats_t::getWrite_p50_us);
    static final int WRITE_P99_US = L.u64(kvc_tier_stats_t::getWrite_p99_us);
    static final int WRITE_MAX_US = L.u64(kvc_tier_stats_t::getWrite_max_us);
  }

  static TierStats tierStats(long cache, Tier tier) {
    Scratch s = Scratch.get();
    int at = s.alloc(TierStat.L.size);
    kvc_tier_stats_t out = TierStat.L.prepare(s, at);
    KvcNative.kvc_cache_get_tier_stats(cache, tier.code(), out);
    return new TierStats(
        Tier.of(s.getUnsignedInt(at + TierStat.TIER)),
        s.getLong(at + TierStat.BLOCKS),
        s.getLong(at + TierStat.BYTES),
        s.getLong(at + TierStat.CAPACITY_BYTES),
        s.getLong(at + TierStat.HITS),
        s.getLong(at + TierStat.MISSES),
        s.getLong(at + TierStat.REJECTED),
        s.getLong(at + TierStat.ONBOARDED_BLOCKS),
        s.getLong(at + TierStat.ONBOARDED_BYTES),
        s.getLong(at + TierStat.OFFERED_BLOCKS),
        s.getLong(at + TierStat.STORED_BLOCKS),
        s.getLong(at + TierStat.DROPPED_BLOCKS),
        s.getLong(at + TierStat.ERRORS),
        s.getLong(at + TierStat.EVICTED_BLOCKS),
        s.getLong(at + TierStat.QUEUED_BLOCKS),
        s.getLong(at + TierStat.LOAD_COUNT),
        s.getLong(at + TierStat.LOAD_P50_US),
        s.getLong(at + TierStat.LOAD_P99_US),
        s.getLong(at + TierStat.LOAD_MAX_US),
        s.getLong(at + TierStat.WRITE_COUNT),
        s.getLong(at + TierStat.WRITE_P50_US),
        s.getLong(at + TierStat.WRITE_P99_US),
        s.getLong(at + TierStat.WRITE_MAX_US));
  }

  /** {@code kvc_sequence_desc_t}. */
  private static final class SeqDesc {
    static final StructLayout<kvc_sequence_desc_t> L = new StructLayout<>("kvc_sequence_desc_t",
        a -> new kvc_sequence_desc_t(a, false), KvcNative::kvc_sequence_desc_init);
    static final int PROMPT_PRIORITY = L.u32(kvc_sequence_desc_t::getPrompt_priority);
    static final int DECODE_PRIORITY = L.u32(kvc_sequence_desc_t::getDecode_priority);
    static final int NUM_TOKENS = L.u64(kvc_sequence_desc_t::getNum_tokens);
    static final int PROMPT_TOKENS = L.u64(kvc_sequence_desc_t::getPrompt_tokens);
    static final int CACHED_TOKENS = L.u64(kvc_sequence_desc_t::getCached_tokens);
    static final int COMMITTED_TOKENS = L.u64(kvc_sequence_desc_t::getCommitted_tokens);
    static final int NUM_BLOCKS = L.u64(kvc_sequence_desc_t::getNum_blocks);
  }

  static SequenceDescription sequenceDescription(long cache, long id) {
    Scratch s = Scratch.get();
    int at = s.alloc(SeqDesc.L.size);
    kvc_sequence_desc_t out = SeqDesc.L.prepare(s, at);
    KvcNative.kvc_sequence_describe(cache, id, out);
    return new SequenceDescription(
        Args.toInt(s.getUnsignedInt(at + SeqDesc.PROMPT_PRIORITY)),
        Args.toInt(s.getUnsignedInt(at + SeqDesc.DECODE_PRIORITY)),
        s.getLong(at + SeqDesc.NUM_TOKENS),
        s.getLong(at + SeqDesc.PROMPT_TOKENS),
        s.getLong(at + SeqDesc.CACHED_TOKENS),
        s.getLong(at + SeqDesc.COMMITTED_TOKENS),
        s.getLong(at + SeqDesc.NUM_BLOCKS));
  }
}
