package org.kvcache;

import java.lang.ref.Reference;

/**
 * The kernels of a {@link Cache} on its memory (kvc_store_kv*,
 * kvc_copy_blocks, kvc_decode_*, kvc_prefill_*, kvc_cache_get_async_error):
 * host buffers are checked against the layer views. Cache documents them
 * and delegates here.
 */
final class Kernels {
  private final NativeHandle handle;
  private final boolean device; // a CUDA cache: buffers are device memory
  private final LayerView[] views;

  Kernels(NativeHandle handle, boolean device, LayerView[] views) {
    this.handle = handle;
    this.device = device;
    this.views = views;
  }


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

  void storeKv(StoreArgs args, long stream) {
    Args.notNull("args", args);
    Args.notNull("src_dtype", args.srcDtype);
    LayerView v = view(args.layer);
    handle.run(h -> {
      kvc_store_args_t a = new kvc_store_args_t();
      try {
        boolean dev = device;
        long rows = (long) args.numTokens * v.kvHeads() * v.headDim() * args.srcDtype.size();
        KvcNative.kvc_store_args_init(a);
        a.setLayer(args.layer);
        a.setRank(args.rank);
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
      }
    });
  }

  void storeKvStrided(StoreArgs args, StoreStrides strides, long stream) {
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
    handle.run(h -> {
      kvc_store_args_t a = new kvc_store_args_t();
      kvc_store_strides_t s = new kvc_store_strides_t();
      try {
        boolean dev = device;
        boolean any = args.numTokens > 0;
        KvcNative.kvc_store_args_init(a);
        a.setLayer(args.layer);
        a.setRank(args.rank);
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
      }
    });
  }

  void copyBlocks(int group, int[] src, int[] dst, int[] numTokens, long stream) {
    Args.u32("group", group);
    Args.notNull("src", src);
    Args.notNull("dst", dst);
    if (dst.length != src.length || (numTokens != null && numTokens.length != src.length)) {
      throw Args.invalid("src, dst and num_tokens differ in length");
    }
    handle.run(h -> {
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
    });
  }

  private kvc_decode_args_t decodeStruct(DecodeArgs args, boolean required) {
    Args.notNull("q_dtype", args.qDtype);
    LayerView v = view(args.layer);
    boolean dev = device;
    boolean req = required && args.batch > 0;
    kvc_decode_args_t a = new kvc_decode_args_t();
    try {
      KvcNative.kvc_decode_args_init(a);
      a.setLayer(args.layer);
      a.setRank(args.rank);
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

  long decodeWorkspaceSize(DecodeArgs args) {
    Args.notNull("args", args);
    return handle.callLong(h -> {
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
      }
    });
  }

  void decodeAttention(DecodeArgs args, long stream) {
    Args.notNull("args", args);
    handle.run(h -> {
      kvc_decode_args_t a = null;
      try {
        a = decodeStruct(args, true);
        KvcNative.kvc_decode_attention(h, a, stream);
      } finally {
        if (a != null) {
          a.delete();
        }
        Reference.reachabilityFence(args);
      }
    });
  }

  /**
   * Fills a kvc_prefill_args_t; the host arrays qo_indptr and kv_lens go to
   * {@code s}, with 8 more bytes for a result whose offset goes to
   * {@code result[0]}, all allocated before any address is taken.
   */
  private kvc_prefill_args_t prefillStruct(PrefillArgs args, boolean required, Scratch s,
      int[] result) {
    Args.notNull("q_dtype", args.qDtype);
    LayerView v = view(args.layer);
    boolean dev = device;
    int batch = args.kvLens == null ? 0 : args.kvLens.length;
    if (args.qoIndptr != null && args.qoIndptr.length != batch + 1) {
      throw Args.invalid("qo_indptr has " + args.qoIndptr.length + " entries, " + batch
          + " sequences need " + (batch + 1));
    }
    long totalQ = args.totalQ >= 0 || args.qoIndptr == null ? Math.max(args.totalQ, 0)
        : args.qoIndptr[batch];
    if (totalQ < 0) {
      throw Args.invalid("qo_indptr[" + batch + "] = " + totalQ + " is negative");
    }
    boolean req = required && batch > 0;
    kvc_prefill_args_t a = new kvc_prefill_args_t();
    try {
      KvcNative.kvc_prefill_args_init(a);
      a.setLayer(args.layer);
      a.setRank(args.rank);
      a.setBatch(batch);
      a.setTotal_q(totalQ);
      a.setQ_heads(args.qHeads);
      a.setQ_dtype(args.qDtype.code());
      a.setTable_format(args.tableFormat.code());
      a.setTable_stride(args.tableStride);
      a.setMax_kv_len(args.maxKvLen);
      a.setWindow(args.window);
      a.setSoftmax_scale(args.softmaxScale);
      a.setLogits_soft_cap(args.logitsSoftCap);
      a.setK_scale(args.kScale);
      a.setV_scale(args.vScale);
      a.setWorkspace_bytes(args.workspaceBytes);
      long qBytes = totalQ * args.qHeads * v.headDim() * args.qDtype.size();
      a.setQuery(need(args.query, "query", qBytes, dev, req && totalQ > 0));
      a.setOut(need(args.out, "out", qBytes, dev, req && totalQ > 0));
      a.setLse(need(args.lse, "lse", 4 * totalQ * args.qHeads, dev, false));
      long b = batch;
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
      int qo = s.alloc(4L * (batch + 1));
      int kl = s.alloc(4L * Math.max(batch, 1));
      result[0] = s.alloc(8);
      if (batch > 0) {
        if (args.qoIndptr != null) {
          s.putInts(qo, args.qoIndptr, 0, batch + 1);
        }
        s.putInts(kl, args.kvLens, 0, batch);
        a.setQo_indptr(args.qoIndptr == null ? 0 : s.address(qo));
        a.setKv_lens(s.address(kl));
      }
      return a;
    } catch (RuntimeException e) {
      a.delete();
      throw e;
    }
  }

  long prefillWorkspaceSize(PrefillArgs args) {
    Args.notNull("args", args);
    return handle.callLong(h -> {
      kvc_prefill_args_t a = null;
      try {
        Scratch s = Scratch.get();
        int[] out = new int[1];
        a = prefillStruct(args, false, s, out);
        KvcNative.kvc_prefill_workspace_size(h, a, s.address(out[0]));
        return s.getLong(out[0]);
      } finally {
        if (a != null) {
          a.delete();
        }
      }
    });
  }

  void prefillAttention(PrefillArgs args, long stream) {
    Args.notNull("args", args);
    handle.run(h -> {
      kvc_prefill_args_t a = null;
      try {
        a = prefillStruct(args, true, Scratch.get(), new int[1]);
        KvcNative.kvc_prefill_attention(h, a, stream);
      } finally {
        if (a != null) {
          a.delete();
        }
        Reference.reachabilityFence(args);
      }
    });
  }

  void checkAsyncError(long stream) {
    handle.run(h -> {
      Scratch s = Scratch.get();
      int out = s.alloc(8);
      KvcNative.kvc_cache_get_async_error(h, stream, s.address(out));
    });
  }
}
