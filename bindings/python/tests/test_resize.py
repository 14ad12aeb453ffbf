"""Resizing the primary pools in place: the plan follows AutoDeploy's
formula and changes nothing; a grow keeps the pool's address and the
blocks in use; a shrink over a block in use is refused with nothing
changed."""
import unittest

import kvcache
from kvcache import Status

BLOCK = 256  # 1 layer, 1 kv head of dim 8, f32, 4 tokens per block


def resizable(blocks, max_blocks):
    return kvcache.Cache(num_layers=1, kv_heads=1, head_dim=8, dtype="f32", tokens_per_block=4,
                         primary_bytes=blocks * BLOCK, max_primary_bytes=max_blocks * BLOCK)


class ResizeTest(unittest.TestCase):
    def test_the_plan_follows_the_formula(self):
        with resizable(16, 1000) as cache:
            p = cache.plan_resize(free_bytes=200000, non_paged_bytes=40000, forward_bytes=60000,
                                  free_gpu_memory_fraction=0.5)
            self.assertEqual(p, kvcache.ResizePlan(
                num_pools=1, free_bytes=200000, mem_for_paged=50000, primary_bytes=50000,
                max_primary_bytes=1000 * BLOCK, blocks_per_group=50000 // BLOCK,
                token_capacity=50000 // BLOCK * 4, num_blocks=50000 // BLOCK,
                total_bytes=50000 // BLOCK * BLOCK, pool_blocks=[50000 // BLOCK]))
            self.assertEqual(cache.describe().num_blocks, 16)
            with self.assertRaises(kvcache.KvCacheError) as e:
                cache.plan_resize(free_bytes=200000, free_gpu_memory_fraction=1.5)
            self.assertEqual(e.exception.status, Status.INVALID_ARGUMENT)
            self.assertIn("free_gpu_memory_fraction must be in (0, 1]", str(e.exception))

    def test_grow_and_shrink_in_place(self):
        with kvcache.Config(num_layers=1, kv_heads=1, head_dim=8, dtype="f32",
                            tokens_per_block=4, max_primary_bytes=64 * BLOCK) as c:
            self.assertEqual(c.max_primary_bytes, 64 * BLOCK)
        with resizable(8, 64) as cache:
            cache.add_sequence(1, list(range(16)))
            ids = cache.block_ids(1, 0)
            base = cache.describe_pool(0).base
            cache.resize(64 * BLOCK)
            self.assertEqual(cache.describe().num_blocks, 64)
            self.assertEqual(cache.describe().primary_bytes, 64 * BLOCK)
            self.assertEqual(cache.describe_pool(0).base, base)
            self.assertEqual(cache.layer_view(0).num_blocks, 64)
            self.assertEqual(cache.block_ids(1, 0), ids)
            with self.assertRaises(kvcache.KvCacheError) as e:
                cache.resize(2 * BLOCK)
            self.assertEqual(e.exception.status, Status.OUT_OF_BLOCKS)
            self.assertIn("is in use", str(e.exception))
            self.assertEqual(cache.stats().num_blocks, 64)
            cache.resize(4 * BLOCK)
            self.assertEqual(cache.stats().num_blocks, 4)


if __name__ == "__main__":
    unittest.main()
