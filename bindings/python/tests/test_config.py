"""Config: every setting round-trips, refusals name the value and change
nothing, close() is idempotent and a closed Config refuses every call."""
import unittest

import kvcache
from kvcache import DType, KvCacheError, Layout, Status


class ConfigTest(unittest.TestCase):
    def test_defaults(self):
        with kvcache.Config() as c:
            self.assertEqual(c.dtype, DType.BF16)
            self.assertEqual(c.layout, Layout.NHD)
            self.assertEqual(c.tokens_per_block, 16)
            self.assertEqual(c.kv_factor, 2)
            self.assertEqual(c.device, "cpu")
            self.assertEqual(c.free_gpu_memory_fraction, 0.9)
            self.assertEqual(c.max_tokens, 0)
            self.assertEqual(c.primary_bytes, 0)
            self.assertEqual(c.host_cache_bytes, 0)
            self.assertEqual(c.secondary_offload_min_priority, 35)
            self.assertTrue(c.block_reuse and c.partial_reuse and c.copy_on_partial_reuse)
            self.assertEqual(c.event_buffer_size, 0)
            self.assertFalse(c.manual_clock)

    def test_every_setting_round_trips(self):
        with kvcache.Config(num_layers=4, kv_heads=[2, 2, 4, 4], head_dim=128, dtype="f16",
                            kv_factor=1, layout="hnd", tokens_per_block=32,
                            attention_windows=[0, 256], device="cuda:1", primary_bytes=1 << 20,
                            max_tokens=4096, free_gpu_memory_fraction=0.25,
                            host_cache_bytes=1 << 22, secondary_offload_min_priority=50,
                            block_reuse=False, partial_reuse=False, copy_on_partial_reuse=False,
                            event_buffer_size=0, manual_clock=True) as c:
            self.assertEqual(c.num_layers, 4)
            self.assertEqual([c.kv_heads_of(i) for i in range(4)], [2, 2, 4, 4])
            self.assertEqual(c.head_dim, 128)
            self.assertEqual(c.dtype, DType.F16)
            self.assertEqual(c.kv_factor, 1)
            self.assertEqual(c.layout, Layout.HND)
            self.assertEqual(c.tokens_per_block, 32)
            self.assertEqual(c.attention_windows, [0, 256, 0, 256])
            self.assertEqual(c.device, "cuda:1")
            self.assertEqual(c.primary_bytes, 1 << 20)
            self.assertEqual(c.max_tokens, 4096)
            self.assertEqual(c.free_gpu_memory_fraction, 0.25)
            self.assertEqual(c.host_cache_bytes, 1 << 22)
            self.assertEqual(c.secondary_offload_min_priority, 50)
            self.assertFalse(c.block_reuse or c.partial_reuse or c.copy_on_partial_reuse)
            self.assertEqual(c.event_buffer_size, 0)
            self.assertTrue(c.manual_clock)
            with self.assertRaises(kvcache.KvCacheError) as e:
                c.event_buffer_size = (1 << 20) + 1
            self.assertEqual(e.exception.status, kvcache.Status.INVALID_ARGUMENT)
            c.event_buffer_size = 64
            c.event_hash_seed = 0xfeedface12345678
            self.assertEqual((c.event_buffer_size, c.event_hash_seed), (64, 0xfeedface12345678))
            clone = c.clone()
            c.head_dim = 64
            self.assertEqual(clone.head_dim, 128)
            clone.close()
            c.kv_heads = 8
            self.assertEqual(c.kv_heads, 8)

    def test_refusals_name_the_value_and_change_nothing(self):
        with kvcache.Config(tokens_per_block=32) as c:
            with self.assertRaises(KvCacheError) as e:
                c.tokens_per_block = 12
            self.assertEqual(e.exception.status, Status.INVALID_ARGUMENT)
            self.assertEqual(e.exception.op, "kvc_config_set_tokens_per_block")
            self.assertIn("12", e.exception.message)
            self.assertEqual(c.tokens_per_block, 32)
            with self.assertRaises(KvCacheError) as e:
                c.free_gpu_memory_fraction = 1.5
            self.assertIn("1.5", e.exception.message)
            self.assertEqual(c.free_gpu_memory_fraction, 0.9)
            with self.assertRaises(ValueError):
                c.dtype = "int4"
            with self.assertRaises(KvCacheError) as e:
                c.validate()
            self.assertEqual(e.exception.op, "kvc_config_validate")
            self.assertIn("num_layers", e.exception.message)
        with self.assertRaises(TypeError):
            kvcache.Config(no_such_setting=1)

    def test_close_twice_and_use_after_close(self):
        c = kvcache.Config(num_layers=2)
        c.close()
        c.close()
        with self.assertRaises(KvCacheError) as e:
            c.num_layers
        self.assertEqual(e.exception.status, Status.INVALID_STATE)
        self.assertEqual(e.exception.op, "kvc_config_get_num_layers")
        with self.assertRaises(KvCacheError):
            kvcache.Cache(c)


if __name__ == "__main__":
    unittest.main()
