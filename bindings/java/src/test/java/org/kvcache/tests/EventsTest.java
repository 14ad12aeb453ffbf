package org.kvcache.tests;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;
import org.kvcache.Cache;
import org.kvcache.Config;
import org.kvcache.KvCacheException;
import org.kvcache.KvEvent;
import org.kvcache.SequenceOptions;
import org.kvcache.Snapshot;
import org.kvcache.SnapshotEntry;
import org.kvcache.Status;
import org.kvcache.Tier;

/**
 * KV events: STORED hashes equal {@link Config#blockHashes} for the same
 * prompt and options (plain, salted, LoRA), eviction gives REMOVED, reset
 * CLEARED, an overflowing ring LOST, and the snapshot resyncs an index; a
 * drain on another thread.
 */
class EventsTest {
  /** 16 blocks of 4 tokens, whole-block reuse, an event ring of {@code ring}. */
  private static Config config(int ring) {
    return Fixtures.config(16).setPartialReuse(false).setEventBufferSize(ring);
  }

  /** A router's view of one cache, fed only by events and snapshots. */
  private static final class Index {
    final Map<Long, SnapshotEntry> entries = new HashMap<>();

    static Index of(Snapshot s) {
      Index ix = new Index();
      for (SnapshotEntry e : s.entries()) {
        ix.entries.put(e.hash(), e);
      }
      return ix;
    }

    void apply(List<KvEvent> events) {
      for (KvEvent e : events) {
        if (e instanceof KvEvent.Stored st) {
          SnapshotEntry old = entries.get(st.hash());
          long groups = (old == null ? 0 : old.groups()) | st.groups();
          SnapshotEntry base = old != null ? old
              : new SnapshotEntry(st.hash(), st.parentHash(), 0, st.lora(), st.tier(),
                  st.priority(), st.numTokens());
          entries.put(st.hash(), new SnapshotEntry(base.hash(), base.parentHash(), groups,
              base.lora(), base.tier(), base.priority(), base.numTokens()));
        } else if (e instanceof KvEvent.Removed r) {
          SnapshotEntry old = entries.get(r.hash());
          assertTrue(old != null, "REMOVED of a block not indexed: " + r);
          long groups = old.groups() & ~r.groups();
          if (groups == 0) {
            entries.remove(r.hash());
          } else {
            entries.put(r.hash(), new SnapshotEntry(old.hash(), old.parentHash(), groups,
                old.lora(), old.tier(), old.priority(), old.numTokens()));
          }
        } else if (e instanceof KvEvent.TierChanged t) {
          SnapshotEntry old = entries.get(t.hash());
          entries.put(t.hash(), new SnapshotEntry(old.hash(), old.parentHash(), t.groups(),
              old.lora(), t.tier(), t.priority(), old.numTokens()));
        } else if (e instanceof KvEvent.PriorityChanged p) {
          SnapshotEntry old = entries.get(p.hash());
          entries.put(p.hash(), new SnapshotEntry(old.hash(), old.parentHash(), old.groups(),
              old.lora(), old.tier(), p.priority(), old.numTokens()));
        } else if (e instanceof KvEvent.Cleared) {
          entries.clear();
        } else {
          throw new AssertionError("unexpected " + e);
        }
      }
    }

    void check(Cache cache) {
      assertEquals(of(cache.snapshot()).entries, entries);
    }
  }

  @Test
  void scriptedScenario() {
    try (Config config = config(1024); Cache cache = new Cache(config)) {
      Index index = new Index();
      int[] prompt = Fixtures.tokens(100, 12); // 3 full blocks
      SequenceOptions[] scopes = {
        null, new SequenceOptions().salt("tenant-a"), new SequenceOptions().lora(7)
      };
      long nextId = 1;
      for (int seq = 0; seq < scopes.length; seq++) {
        cache.addSequence(seq + 1, prompt, scopes[seq]);
        cache.commit(seq + 1, prompt.length);
        List<KvEvent> events = cache.drainEvents(true);
        long[] want = config.blockHashes(prompt, scopes[seq]);
        assertEquals(3, want.length);
        assertEquals(3, events.size(), events.toString());
        for (int b = 0; b < 3; b++) {
          KvEvent.Stored st = assertInstanceOf(KvEvent.Stored.class, events.get(b));
          assertEquals(nextId++, st.id());
          assertEquals(want[b], st.hash());
          assertEquals(b == 0 ? 0 : want[b - 1], st.parentHash());
          assertEquals(1, st.groups());
          assertEquals(Tier.PRIMARY, st.tier());
          assertEquals(35, st.priority());
          assertEquals(4, st.numTokens());
          assertEquals(seq == 2 ? OptionalLong.of(7) : OptionalLong.empty(), st.lora());
          assertArrayEquals(Fixtures.tokens(100 + 4 * b, 4), st.tokens());
        }
        index.apply(events);
        index.check(cache);
      }
      long[] plain = config.blockHashes(prompt, null);
      long[] salted = config.blockHashes(prompt, scopes[1]);
      long[] lora = config.blockHashes(prompt, scopes[2]);
      long[] other = config.blockHashes(prompt, new SequenceOptions().salt("tenant-b"));
      assertTrue(plain[0] != salted[0] && plain[0] != lora[0] && salted[0] != lora[0]);
      assertNotEquals(salted[0], other[0]);

      // Without tokens, STORED carries none.
      for (int seq = 1; seq <= 3; seq++) {
        cache.removeSequence(seq);
      }
      cache.addSequence(4, Fixtures.tokens(500, 4));
      cache.commit(4, 4);
      List<KvEvent> events = cache.drainEvents(false);
      assertEquals(1, events.size());
      assertNull(assertInstanceOf(KvEvent.Stored.class, events.get(0)).tokens());
      nextId++;
      index.apply(events);
      cache.removeSequence(4);

      // Eviction: 16 blocks for one sequence evict the 10 cached ones.
      cache.addSequence(5, Fixtures.tokens(1000, 64));
      events = cache.drainEvents(true);
      assertEquals(10, events.size(), events.toString());
      for (KvEvent e : events) {
        KvEvent.Removed r = assertInstanceOf(KvEvent.Removed.class, e);
        assertEquals(nextId++, r.id());
        assertEquals(Tier.PRIMARY, r.tier());
        assertEquals(1, r.groups());
      }
      index.apply(events);
      index.check(cache);
      assertTrue(index.entries.isEmpty());
      cache.commit(5, 64);
      index.apply(cache.drainEvents(false));
      index.check(cache);
      assertEquals(16, index.entries.size());
      cache.removeSequence(5);

      // resetReuse: one CLEARED event; the snapshot is empty as of it.
      cache.resetReuse();
      events = cache.drainEvents(true);
      assertEquals(1, events.size());
      assertInstanceOf(KvEvent.Cleared.class, events.get(0));
      index.apply(events);
      index.check(cache);
      Snapshot s = cache.snapshot();
      assertEquals(events.get(0).id(), s.eventId());
      assertTrue(s.entries().isEmpty());
      assertTrue(cache.drainEvents(true).isEmpty());
    }
  }

  @Test
  void lostEventsThenSnapshotResync() {
    try (Config config = config(4); Cache cache = new Cache(config)) {
      int[] prompt = Fixtures.tokens(7, 40); // 10 STORED events, 6 dropped
      cache.addSequence(1, prompt);
      cache.commit(1, 40);
      List<KvEvent> events = cache.drainEvents(true);
      assertEquals(new KvEvent.Lost(1, 6), events.get(0));
      long[] want = config.blockHashes(prompt, null);
      assertEquals(5, events.size());
      for (int i = 1; i < 5; i++) {
        KvEvent.Stored st = assertInstanceOf(KvEvent.Stored.class, events.get(i));
        assertEquals(6 + i, st.id());
        assertEquals(want[5 + i], st.hash());
      }
      Snapshot s = cache.snapshot();
      assertEquals(10, s.eventId());
      assertEquals(10, s.entries().size());
      for (int b = 0; b < 10; b++) { // parents before children
        assertEquals(want[b], s.entries().get(b).hash());
        assertEquals(b == 0 ? 0 : want[b - 1], s.entries().get(b).parentHash());
      }
      Index index = Index.of(s);
      cache.removeSequence(1);
      cache.addSequence(2, Fixtures.tokens(900, 32)); // 8 blocks: evicts 2
      events = cache.drainEvents(false);
      assertEquals(2, events.size());
      assertEquals(s.eventId() + 1, events.get(0).id());
      index.apply(events);
      index.check(cache);
      cache.commit(2, 12); // 3 STORED fit the ring
      index.apply(cache.drainEvents(false));
      index.check(cache);
    }
  }

  @Test
  void eventsOffAndBadInput() {
    try (Cache off = Fixtures.cache(16)) {
      assertEquals(Status.UNSUPPORTED,
          assertThrows(KvCacheException.class, () -> off.drainEvents(true)).status());
      assertEquals(Status.UNSUPPORTED,
          assertThrows(KvCacheException.class, off::snapshot).status());
    }
    try (Config config = Fixtures.config(16)) {
      KvCacheException e = assertThrows(KvCacheException.class,
          () -> config.blockHashes(Fixtures.tokens(0, 8),
              new SequenceOptions().extraKey(0, 0, new byte[] {1})));
      assertEquals(Status.INVALID_ARGUMENT, e.status());
      assertFalse(e.nativeMessage().isEmpty());
      assertEquals(1, config.blockHashes(Fixtures.tokens(0, 7), null).length);
      assertEquals(0, config.blockHashes(new int[0], null).length);
      long[] a = config.blockHashes(Fixtures.tokens(0, 8), null);
      config.setEventHashSeed(42);
      long[] b = config.blockHashes(Fixtures.tokens(0, 8), null);
      assertTrue(a[0] != b[0] && a[1] != b[1]);
      long[] k = config.blockHashes(Fixtures.tokens(0, 8),
          new SequenceOptions().extraKey(4, 2, "image".getBytes()));
      assertEquals(b[0], k[0]);
      assertNotEquals(b[1], k[1]);
      long[] part = config.blockHashes(Fixtures.tokens(0, 12), 4, 8, null);
      assertArrayEquals(config.blockHashes(Fixtures.tokens(4, 8), null), part);
    }
  }

  @Test
  void drainOnAnotherThread() throws Exception {
    try (Config config = config(1 << 16); Cache cache = new Cache(config)) {
      AtomicBoolean stop = new AtomicBoolean();
      List<KvEvent> all = new ArrayList<>();
      Thread drainer = new Thread(() -> {
        while (!stop.get()) {
          all.addAll(cache.drainEvents(true));
        }
      });
      drainer.start();
      Thread[] workers = new Thread[2];
      for (int w = 0; w < workers.length; w++) {
        final int worker = w;
        workers[w] = new Thread(() -> {
          for (int i = 0; i < 50; i++) {
            long id = worker * 1000L + i;
            try {
              cache.addSequence(id, Fixtures.tokens(i % 7 * 8, 8 + 4 * (i % 3)));
            } catch (KvCacheException e) {
              if (e.status() == Status.OUT_OF_BLOCKS) {
                continue;
              }
              throw e;
            }
            cache.commit(id, 8);
            cache.removeSequence(id);
          }
        });
        workers[w].start();
      }
      for (Thread t : workers) {
        t.join();
      }
      stop.set(true);
      drainer.join();
      all.addAll(cache.drainEvents(true));
      for (int i = 0; i < all.size(); i++) {
        assertEquals(i + 1, all.get(i).id());
      }
      Index index = new Index();
      index.apply(all);
      index.check(cache);
    }
  }
}
