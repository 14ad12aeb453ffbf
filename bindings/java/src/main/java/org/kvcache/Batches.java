package org.kvcache;

import java.lang.ref.Reference;
import java.nio.IntBuffer;
import java.nio.LongBuffer;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The batch calls of a {@link Cache} (kvc_batch_*): one decode step and the
 * tables of a scheduling step (padded, CSR, lengths, slot mapping). Cache
 * documents them and delegates here.
 */
final class Batches {
  private final NativeHandle handle;
  /** Row length tried first by {@link #blockTable(int, long[], int)}. */
  private final AtomicInteger tableHint = new AtomicInteger(16);

  Batches(NativeHandle handle) {
    this.handle = handle;
  }

  private static void checkIds(long[] ids) {
    Args.notNull("ids", ids);
  }

  void extendBatch(long[] ids, int[] tokens, long stream) {
    checkIds(ids);
    Args.notNull("tokens", tokens);
    if (tokens.length != ids.length) {
      throw Args.invalid("ids and tokens differ in length: " + ids.length + " != "
          + tokens.length);
    }
    handle.run(h -> {
      Scratch s = Scratch.get();
      int i = s.alloc(8L * ids.length);
      s.putLongs(i, ids, 0, ids.length);
      int t = s.alloc(4L * tokens.length);
      s.putInts(t, tokens, 0, tokens.length);
      KvcNative.kvc_batch_extend(h, s.address(i), s.address(t), ids.length, stream);
    });
  }

  BlockTable blockTable(int group, long[] ids, int pad) {
    Args.u32("group", group);
    checkIds(ids);
    return handle.call(h -> {
      int maxBlocks = tableHint.get();
      for (;;) {
        Scratch s = Scratch.get();
        int needed = s.alloc(8);
        int i = s.alloc(8L * ids.length);
        s.putLongs(i, ids, 0, ids.length);
        long cells = (long) ids.length * maxBlocks;
        int t = s.alloc(4L * cells);
        try {
          KvcNative.kvc_batch_block_table(h, group, s.address(i), ids.length, s.address(t),
              maxBlocks, pad, s.address(needed));
        } catch (KvCacheException e) {
          if (e.status() != Status.BUFFER_TOO_SMALL) {
            throw e;
          }
          maxBlocks = Math.toIntExact(Math.max(s.getLong(needed), maxBlocks + 1L));
          tableHint.accumulateAndGet(maxBlocks, Math::max);
          continue;
        }
        int[] table = new int[Math.toIntExact(cells)];
        s.getInts(t, table, 0, table.length);
        return new BlockTable(table, ids.length, maxBlocks, s.getLong(needed));
      }
    });
  }

  long blockTable(int group, long[] ids, int[] table, int maxBlocks, int pad) {
    Args.u32("group", group);
    Args.u32("max_blocks", maxBlocks);
    checkIds(ids);
    Args.notNull("table", table);
    long cells = (long) ids.length * maxBlocks;
    if (table.length < cells) {
      throw Args.invalid("table needs " + cells + " entries, has " + table.length);
    }
    return handle.callLong(h -> {
      Scratch s = Scratch.get();
      int needed = s.alloc(8);
      int i = s.alloc(8L * ids.length);
      s.putLongs(i, ids, 0, ids.length);
      int t = s.alloc(4L * cells);
      KvcNative.kvc_batch_block_table(h, group, s.address(i), ids.length, s.address(t),
          maxBlocks, pad, s.address(needed));
      s.getInts(t, table, 0, (int) cells);
      return s.getLong(needed);
    });
  }

  long blockTable(int group, long[] ids, IntBuffer table, int maxBlocks, int pad) {
    Args.u32("group", group);
    Args.u32("max_blocks", maxBlocks);
    checkIds(ids);
    Memory m = Memory.of(Args.notNull("table", table));
    return handle.callLong(h -> {
      try {
        long dst = m.resolve("table", 4L * ids.length * maxBlocks, false);
        Scratch s = Scratch.get();
        int needed = s.alloc(8);
        int i = s.alloc(8L * ids.length);
        s.putLongs(i, ids, 0, ids.length);
        KvcNative.kvc_batch_block_table(h, group, s.address(i), ids.length, dst, maxBlocks, pad,
            s.address(needed));
        return s.getLong(needed);
      } finally {
        Reference.reachabilityFence(table);
      }
    });
  }

  CsrTable blockTableCsr(int group, long[] ids) {
    Args.u32("group", group);
    checkIds(ids);
    return handle.call(h -> {
      long capacity = (long) ids.length * tableHint.get();
      for (;;) {
        Scratch s = Scratch.get();
        int num = s.alloc(8);
        int i = s.alloc(8L * ids.length);
        s.putLongs(i, ids, 0, ids.length);
        int indptr = s.alloc(4L * (ids.length + 1));
        int indices = s.alloc(4L * capacity);
        int last = s.alloc(4L * ids.length);
        try {
          KvcNative.kvc_batch_block_table_csr(h, group, s.address(i), ids.length,
              s.address(indptr), s.address(indices), capacity, s.address(last), s.address(num));
        } catch (KvCacheException e) {
          if (e.status() != Status.BUFFER_TOO_SMALL) {
            throw e;
          }
          capacity = Math.max(s.getLong(num), capacity + 1);
          continue;
        }
        int n = Math.toIntExact(s.getLong(num));
        int[] p = new int[ids.length + 1];
        int[] x = new int[n];
        int[] l = new int[ids.length];
        s.getInts(indptr, p, 0, p.length);
        s.getInts(indices, x, 0, n);
        s.getInts(last, l, 0, l.length);
        return new CsrTable(p, x, l);
      }
    });
  }

  long blockTableCsr(int group, long[] ids, int[] indptr, int[] indices,
      int[] lastPageLen) {
    Args.u32("group", group);
    checkIds(ids);
    Args.notNull("indptr", indptr);
    Args.notNull("indices", indices);
    Args.notNull("last_page_len", lastPageLen);
    if (indptr.length < ids.length + 1L || lastPageLen.length < ids.length) {
      throw Args.invalid("indptr needs " + (ids.length + 1L) + " entries and last_page_len "
          + ids.length + "; they have " + indptr.length + " and " + lastPageLen.length);
    }
    return handle.callLong(h -> {
      Scratch s = Scratch.get();
      int num = s.alloc(8);
      int i = s.alloc(8L * ids.length);
      s.putLongs(i, ids, 0, ids.length);
      int p = s.alloc(4L * (ids.length + 1));
      int x = s.alloc(4L * indices.length);
      int l = s.alloc(4L * ids.length);
      KvcNative.kvc_batch_block_table_csr(h, group, s.address(i), ids.length, s.address(p),
          s.address(x), indices.length, s.address(l), s.address(num));
      int n = Math.toIntExact(s.getLong(num));
      s.getInts(p, indptr, 0, ids.length + 1);
      s.getInts(x, indices, 0, n);
      s.getInts(l, lastPageLen, 0, ids.length);
      return n;
    });
  }

  long blockTableCsr(int group, long[] ids, IntBuffer indptr, IntBuffer indices,
      IntBuffer lastPageLen) {
    Args.u32("group", group);
    checkIds(ids);
    Memory p = Memory.of(Args.notNull("indptr", indptr));
    Memory x = Memory.of(Args.notNull("indices", indices));
    Memory l = Memory.of(Args.notNull("last_page_len", lastPageLen));
    return handle.callLong(h -> {
      try {
        long pa = p.resolve("indptr", 4L * (ids.length + 1), false);
        long xa = x.resolve("indices", 0, false);
        long la = l.resolve("last_page_len", 4L * ids.length, false);
        Scratch s = Scratch.get();
        int num = s.alloc(8);
        int i = s.alloc(8L * ids.length);
        s.putLongs(i, ids, 0, ids.length);
        KvcNative.kvc_batch_block_table_csr(h, group, s.address(i), ids.length, pa, xa,
            indices.remaining(), la, s.address(num));
        return s.getLong(num);
      } finally {
        Reference.reachabilityFence(indptr);
        Reference.reachabilityFence(indices);
        Reference.reachabilityFence(lastPageLen);
      }
    });
  }

  int[] sequenceLengths(long[] ids) {
    checkIds(ids);
    int[] lengths = new int[ids.length];
    sequenceLengths(ids, lengths);
    return lengths;
  }

  void sequenceLengths(long[] ids, int[] lengths) {
    checkIds(ids);
    Args.notNull("lengths", lengths);
    if (lengths.length < ids.length) {
      throw Args.invalid("lengths needs " + ids.length + " entries, has " + lengths.length);
    }
    handle.run(h -> {
      Scratch s = Scratch.get();
      int i = s.alloc(8L * ids.length);
      s.putLongs(i, ids, 0, ids.length);
      int l = s.alloc(4L * ids.length);
      KvcNative.kvc_batch_sequence_lengths(h, s.address(i), ids.length, s.address(l));
      s.getInts(l, lengths, 0, ids.length);
    });
  }

  void sequenceLengths(long[] ids, IntBuffer lengths) {
    checkIds(ids);
    Memory m = Memory.of(Args.notNull("lengths", lengths));
    handle.run(h -> {
      try {
        long dst = m.resolve("lengths", 4L * ids.length, false);
        Scratch s = Scratch.get();
        int i = s.alloc(8L * ids.length);
        s.putLongs(i, ids, 0, ids.length);
        KvcNative.kvc_batch_sequence_lengths(h, s.address(i), ids.length, dst);
      } finally {
        Reference.reachabilityFence(lengths);
      }
    });
  }

  SlotMapping slotMapping(int group, long[] ids) {
    Args.u32("group", group);
    checkIds(ids);
    return handle.call(h -> {
      long capacity = Math.max(64, 4L * ids.length);
      for (;;) {
        Scratch s = Scratch.get();
        int num = s.alloc(8);
        int i = s.alloc(8L * ids.length);
        s.putLongs(i, ids, 0, ids.length);
        int slots = s.alloc(8L * capacity);
        int fresh = s.alloc(4L * ids.length);
        try {
          KvcNative.kvc_batch_slot_mapping(h, group, s.address(i), ids.length,
              s.address(slots), capacity, s.address(num), s.address(fresh));
        } catch (KvCacheException e) {
          if (e.status() != Status.BUFFER_TOO_SMALL) {
            throw e;
          }
          capacity = Math.max(s.getLong(num), capacity + 1);
          continue;
        }
        int n = Math.toIntExact(s.getLong(num));
        long[] out = new long[n];
        int[] perSequence = new int[ids.length];
        s.getLongs(slots, out, 0, n);
        s.getInts(fresh, perSequence, 0, ids.length);
        return new SlotMapping(out, perSequence);
      }
    });
  }

  long slotMapping(int group, long[] ids, long[] slots, int[] newTokens) {
    Args.u32("group", group);
    checkIds(ids);
    Args.notNull("slots", slots);
    if (newTokens != null && newTokens.length < ids.length) {
      throw Args.invalid("new_tokens needs " + ids.length + " entries, has " + newTokens.length);
    }
    return handle.callLong(h -> {
      Scratch s = Scratch.get();
      int num = s.alloc(8);
      int i = s.alloc(8L * ids.length);
      s.putLongs(i, ids, 0, ids.length);
      int o = s.alloc(8L * slots.length);
      int f = newTokens == null ? -1 : s.alloc(4L * ids.length);
      KvcNative.kvc_batch_slot_mapping(h, group, s.address(i), ids.length, s.address(o),
          slots.length, s.address(num), f < 0 ? 0 : s.address(f));
      int n = Math.toIntExact(s.getLong(num));
      s.getLongs(o, slots, 0, n);
      if (newTokens != null) {
        s.getInts(f, newTokens, 0, ids.length);
      }
      return n;
    });
  }

  long slotMapping(int group, long[] ids, LongBuffer slots, IntBuffer newTokens) {
    Args.u32("group", group);
    checkIds(ids);
    Memory m = Memory.of(Args.notNull("slots", slots));
    Memory f = newTokens == null ? null : Memory.of(newTokens);
    return handle.callLong(h -> {
      try {
        long sa = m.resolve("slots", 0, false);
        long fa = f == null ? 0 : f.resolve("new_tokens", 4L * ids.length, false);
        Scratch s = Scratch.get();
        int num = s.alloc(8);
        int i = s.alloc(8L * ids.length);
        s.putLongs(i, ids, 0, ids.length);
        KvcNative.kvc_batch_slot_mapping(h, group, s.address(i), ids.length, sa,
            slots.remaining(), s.address(num), fa);
        return s.getLong(num);
      } finally {
        Reference.reachabilityFence(slots);
        Reference.reachabilityFence(newTokens);
      }
    });
  }
}
