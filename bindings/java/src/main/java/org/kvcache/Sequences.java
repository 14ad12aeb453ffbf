package org.kvcache;

/**
 * The sequence calls of a {@link Cache} (kvc_sequence_*, kvc_cache_probe):
 * add, extend, commit, rewind, fork, remove, pin, describe, block ids.
 * Cache documents them and delegates here.
 */
final class Sequences {
  private final NativeHandle handle;

  Sequences(NativeHandle handle) {
    this.handle = handle;
  }

  static kvc_sequence_options_t nativeOptions(SequenceOptions options, Scratch s,
      SequenceOptions.Regions regions) {
    if (options == null) {
      return null;
    }
    kvc_sequence_options_t o = new kvc_sequence_options_t();
    KvcNative.kvc_sequence_options_init(o);
    options.toNative(s, regions, o);
    return o;
  }

  long addSequence(long id, int[] tokens, int from, int count, SequenceOptions options,
      long stream) {
    Args.notNull("tokens", tokens);
    Args.range("tokens", tokens.length, from, count);
    return handle.callLong(h -> {
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
      }
    });
  }

  void extendSequence(long id, int[] tokens, int from, int count, long stream) {
    Args.notNull("tokens", tokens);
    Args.range("tokens", tokens.length, from, count);
    handle.run(h -> {
      Scratch s = Scratch.get();
      int tok = s.alloc(4L * count);
      s.putInts(tok, tokens, from, count);
      KvcNative.kvc_sequence_extend(h, id, s.address(tok), count, stream);
    });
  }

  void commit(long id, long numComputed) {
    Args.count("num_computed", numComputed);
    handle.run(h -> KvcNative.kvc_sequence_commit(h, id, numComputed));
  }

  void rewind(long id, long numTokens) {
    Args.count("num_tokens", numTokens);
    handle.run(h -> KvcNative.kvc_sequence_rewind(h, id, numTokens));
  }

  void fork(long parent, long child) {
    handle.run(h -> KvcNative.kvc_sequence_fork(h, parent, child));
  }

  void removeSequence(long id) {
    handle.run(h -> KvcNative.kvc_sequence_remove(h, id));
  }

  void pin(long id) {
    handle.run(h -> KvcNative.kvc_sequence_pin(h, id));
  }

  void unpin(long id) {
    handle.run(h -> KvcNative.kvc_sequence_unpin(h, id));
  }

  SequenceDescription describeSequence(long id) {
    return handle.call(h -> Records.sequenceDescription(h, id));
  }

  int[] blockIds(long id, int group) {
    Args.u32("group", group);
    return handle.call(h -> {
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
    });
  }

  int blockIds(long id, int group, int[] out, int from) {
    Args.u32("group", group);
    Args.notNull("out", out);
    Args.range("out", out.length, from, 0);
    int capacity = out.length - from;
    return handle.callInt(h -> {
      Scratch s = Scratch.get();
      int count = s.alloc(8);
      int ids = s.alloc(4L * capacity);
      KvcNative.kvc_sequence_block_ids(h, id, group, s.address(ids), capacity, s.address(count));
      int n = Math.toIntExact(s.getLong(count));
      s.getInts(ids, out, from, n);
      return n;
    });
  }

  long blocksNeeded(long id, long numTokens) {
    Args.count("num_tokens", numTokens);
    return handle.callLong(h -> {
      Scratch s = Scratch.get();
      int out = s.alloc(8);
      KvcNative.kvc_sequence_blocks_needed(h, id, numTokens, s.address(out));
      return s.getLong(out);
    });
  }

  long probe(int[] tokens, int from, int count, SequenceOptions options) {
    Args.notNull("tokens", tokens);
    Args.range("tokens", tokens.length, from, count);
    return handle.callLong(h -> {
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
      }
    });
  }
}
