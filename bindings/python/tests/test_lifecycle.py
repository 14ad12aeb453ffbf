"""Lifetime and errors: close() twice, every call after close refused with
INVALID_STATE, close() racing calls on other threads, errors carrying the
message of their own failing call (the library's message is per thread),
the version functions."""
import threading
import unittest

import numpy as np

import kvcache
from kvcache import KvCacheError, Status
from support import prompt, small_cache


class LifecycleTest(unittest.TestCase):
    def test_close_twice_and_use_after_close(self):
        c = small_cache()
        c.add_sequence(1, prompt(10))
        self.assertFalse(c.closed)
        c.close()
        c.close()
        self.assertTrue(c.closed)
        self.assertEqual(repr(c), "Cache(<closed>)")
        calls = {
            "kvc_cache_describe": c.describe,
            "kvc_cache_get_stats": c.stats,
            "kvc_sequence_add": lambda: c.add_sequence(2, [1, 2]),
            "kvc_sequence_commit": lambda: c.commit(1, 1),
            "kvc_batch_extend": lambda: c.batch_extend([1], [1]),
            "kvc_batch_block_table": lambda: c.block_table([1], np.zeros((1, 4), np.int32)),
            "kvc_store_kv": lambda: c.store_kv(0, np.zeros((1, 2, 64), np.uint16),
                                               np.zeros((1, 2, 64), np.uint16),
                                               np.zeros(1, np.int64), src_dtype="bf16"),
            "kvc_cache_get_async_error": c.async_error,
        }
        for op, call in calls.items():
            with self.assertRaises(KvCacheError) as e:
                call()
            self.assertEqual(e.exception.status, Status.INVALID_STATE, op)
            self.assertEqual(e.exception.op, op)
            self.assertIn("closed", e.exception.message)

    def test_context_manager_closes(self):
        with small_cache() as c:
            c.add_sequence(1, prompt(3))
        self.assertTrue(c.closed)

    def test_close_waits_for_calls_of_other_threads(self):
        c = small_cache(max_tokens=4096)
        c.add_sequence(1, prompt(2000))
        outcomes = []
        started = threading.Event()

        def worker():
            started.set()
            while True:
                try:
                    c.block_ids(1)
                    c.stats()
                except KvCacheError as e:
                    outcomes.append(e.status)
                    return

        threads = [threading.Thread(target=worker) for _ in range(3)]
        for t in threads:
            t.start()
        started.wait()
        c.close()
        for t in threads:
            t.join()
        self.assertEqual(outcomes, [Status.INVALID_STATE] * 3)

    def test_each_thread_gets_its_own_message(self):
        with small_cache() as c:
            c.add_sequence(1, prompt(4))
            errors = {}
            barrier = threading.Barrier(2)

            def fail(name, call):
                barrier.wait()
                for _ in range(200):
                    try:
                        call()
                    except KvCacheError as e:
                        errors.setdefault(name, set()).add(e.message)

            a = threading.Thread(target=fail, args=("a", lambda: c.describe_sequence(77)))
            b = threading.Thread(target=fail, args=("b", lambda: c.add_sequence(1, [5])))
            a.start()
            b.start()
            a.join()
            b.join()
            self.assertEqual(len(errors["a"]), 1)
            self.assertEqual(len(errors["b"]), 1)
            self.assertIn("77", next(iter(errors["a"])))
            self.assertIn("already exists", next(iter(errors["b"])))

    def test_error_value(self):
        e = KvCacheError(-2, "sequence 3 not found", "kvc_sequence_remove")
        self.assertEqual(e.status, Status.NOT_FOUND)
        self.assertEqual(str(e), "kvc_sequence_remove: KVC_ERR_NOT_FOUND: sequence 3 not found")
        self.assertEqual(kvcache.status_string(Status.OUT_OF_BLOCKS), "KVC_ERR_OUT_OF_BLOCKS")
        self.assertEqual(kvcache.status_string(-55), "KVC_ERR_UNKNOWN")
        self.assertEqual(KvCacheError(-55, "x", "y").status, -55)

    def test_version(self):
        v = kvcache.version()
        self.assertEqual(kvcache.version_string(), "%d.%d.%d" % (v // 10000, v // 100 % 100,
                                                                 v % 100))
        self.assertEqual(kvcache.abi_version(), 0)
        self.assertEqual(int(kvcache.features()) & ~7, 0)  # CUDA_COMPILED, CUDA_DEVICE, REDIS
        self.assertTrue(kvcache.library_path)

    def test_cuda_without_a_device_says_why(self):
        if kvcache.features() & kvcache.Feature.CUDA_DEVICE:
            self.skipTest("a CUDA device is present")
        with self.assertRaises(KvCacheError) as e:
            kvcache.Cache(num_layers=1, kv_heads=1, head_dim=64, device="cuda:0", max_tokens=64)
        self.assertEqual(e.exception.status, Status.DEVICE)
        self.assertEqual(e.exception.op, "kvc_cache_create")
        self.assertTrue(e.exception.message)


if __name__ == "__main__":
    unittest.main()
