package org.kvcache;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.OptionalLong;

/**
 * The event calls of a {@link Cache} (kvc_cache_drain_events,
 * kvc_cache_snapshot) and kvc_block_hashes for {@link Config}. Events and
 * snapshot entries are read by offset from the arrays the library writes
 * into the scratch ({@code kvcj_event_layout}, {@code
 * kvcj_snapshot_entry_layout} in kvcache.i).
 */
final class Events {
  /** Most events one native drain takes. */
  private static final int CHUNK = 4096;
  /** Most token ids one native drain takes, unless one event needs more. */
  private static final long TOKEN_CHUNK = 1L << 22;

  private final NativeHandle handle;

  Events(NativeHandle handle) {
    this.handle = handle;
  }

  private static long[] eventLayout;
  private static long[] entryLayout;

  private static synchronized long[] eventLayout() {
    if (eventLayout == null) {
      long[] l = new long[14];
      for (int i = 0; i < l.length; i++) {
        l[i] = KvcNative.kvcj_event_layout(i);
      }
      eventLayout = l;
    }
    return eventLayout;
  }

  private static synchronized long[] entryLayout() {
    if (entryLayout == null) {
      long[] l = new long[9];
      for (int i = 0; i < l.length; i++) {
        l[i] = KvcNative.kvcj_snapshot_entry_layout(i);
      }
      entryLayout = l;
    }
    return entryLayout;
  }

  List<KvEvent> drain(boolean withTokens) {
    return handle.call(h -> {
      kvc_event_drain_t r = new kvc_event_drain_t();
      try {
        KvcNative.kvc_event_drain_init(r);
        KvcNative.kvc_cache_drain_events(h, 0, 0, 0, 0, r); // the sizes
        long target = r.getLast_id();
        long pending = r.getEvents_pending();
        long tokensPending = r.getTokens_pending();
        long tokenCap = Math.min(tokensPending, TOKEN_CHUNK);
        List<KvEvent> out = new ArrayList<>();
        long[] k = eventLayout();
        while (pending > 0) {
          int capacity = (int) Math.min(pending, CHUNK);
          long tokens = withTokens ? tokenCap : 0;
          Scratch s = Scratch.get();
          int ev = s.alloc(k[0] * capacity);
          int tok = s.alloc(4 * tokens);
          KvcNative.kvc_cache_drain_events(h, s.address(ev), capacity,
              withTokens ? s.address(tok) : 0, tokens, r);
          int n = Math.toIntExact(r.getEvents());
          long written = r.getTokens(); // the events' token ids lie in these
          for (int i = 0; i < n; i++) {
            out.add(event(s, ev + (int) (k[0] * i), k, tok, written));
          }
          if (n > 0) {
            KvEvent last = out.get(out.size() - 1);
            long lastId = last instanceof KvEvent.Lost l ? l.firstId() + l.count() - 1 : last.id();
            if (lastId >= target) {
              break;
            }
          }
          pending = r.getEvents_pending();
          tokensPending = r.getTokens_pending();
          if (n == 0 && pending > 0) {
            if (!withTokens || tokensPending <= tokens) {
              throw new KvCacheException(Status.INTERNAL,
                  "kvc_cache_drain_events wrote nothing with room for the pending tokens");
            }
            tokenCap = tokensPending; // one event needs more than the chunk
          } else {
            tokenCap = Math.min(tokensPending, TOKEN_CHUNK);
          }
        }
        return out;
      } finally {
        r.delete();
      }
    });
  }

  private static KvEvent event(Scratch s, int at, long[] k, int tok, long written) {
    long id = s.getLong(at + (int) k[1]);
    int kind = s.getInt(at + (int) k[2]);
    long tierCode = s.getUnsignedInt(at + (int) k[3]);
    long hash = s.getLong(at + (int) k[4]);
    long groups = s.getLong(at + (int) k[6]);
    int priority = s.getInt(at + (int) k[9]);
    if (kind == KvcNativeConstants.KVC_EVENT_STORED) {
      int numTokens = s.getInt(at + (int) k[10]);
      long offset = s.getLong(at + (int) k[12]);
      int[] tokens = null;
      // KVC_EVENT_NO_TOKENS is UINT64_MAX (-1 as a long).
      if (offset != -1L && offset >= 0 && offset + numTokens <= written) {
        tokens = new int[numTokens];
        s.getInts(tok + Math.toIntExact(4 * offset), tokens, 0, numTokens);
      }
      OptionalLong lora = s.getInt(at + (int) k[8]) != 0
          ? OptionalLong.of(s.getLong(at + (int) k[7])) : OptionalLong.empty();
      return new KvEvent.Stored(id, hash, s.getLong(at + (int) k[5]), groups, Tier.of(tierCode),
          priority, numTokens, lora, tokens);
    }
    if (kind == KvcNativeConstants.KVC_EVENT_REMOVED) {
      return new KvEvent.Removed(id, hash, groups, Tier.of(tierCode));
    }
    if (kind == KvcNativeConstants.KVC_EVENT_TIER_CHANGED) {
      return new KvEvent.TierChanged(id, hash, groups, Tier.of(tierCode), priority);
    }
    if (kind == KvcNativeConstants.KVC_EVENT_PRIORITY_CHANGED) {
      return new KvEvent.PriorityChanged(id, hash, priority);
    }
    if (kind == KvcNativeConstants.KVC_EVENT_CLEARED) {
      return new KvEvent.Cleared(id);
    }
    if (kind == KvcNativeConstants.KVC_EVENT_LOST) {
      return new KvEvent.Lost(id, s.getLong(at + (int) k[13]));
    }
    return new KvEvent.Unknown(id, kind);
  }

  Snapshot snapshot() {
    return handle.call(h -> {
      long[] k = entryLayout();
      long capacity = 0;
      for (;;) {
        Scratch s = Scratch.get();
        int count = s.alloc(8);
        int eventId = s.alloc(8);
        int entries = s.alloc(k[0] * capacity);
        try {
          KvcNative.kvc_cache_snapshot(h, s.address(entries), capacity, s.address(count),
              s.address(eventId));
        } catch (KvCacheException e) {
          if (e.status() != Status.BUFFER_TOO_SMALL) {
            throw e;
          }
          capacity = s.getLong(count); // the cache may grow before the next call: loop
          continue;
        }
        int n = Math.toIntExact(s.getLong(count));
        List<SnapshotEntry> list = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
          int at = entries + (int) (k[0] * i);
          OptionalLong lora = s.getInt(at + (int) k[5]) != 0
              ? OptionalLong.of(s.getLong(at + (int) k[4])) : OptionalLong.empty();
          list.add(new SnapshotEntry(s.getLong(at + (int) k[1]), s.getLong(at + (int) k[2]),
              s.getLong(at + (int) k[3]), lora, Tier.of(s.getUnsignedInt(at + (int) k[6])),
              s.getInt(at + (int) k[7]), s.getInt(at + (int) k[8])));
        }
        return new Snapshot(s.getLong(eventId), Collections.unmodifiableList(list));
      }
    });
  }

  static long[] blockHashes(Config config, int[] tokens, int from, int count,
      SequenceOptions options) {
    Args.notNull("tokens", tokens);
    Args.range("tokens", tokens.length, from, count);
    return config.call(h -> {
      long capacity = 0;
      for (;;) {
        kvc_sequence_options_t o = null;
        try {
          Scratch s = Scratch.get();
          int tok = s.alloc(4L * count);
          s.putInts(tok, tokens, from, count);
          int n = s.alloc(8);
          int hashes = s.alloc(8 * capacity);
          SequenceOptions.Regions r = options == null ? null : options.reserve(s);
          o = Sequences.nativeOptions(options, s, r);
          try {
            KvcNative.kvc_block_hashes(h, s.address(tok), count, o, s.address(hashes), capacity,
                s.address(n));
          } catch (KvCacheException e) {
            if (e.status() != Status.BUFFER_TOO_SMALL) {
              throw e;
            }
            capacity = s.getLong(n);
            continue;
          }
          long[] out = new long[Math.toIntExact(s.getLong(n))];
          s.getLongs(hashes, out, 0, out.length);
          return out;
        } finally {
          if (o != null) {
            o.delete();
          }
        }
      }
    });
  }
}
