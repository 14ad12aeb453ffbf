"""Paged KV resources (kv_resource.h): a mixed config (bf16 dim 128 and fp8
dim 64 layers) described, managed and local with their reasons and pools;
the global setters refused after a resource; bad input."""
import unittest

import kvcache
from kvcache import DType, Layout, ResourceReason, Status


class KvResourceTest(unittest.TestCase):
    def test_mixed_describe(self):
        with kvcache.Config() as c:
            self.assertEqual(c.add_kv_resource([0, 2], 8, 128), 0)
            self.assertEqual(c.add_kv_resource([1], 4, 64, dtype="fp8_e4m3", window=32), 1)
            with self.assertRaises(kvcache.KvCacheError) as e:
                c.num_layers = 4
            self.assertEqual(e.exception.status, Status.INVALID_STATE)
            with self.assertRaises(kvcache.KvCacheError) as e:
                c.add_kv_resource([2], 8, 128)
            self.assertEqual(e.exception.status, Status.INVALID_ARGUMENT)
            self.assertIn("already has", str(e.exception))
            with self.assertRaises(kvcache.KvCacheError) as e:
                c.add_kv_resource([], 8, 128)
            self.assertIn("num_layers must be > 0", str(e.exception))
            c.max_tokens = 256
            with kvcache.Cache(c) as cache:
                d = cache.describe()
                self.assertEqual((d.num_kv_resources, d.num_layers, d.num_groups), (2, 3, 2))
                a = cache.describe_kv_resource(0)
                self.assertTrue(a.managed)
                self.assertEqual(a.reason, ResourceReason.MANAGED)
                self.assertEqual((a.dtype, a.kv_factor, a.layout), (DType.BF16, 2, Layout.NHD))
                self.assertEqual(a.block_bytes, 2 * 2 * 16 * 8 * 128 * 2)
                b = cache.describe_kv_resource(1)
                self.assertFalse(b.managed)
                self.assertEqual(b.reason, ResourceReason.KV_HEAD_DIM_DIFFERS)
                self.assertIn("head_dim", b.reason_text)
                self.assertEqual((b.managed_with, b.num_layers, b.kv_heads, b.head_dim),
                                 (1, 1, 4, 64))
                self.assertEqual((b.dtype, b.window), (DType.FP8_E4M3, 32))
                self.assertNotEqual(a.pool, b.pool)
                self.assertNotEqual(a.group, b.group)
                self.assertEqual(b.block_bytes, 2 * 16 * 4 * 64)
                with self.assertRaises(kvcache.KvCacheError) as e:
                    cache.describe_kv_resource(2)
                self.assertEqual(e.exception.status, Status.INVALID_ARGUMENT)

    def test_global_setter_first(self):
        with kvcache.Config(head_dim=64) as c:
            with self.assertRaises(kvcache.KvCacheError) as e:
                c.add_kv_resource([0], 8, 64)
            self.assertEqual(e.exception.status, Status.INVALID_STATE)


if __name__ == "__main__":
    unittest.main()
