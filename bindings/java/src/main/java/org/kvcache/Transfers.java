package org.kvcache;

/**
 * The native calls of {@link Export} and {@link Import} (transfer.h): the
 * descriptor, block ids and the key blob, read through scratch memory.
 */
final class Transfers {
  private Transfers() {}

  /** {@code kvc_transfer_desc_t}. */
  private static final class Desc {
    static final StructLayout<kvc_transfer_desc_t> L = new StructLayout<>("kvc_transfer_desc_t",
        a -> new kvc_transfer_desc_t(a, false), KvcNative::kvc_transfer_desc_init);
    static final int NUM_GROUPS = L.u32(kvc_transfer_desc_t::getNum_groups);
    static final int TOKENS_PER_BLOCK = L.u32(kvc_transfer_desc_t::getTokens_per_block);
    static final int SEQ_ID = L.u64(kvc_transfer_desc_t::getSeq_id);
    static final int NUM_BLOCKS = L.u64(kvc_transfer_desc_t::getNum_blocks);
    static final int FIRST_BLOCK = L.u64(kvc_transfer_desc_t::getFirst_block);
    static final int NUM_TOKENS = L.u64(kvc_transfer_desc_t::getNum_tokens);
    static final int KEYS_BYTES = L.u64(kvc_transfer_desc_t::getKeys_bytes);
  }

  /** {@code kvc_pool_share_t}. */
  private static final class Share {
    static final StructLayout<kvc_pool_share_t> L = new StructLayout<>("kvc_pool_share_t",
        a -> new kvc_pool_share_t(a, false), KvcNative::kvc_pool_share_init);
    static final int DEVICE_ORDINAL = L.i32(kvc_pool_share_t::getDevice_ordinal);
    static final int RANK = L.u32(kvc_pool_share_t::getRank);
    static final int POOL = L.u32(kvc_pool_share_t::getPool);
    static final int HANDLE_TYPE = L.u32(kvc_pool_share_t::getHandle_type);
    static final int NUM_CHUNKS = L.u64(kvc_pool_share_t::getNum_chunks);
    static final int GRANULARITY = L.u64(kvc_pool_share_t::getGranularity);
    static final int RESERVED_BYTES = L.u64(kvc_pool_share_t::getReserved_bytes);
    static final int MAPPED_BYTES = L.u64(kvc_pool_share_t::getMapped_bytes);
  }

  /** {@code kvc_share_chunk_t}. */
  private static final class Chunk {
    static final StructLayout<kvc_share_chunk_t> L = new StructLayout<>("kvc_share_chunk_t",
        a -> new kvc_share_chunk_t(a, false), KvcNative::kvc_share_chunk_init);
    static final int FD = L.i32(kvc_share_chunk_t::getFd);
    static final int INDEX = L.u64(kvc_share_chunk_t::getIndex);
    static final int OFFSET = L.u64(kvc_share_chunk_t::getOffset);
    static final int SIZE = L.u64(kvc_share_chunk_t::getSize);
  }

  static PoolShare poolShare(long cache, int rank, int pool) {
    Scratch s = Scratch.get();
    int at = s.alloc(Share.L.size);
    KvcNative.kvc_cache_describe_pool_share(cache, rank, pool, Share.L.prepare(s, at));
    return new PoolShare(s.getInt(at + Share.DEVICE_ORDINAL),
        Args.toInt(s.getUnsignedInt(at + Share.RANK)),
        Args.toInt(s.getUnsignedInt(at + Share.POOL)),
        Args.toInt(s.getUnsignedInt(at + Share.HANDLE_TYPE)),
        s.getLong(at + Share.NUM_CHUNKS), s.getLong(at + Share.GRANULARITY),
        s.getLong(at + Share.RESERVED_BYTES), s.getLong(at + Share.MAPPED_BYTES));
  }

  static ShareChunk exportChunk(long cache, int rank, int pool, long chunk) {
    Scratch s = Scratch.get();
    int at = s.alloc(Chunk.L.size);
    KvcNative.kvc_cache_export_pool_chunk(cache, rank, pool, chunk, Chunk.L.prepare(s, at));
    return new ShareChunk(s.getInt(at + Chunk.FD), s.getLong(at + Chunk.INDEX),
        s.getLong(at + Chunk.OFFSET), s.getLong(at + Chunk.SIZE));
  }

  /** A describe call on a prepared {@code kvc_transfer_desc_t}. */
  @FunctionalInterface
  interface Describe {
    void apply(kvc_transfer_desc_t out);
  }

  static TransferDescription describe(Describe call) {
    Scratch s = Scratch.get();
    int at = s.alloc(Desc.L.size);
    call.apply(Desc.L.prepare(s, at));
    return new TransferDescription(
        Args.toInt(s.getUnsignedInt(at + Desc.NUM_GROUPS)),
        Args.toInt(s.getUnsignedInt(at + Desc.TOKENS_PER_BLOCK)),
        s.getLong(at + Desc.SEQ_ID), s.getLong(at + Desc.NUM_BLOCKS),
        s.getLong(at + Desc.FIRST_BLOCK), s.getLong(at + Desc.NUM_TOKENS),
        s.getLong(at + Desc.KEYS_BYTES));
  }

  /** A capacity-in/count-out call: (buffer address, capacity, count address). */
  @FunctionalInterface
  interface Fill {
    void apply(long buffer, long capacity, long count);
  }

  /** Block ids through {@code call}, retried with the count a too-small buffer reports. */
  static int[] blockIds(Fill call) {
    long capacity = 64;
    for (;;) {
      Scratch s = Scratch.get();
      int count = s.alloc(8);
      int ids = s.alloc(4 * capacity);
      try {
        call.apply(s.address(ids), capacity, s.address(count));
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
  }

  static byte[] keys(long export) {
    Scratch s = Scratch.get();
    int size = s.alloc(8);
    try {
      KvcNative.kvc_export_keys(export, 0, 0, s.address(size));
    } catch (KvCacheException e) {
      if (e.status() != Status.BUFFER_TOO_SMALL) {
        throw e;
      }
    }
    long n = s.getLong(size);
    int buf = s.alloc(n);
    KvcNative.kvc_export_keys(export, s.address(buf), n, s.address(size));
    byte[] out = new byte[Math.toIntExact(n)];
    s.getBytes(buf, out);
    return out;
  }

  static long exportSequence(long cache, long id, long numTokens) {
    Scratch s = Scratch.get();
    int out = s.alloc(8);
    KvcNative.kvc_cache_export_sequence(cache, id, numTokens, s.address(out));
    return s.getLong(out);
  }

  static long importBegin(long cache, long id, int[] tokens, SequenceOptions options,
      byte[] keys) {
    kvc_sequence_options_t o = null;
    try {
      Scratch s = Scratch.get();
      int tok = s.alloc(4L * tokens.length);
      s.putInts(tok, tokens, 0, tokens.length);
      int blob = s.alloc(keys.length);
      s.putBytes(blob, keys);
      int out = s.alloc(8);
      SequenceOptions.Regions r = options == null ? null : options.reserve(s);
      o = Sequences.nativeOptions(options, s, r);
      KvcNative.kvc_cache_import_begin(cache, id, s.address(tok), tokens.length, o,
          s.address(blob), keys.length, s.address(out));
      return s.getLong(out);
    } finally {
      if (o != null) {
        o.delete();
      }
    }
  }
}
