"""The disk tier: its setting and errors, blocks evicted to the disk and
loaded back, a new cache on the directory finding them, the per-tier
statistics."""
import os
import tempfile
import unittest

import kvcache
from kvcache import KvCacheError, Status, Tier

SETTINGS = dict(num_layers=2, kv_heads=1, head_dim=8, dtype="f32", tokens_per_block=4,
                max_tokens=16, partial_reuse=False, device="cpu")


def tokens(start, n):
    return list(range(start, start + n))


def cache_prompt(cache, seq_id, t):
    cached = cache.add_sequence(seq_id, t)
    cache.commit(seq_id, len(t))
    cache.remove_sequence(seq_id)
    return cached


class DiskTierTest(unittest.TestCase):
    def setUp(self):
        self._dir = tempfile.TemporaryDirectory()
        self.dir = self._dir.name

    def tearDown(self):
        self._dir.cleanup()

    def test_setting_and_errors(self):
        with kvcache.Config(**SETTINGS) as c:
            self.assertEqual(c.disk_cache, ("", 0))
            c.disk_cache = (self.dir, 4096)
            self.assertEqual(c.disk_cache, (self.dir, 4096))
            with self.assertRaises(KvCacheError) as e:
                c.disk_cache = (self.dir, 0)
            self.assertEqual(e.exception.status, Status.INVALID_ARGUMENT)
            self.assertIn("disk cache bytes must be > 0", e.exception.message)
            self.assertEqual(c.disk_cache, (self.dir, 4096))  # unchanged
            c.disk_cache = (os.path.join(self.dir, "missing"), 1 << 20)
            with self.assertRaises(KvCacheError) as e:
                kvcache.Cache(c)
            self.assertIn("cannot be used", e.exception.message)
            c.disk_cache = None
            self.assertEqual(c.disk_cache, ("", 0))
            with kvcache.Cache(c) as cache:
                with self.assertRaises(KvCacheError) as e:
                    cache.tier_stats(Tier.DISK)
                self.assertEqual(e.exception.status, Status.NOT_FOUND)
                with self.assertRaises(KvCacheError) as e:
                    cache.tier_stats(Tier.HOST)
                self.assertEqual(e.exception.status, Status.INVALID_ARGUMENT)
                cache.flush_tiers()

    def test_round_trip_and_restart(self):
        a = tokens(100, 13)  # 3 full blocks + 1 token
        with kvcache.Cache(disk_cache=(self.dir, 1 << 20), **SETTINGS) as cache:
            self.assertEqual(cache_prompt(cache, 1, a), 0)
            self.assertEqual(cache_prompt(cache, 2, tokens(500, 16)), 0)  # a to the disk
            cache.flush_tiers()
            s = cache.tier_stats(Tier.DISK)
            self.assertEqual(s.tier, Tier.DISK)
            self.assertEqual((s.offered_blocks, s.stored_blocks, s.blocks), (7, 7, 7))
            self.assertEqual((s.dropped_blocks, s.errors, s.capacity_bytes), (0, 0, 1 << 20))
            self.assertEqual(cache_prompt(cache, 3, a), 12)
            s = cache.tier_stats(Tier.DISK)
            self.assertEqual((s.onboarded_blocks, s.hits, s.rejected), (3, 3, 0))
            cache.check()
        with kvcache.Cache(disk_cache=(self.dir, 1 << 20), **SETTINGS) as cache:
            self.assertGreaterEqual(cache.tier_stats(Tier.DISK).blocks, 3)
            self.assertEqual(cache_prompt(cache, 1, a), 12)


if __name__ == "__main__":
    unittest.main()
