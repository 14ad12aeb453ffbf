"""The remote tier: its settings and errors, and a real redis-server
(started here on a loopback port, killed at the end) that one cache fills
and a second cache reuses from. Skips, saying why, without hiredis in the
library or redis-server on the machine."""
import os
import shutil
import socket
import subprocess
import tempfile
import time
import unittest

import kvcache
from kvcache import Feature, KvCacheError, Status, Tier

SETTINGS = dict(num_layers=2, kv_heads=1, head_dim=8, dtype="f32", tokens_per_block=4,
                max_tokens=16, partial_reuse=False, device="cpu")


def tokens(start, n):
    return list(range(start, start + n))


def cache_prompt(cache, seq_id, t):
    cached = cache.add_sequence(seq_id, t)
    cache.commit(seq_id, len(t))
    cache.remove_sequence(seq_id)
    return cached


class RedisServer:
    """redis-server on a free loopback port without persistence."""

    def __init__(self):
        if not kvcache.features() & Feature.REDIS:
            raise unittest.SkipTest("built without hiredis: install libhiredis-dev and rebuild")
        binary = os.environ.get("KVC_REDIS_SERVER") or shutil.which("redis-server")
        if not binary:
            raise unittest.SkipTest("no redis-server (install redis-server)")
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.dir = tempfile.TemporaryDirectory()
        self.process = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", self.dir.name],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(500):  # bounded: 500 tries of PING, 10 ms apart at most
            if self.ping():
                return
            time.sleep(0.01)
        self.stop()
        raise AssertionError("redis-server did not answer PING within 5 s")

    def ping(self):
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                return s.recv(7) == b"+PONG\r\n"
        except OSError:
            return False

    @property
    def url(self):
        return f"redis://127.0.0.1:{self.port}/0"

    def stop(self):
        self.process.kill()
        self.process.wait()
        self.dir.cleanup()


class RemoteTierTest(unittest.TestCase):
    def test_settings_and_errors(self):
        with kvcache.Config(**SETTINGS) as c:
            self.assertEqual(c.remote_cache, ("", "kvc", 0))
            self.assertEqual(c.remote_cache_timeouts_ms, (1000, 1000))
            self.assertFalse(c.remote_cache_optional)
            c.remote_cache = ("redis://:pw@10.0.0.7:6380/1", "team-a", 4096)
            self.assertEqual(c.remote_cache, ("redis://:pw@10.0.0.7:6380/1", "team-a", 4096))
            c.remote_cache = ("redis://10.0.0.7", 8192)  # the default namespace
            self.assertEqual(c.remote_cache, ("redis://10.0.0.7", "kvc", 8192))
            c.remote_cache_timeouts_ms = (50, 20)
            self.assertEqual(c.remote_cache_timeouts_ms, (50, 20))
            c.remote_cache_optional = True
            self.assertTrue(c.remote_cache_optional)
            for value, message in (
                    (("redis://h:70000/0", 1), "the port 70000 is not in 1..65535"),
                    (("redis://h/0", "no spaces", 1), "may hold only letters"),
                    ((None, 5), "remote cache bytes must be 0 without a URL, got 5")):
                with self.assertRaises(KvCacheError) as e:
                    c.remote_cache = value
                self.assertEqual(e.exception.status, Status.INVALID_ARGUMENT)
                self.assertIn(message, str(e.exception))
            with self.assertRaises(KvCacheError) as e:
                c.remote_cache_timeouts_ms = (0, 10)
            self.assertIn("connect_ms must be in 1..600000 ms, got 0", str(e.exception))
            self.assertEqual(c.remote_cache[2], 8192)  # unchanged by the failures
            c.remote_cache = None
            self.assertEqual(c.remote_cache[0], "")

    def test_a_second_cache_reuses_what_the_first_offloaded(self):
        server = RedisServer()
        try:
            settings = dict(SETTINGS, remote_cache=(server.url, "py-test", 1 << 20),
                            remote_cache_timeouts_ms=(2000, 2000))
            a = tokens(100, 13)  # 3 full blocks + 1 token
            with kvcache.Config(**settings) as c, kvcache.Cache(c) as first:
                self.assertEqual(cache_prompt(first, 1, a), 0)
                self.assertEqual(cache_prompt(first, 2, tokens(500, 16)), 0)  # a to Redis
                first.flush_tiers()
                s = first.tier_stats(Tier.REMOTE)
                self.assertEqual(s.tier, Tier.REMOTE)
                self.assertEqual((s.offered_blocks, s.stored_blocks), (7, 7))
                self.assertEqual((s.dropped_blocks, s.errors), (0, 0))
                self.assertEqual(s.capacity_bytes, 1 << 20)
            with kvcache.Config(**settings) as c, kvcache.Cache(c) as second:
                self.assertEqual(cache_prompt(second, 1, a), 12)
                s = second.tier_stats(Tier.REMOTE)
                self.assertEqual((s.onboarded_blocks, s.hits, s.rejected), (3, 3, 0))
        finally:
            server.stop()
        # Nothing listening: refused at create unless optional.
        with kvcache.Config(**settings) as c:
            with self.assertRaises(KvCacheError) as e:
                kvcache.Cache(c)
            self.assertEqual(e.exception.status, Status.DEVICE)
            self.assertIn("cannot connect within 2000 ms", str(e.exception))
            c.remote_cache_optional = True
            with kvcache.Cache(c) as cache:
                self.assertGreaterEqual(cache.tier_stats(Tier.REMOTE).errors, 1)


if __name__ == "__main__":
    unittest.main()
