package org.kvcache;

/**
 * The records of the stateful mode ({@link StatefulCache}): its layer views
 * and statistics, read as {@link Records} reads the paged cache's: the
 * struct initialized in {@link Scratch} memory from its {@link StructLayout}
 * template, filled by the C call in one JNI call, its members read at the
 * offsets the layout measured (one holder class per struct).
 *
 * <p>Every method runs inside a {@link NativeHandle} call on the handle's
 * address; a failing status throws {@link KvCacheException} from inside the
 * C call, as everywhere in the binding.
 */
final class StatefulRecords {
  private StatefulRecords() {}

  /** {@code kvc_stateful_view_t}. */
  private static final class StView {
    static final StructLayout<kvc_stateful_view_t> L = new StructLayout<>("kvc_stateful_view_t",
        a -> new kvc_stateful_view_t(a, false), KvcNative::kvc_stateful_view_init);
    static final int LAYER = L.u32(kvc_stateful_view_t::getLayer);
    static final int KEY = L.u64(kvc_stateful_view_t::getKey);
    static final int VALUE = L.u64(kvc_stateful_view_t::getValue);
    static final int ROW_STRIDE = L.u64(kvc_stateful_view_t::getRow_stride);
    static final int HEAD_STRIDE = L.u64(kvc_stateful_view_t::getHead_stride);
    static final int TOKEN_STRIDE = L.u64(kvc_stateful_view_t::getToken_stride);
    static final int BATCH = L.u32(kvc_stateful_view_t::getBatch);
    static final int CAPACITY = L.u32(kvc_stateful_view_t::getCapacity);
    static final int KV_HEADS = L.u32(kvc_stateful_view_t::getKv_heads);
    static final int HEAD_DIM = L.u32(kvc_stateful_view_t::getHead_dim);
    static final int DTYPE = L.u32(kvc_stateful_view_t::getDtype);
    static final int LAYOUT = L.u32(kvc_stateful_view_t::getLayout);
    static final int MAX_LENGTH = L.u32(kvc_stateful_view_t::getMax_length);
    static final int BEAM_TABLE_STRIDE = L.u32(kvc_stateful_view_t::getBeam_table_stride);
    static final int LENGTHS = L.u64(kvc_stateful_view_t::getLengths);
    static final int BEAM_TABLE = L.u64(kvc_stateful_view_t::getBeam_table);
  }

  static StatefulView statefulView(long cache, int layer) {
    Scratch s = Scratch.get();
    int at = s.alloc(StView.L.size);
    kvc_stateful_view_t out = StView.L.prepare(s, at);
    KvcNative.kvc_stateful_layer_view(cache, layer, out);
    return new StatefulView(
        Args.toInt(s.getUnsignedInt(at + StView.LAYER)),
        s.getLong(at + StView.KEY),
        s.getLong(at + StView.VALUE),
        s.getLong(at + StView.ROW_STRIDE),
        s.getLong(at + StView.HEAD_STRIDE),
        s.getLong(at + StView.TOKEN_STRIDE),
        Args.toInt(s.getUnsignedInt(at + StView.BATCH)),
        Args.toInt(s.getUnsignedInt(at + StView.CAPACITY)),
        Args.toInt(s.getUnsignedInt(at + StView.KV_HEADS)),
        Args.toInt(s.getUnsignedInt(at + StView.HEAD_DIM)),
        DType.of(s.getUnsignedInt(at + StView.DTYPE)),
        Layout.of(s.getUnsignedInt(at + StView.LAYOUT)),
        Args.toInt(s.getUnsignedInt(at + StView.MAX_LENGTH)),
        s.getLong(at + StView.LENGTHS),
        s.getLong(at + StView.BEAM_TABLE),
        Args.toInt(s.getUnsignedInt(at + StView.BEAM_TABLE_STRIDE)));
  }

  /** {@code kvc_stateful_stats_t}. */
  private static final class StStats {
    static final StructLayout<kvc_stateful_stats_t> L = new StructLayout<>("kvc_stateful_stats_t",
        a -> new kvc_stateful_stats_t(a, false), KvcNative::kvc_stateful_stats_init);
    static final int NUM_LAYERS = L.u32(kvc_stateful_stats_t::getNum_layers);
    static final int BYTES_ALLOCATED = L.u64(kvc_stateful_stats_t::getBytes_allocated);
    static final int PEAK_BYTES = L.u64(kvc_stateful_stats_t::getPeak_bytes);
    static final int KV_BYTES = L.u64(kvc_stateful_stats_t::getKv_bytes);
    static final int TABLE_BYTES = L.u64(kvc_stateful_stats_t::getTable_bytes);
    static final int REALLOCATIONS = L.u64(kvc_stateful_stats_t::getReallocations);
    static final int REORDERS = L.u64(kvc_stateful_stats_t::getReorders);
    static final int TABLE_ENTRIES_COPIED = L.u64(kvc_stateful_stats_t::getTable_entries_copied);
    static final int COMPACTIONS = L.u64(kvc_stateful_stats_t::getCompactions);
  }

  static StatefulStats statefulStats(long cache) {
    Scratch s = Scratch.get();
    int at = s.alloc(StStats.L.size);
    kvc_stateful_stats_t out = StStats.L.prepare(s, at);
    KvcNative.kvc_stateful_get_stats(cache, out);
    return new StatefulStats(
        Args.toInt(s.getUnsignedInt(at + StStats.NUM_LAYERS)),
        s.getLong(at + StStats.BYTES_ALLOCATED),
        s.getLong(at + StStats.PEAK_BYTES),
        s.getLong(at + StStats.KV_BYTES),
        s.getLong(at + StStats.TABLE_BYTES),
        s.getLong(at + StStats.REALLOCATIONS),
        s.getLong(at + StStats.REORDERS),
        s.getLong(at + StStats.TABLE_ENTRIES_COPIED),
        s.getLong(at + StStats.COMPACTIONS));
  }

  /** {@code kvc_stateful_layer_stats_t}. */
  private static final class StLayer {
    static final StructLayout<kvc_stateful_layer_stats_t> L = new StructLayout<>("kvc_stateful_layer_stats_t",
        a -> new kvc_stateful_layer_stats_t(a, false), KvcNative::kvc_stateful_layer_stats_init);
    static final int LAYER = L.u32(kvc_stateful_layer_stats_t::getLayer);
    static final int CAPACITY = L.u32(kvc_stateful_layer_stats_t::getCapacity);
    static final int GROWTH_OFFSET = L.u32(kvc_stateful_layer_stats_t::getGrowth_offset);
    static final int BYTES = L.u64(kvc_stateful_layer_stats_t::getBytes);
    static final int REALLOCATIONS = L.u64(kvc_stateful_layer_stats_t::getReallocations);
    static final int LAST_GROWTH_LENGTH = L.u32(kvc_stateful_layer_stats_t::getLast_growth_length);
    static final int MAX_LENGTH = L.u32(kvc_stateful_layer_stats_t::getMax_length);
  }

  static StatefulLayerStats statefulLayerStats(long cache, int layer) {
    Scratch s = Scratch.get();
    int at = s.alloc(StLayer.L.size);
    kvc_stateful_layer_stats_t out = StLayer.L.prepare(s, at);
    KvcNative.kvc_stateful_get_layer_stats(cache, layer, out);
    return new StatefulLayerStats(
        Args.toInt(s.getUnsignedInt(at + StLayer.LAYER)),
        Args.toInt(s.getUnsignedInt(at + StLayer.CAPACITY)),
        Args.toInt(s.getUnsignedInt(at + StLayer.GROWTH_OFFSET)),
        s.getLong(at + StLayer.BYTES),
        s.getLong(at + StLayer.REALLOCATIONS),
        Args.toInt(s.getUnsignedInt(at + StLayer.LAST_GROWTH_LENGTH)),
        Args.toInt(s.getUnsignedInt(at + StLayer.MAX_LENGTH)));
  }
}
