package org.kvcache;

import java.lang.ref.Reference;

/** The decode calls of {@link StatefulCache} (kvc_stateful_decode_args_t). */
final class StatefulDecode {
  private StatefulDecode() {}

  static long workspaceSize(NativeHandle handle, int layer, int qHeads, DType qDtype,
      int maxSeqLen) {
    Args.u32("layer", layer);
    Args.u32("q_heads", qHeads);
    Args.notNull("q_dtype", qDtype);
    Args.u32("max_seq_len", maxSeqLen);
    return handle.callLong(h -> {
      kvc_stateful_decode_args_t a = new kvc_stateful_decode_args_t();
      try {
        KvcNative.kvc_stateful_decode_args_init(a);
        a.setLayer(layer);
        a.setQ_heads(qHeads);
        a.setQ_dtype(qDtype.code());
        a.setMax_seq_len(maxSeqLen);
        Scratch s = Scratch.get();
        int out = s.alloc(8);
        KvcNative.kvc_stateful_decode_workspace_size(h, a, s.address(out));
        return s.getLong(out);
      } finally {
        a.delete();
      }
    });
  }

  static void run(NativeHandle handle, boolean device, int layer, int qHeads, DType qDtype,
      Memory query, Memory out, long bytes, float softmaxScale, float kScale, float vScale,
      Memory workspace, long workspaceBytes, long stream) {
    Args.notNull("query", query);
    Args.notNull("out", out);
    handle.run(h -> {
      kvc_stateful_decode_args_t a = new kvc_stateful_decode_args_t();
      try {
        KvcNative.kvc_stateful_decode_args_init(a);
        a.setLayer(layer);
        a.setQ_heads(qHeads);
        a.setQ_dtype(qDtype.code());
        a.setQuery(query.resolve("query", bytes, device));
        a.setOut(out.resolve("out", bytes, device));
        a.setSoftmax_scale(softmaxScale);
        a.setK_scale(kScale);
        a.setV_scale(vScale);
        Args.count("workspace_bytes", workspaceBytes);
        if (workspace != null) {
          a.setWorkspace(workspace.resolve("workspace", workspaceBytes, device));
        }
        a.setWorkspace_bytes(workspaceBytes);
        KvcNative.kvc_stateful_decode(h, a, stream);
      } finally {
        a.delete();
        Reference.reachabilityFence(query);
        Reference.reachabilityFence(out);
        Reference.reachabilityFence(workspace);
      }
    });
  }
}
