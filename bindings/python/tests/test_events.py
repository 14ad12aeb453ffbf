"""KV events through the binding: STORED hashes equal Config.block_hashes
and the hash algorithm documented in events.h (recomputed here with
xxHash's XXH3 through ctypes), for plain, salted and LoRA prompts;
eviction gives REMOVED, reset_reuse CLEARED, a full ring LOST, and a
snapshot resyncs an index fed by events."""
import ctypes
import ctypes.util
import struct
import unittest

import kvcache
from kvcache import EventKind, KvCacheError, SequenceOptions, Status, Tier
from support import prompt


def _xxh3():
    for name in ("libxxhash.so.0", ctypes.util.find_library("xxhash")):
        try:
            f = ctypes.CDLL(name).XXH3_64bits_withSeed
        except (OSError, TypeError, AttributeError):
            continue
        f.restype, f.argtypes = ctypes.c_uint64, [ctypes.c_char_p, ctypes.c_size_t,
                                                 ctypes.c_uint64]
        return f
    return None


XXH3 = _xxh3()


def reference_hashes(tokens, tpb, seed=0, salt=None, lora=None):
    """The portable hashes of events.h, computed from their description."""
    s = b"S" + (b"\x01" + struct.pack("<Q", len(salt)) + salt if salt is not None else b"\x00")
    s += b"L" + (b"\x01" + struct.pack("<Q", lora) if lora is not None else b"\x00")
    scope = XXH3(s, len(s), seed)
    out, parent = [], 0
    for b in range(len(tokens) // tpb):
        block = tokens[b * tpb:(b + 1) * tpb]
        data = struct.pack("<QQQI%di" % tpb, parent, scope, 0, tpb, *block)
        parent = XXH3(data, len(data), seed)
        out.append(parent)
    return out


def events_cache(ring):
    """16 blocks of 4 tokens, whole-block reuse, an event ring of `ring`."""
    return kvcache.Cache(num_layers=2, kv_heads=2, head_dim=64, tokens_per_block=4,
                         max_tokens=64, partial_reuse=False, event_buffer_size=ring)


class Index(dict):
    """A router's view of a cache: hash -> SnapshotEntry, fed by events."""

    def apply(self, events):
        for e in events:
            if e.kind == EventKind.STORED:
                old = self.get(e.hash)
                if old is None:
                    old = kvcache.SnapshotEntry(e.hash, e.parent_hash, 0, e.lora_id,
                                                int(e.has_lora), e.tier, e.priority,
                                                e.num_tokens)
                self[e.hash] = old._replace(groups=old.groups | e.groups)
            elif e.kind == EventKind.REMOVED:
                groups = self[e.hash].groups & ~e.groups
                if groups:
                    self[e.hash] = self[e.hash]._replace(groups=groups)
                else:
                    del self[e.hash]
            elif e.kind == EventKind.TIER_CHANGED:
                self[e.hash] = self[e.hash]._replace(tier=e.tier, groups=e.groups,
                                                     priority=e.priority)
            elif e.kind == EventKind.PRIORITY_CHANGED:
                self[e.hash] = self[e.hash]._replace(priority=e.priority)
            elif e.kind == EventKind.CLEARED:
                self.clear()
            else:
                raise AssertionError("unexpected %r" % (e,))

    def check(self, test, cache):
        snap = cache.snapshot()
        test.assertEqual(dict(self), {e.hash: e for e in snap.entries})


class EventsTest(unittest.TestCase):
    def test_scripted_scenario(self):
        with events_cache(1024) as c, kvcache.Config(tokens_per_block=4) as cfg:
            index = Index()
            p = prompt(12)
            next_id = 1
            for seq, opts in enumerate([None, SequenceOptions(salt=b"tenant-a"),
                                        SequenceOptions(lora_id=7)], start=1):
                c.add_sequence(seq, p, opts)
                c.commit(seq, 12)
                events = c.drain_events(tokens=True)
                want = cfg.block_hashes(p, opts)
                self.assertEqual([e.hash for e in events], want)
                self.assertEqual([e.parent_hash for e in events], [0] + want[:2])
                self.assertEqual([e.id for e in events], list(range(next_id, next_id + 3)))
                self.assertEqual([e.tokens for e in events], [p[0:4], p[4:8], p[8:12]])
                for e in events:
                    self.assertEqual((e.kind, e.tier, e.groups, e.num_tokens, e.priority),
                                     (EventKind.STORED, Tier.PRIMARY, 1, 4, 35))
                    self.assertEqual((e.has_lora, e.lora_id), (seq == 3, 7 if seq == 3 else 0))
                if XXH3 is not None:
                    self.assertEqual(want, reference_hashes(
                        p, 4, salt=b"tenant-a" if seq == 2 else None,
                        lora=7 if seq == 3 else None))
                next_id += 3
                index.apply(events)
                index.check(self, c)
            for seq in (1, 2, 3):
                c.remove_sequence(seq)
            # Eviction: 16 blocks for one sequence evict the 9 cached ones.
            c.add_sequence(4, prompt(64, 500))
            events = c.drain_events()
            self.assertEqual([e.kind for e in events], [EventKind.REMOVED] * 9)
            self.assertEqual([e.id for e in events], list(range(next_id, next_id + 9)))
            index.apply(events)
            index.check(self, c)
            self.assertEqual(len(index), 0)
            c.commit(4, 64)
            events = c.drain_events()
            self.assertIsNone(events[0].tokens)  # not asked for
            index.apply(events)
            index.check(self, c)
            self.assertEqual(len(index), 16)
            c.remove_sequence(4)
            c.reset_reuse()
            events = c.drain_events()
            self.assertEqual([e.kind for e in events], [EventKind.CLEARED])
            index.apply(events)
            index.check(self, c)
            self.assertEqual(c.snapshot(), kvcache.Snapshot(events[0].id, []))
            self.assertEqual(c.drain_events(), [])

    def test_lost_then_resync(self):
        with events_cache(4) as c, kvcache.Config(tokens_per_block=4) as cfg:
            p = prompt(40)
            c.add_sequence(1, p)
            c.commit(1, 40)  # 10 STORED events, 6 dropped
            events = c.drain_events()
            self.assertEqual((events[0].kind, events[0].id, events[0].lost_count),
                             (EventKind.LOST, 1, 6))
            want = cfg.block_hashes(p)
            self.assertEqual([e.hash for e in events[1:]], want[6:])
            snap = c.snapshot()
            self.assertEqual(snap.event_id, 10)
            self.assertEqual([(e.hash, e.parent_hash) for e in snap.entries],
                             list(zip(want, [0] + want[:-1])))
            index = Index({e.hash: e for e in snap.entries})
            c.remove_sequence(1)
            c.add_sequence(2, prompt(32, 900))  # 8 blocks: evicts 2
            events = c.drain_events()
            self.assertEqual(events[0].id, snap.event_id + 1)
            index.apply(events)
            index.check(self, c)

    def test_off_bad_input_and_seed(self):
        with kvcache.Cache(num_layers=1, kv_heads=1, head_dim=8, max_tokens=64) as off:
            for call in (off.drain_events, off.snapshot):
                with self.assertRaises(KvCacheError) as e:
                    call()
                self.assertEqual(e.exception.status, Status.UNSUPPORTED)
        with kvcache.Config(tokens_per_block=4) as cfg:
            with self.assertRaises(KvCacheError) as e:
                cfg.block_hashes(prompt(8), extra_keys=[(0, 0, b"x")])
            self.assertEqual(e.exception.status, Status.INVALID_ARGUMENT)
            self.assertEqual(len(cfg.block_hashes(prompt(7))), 1)
            self.assertEqual(cfg.block_hashes([]), [])
            a = cfg.block_hashes(prompt(8))
            cfg.event_hash_seed = 42
            self.assertEqual(cfg.event_hash_seed, 42)
            b = cfg.block_hashes(prompt(8))
            self.assertTrue(a[0] != b[0] and a[1] != b[1])
            if XXH3 is not None:
                self.assertEqual(b, reference_hashes(prompt(8), 4, seed=42))
            k = cfg.block_hashes(prompt(8), extra_keys=[(4, 2, b"image")])
            self.assertEqual(k[0], b[0])
            self.assertNotEqual(k[1], b[1])


if __name__ == "__main__":
    unittest.main()
