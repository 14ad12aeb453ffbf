"""Tensor parallelism (Config.set_ranks) on the CPU backend: one cache over
2 ranks, each rank's bytes written with its share of the heads and read
back bit for bit through its own layer view after a reuse; the sharding in
the descriptions; bad ranks refused with the numbers named."""
import ctypes
import unittest

import numpy as np

import kvcache
from kvcache import KvCacheError, Status


def config(heads, ranks):
    c = kvcache.Config(num_layers=1, kv_heads=heads, head_dim=4, dtype="f32",
                       tokens_per_block=4, max_tokens=64)
    c.set_ranks(["cpu:%d" % r for r in range(ranks)])
    return c


def values(tokens, first_head, heads, kv):
    out = np.empty((len(tokens), heads, 4), dtype=np.float32)
    for i, t in enumerate(tokens):
        for h in range(heads):
            out[i, h] = [t * 100 + (first_head + h) * 10 + d + kv * 0.5 for d in range(4)]
    return out


class TensorParallelTest(unittest.TestCase):
    def test_two_ranks_keep_their_bytes_through_reuse(self):
        cfg = config(4, 2)
        self.assertEqual(cfg.ranks, [0, 1])
        c = kvcache.Cache(cfg)
        try:
            d = c.describe()
            self.assertEqual((d.num_ranks, d.max_head_replication), (2, 1))
            g = c.describe_group(0)
            self.assertEqual((g.kv_heads, g.kv_heads_per_rank, g.head_replication), (4, 2, 1))
            tokens = list(range(1, 10))
            c.add_sequence(1, tokens)
            slots = np.asarray(c.slot_mapping([1]).slots, dtype=np.int64)
            for rank in range(2):
                v = c.layer_view_rank(rank, 0)
                self.assertEqual((v.rank, v.kv_heads, v.first_kv_head, v.total_kv_heads),
                                 (rank, 2, 2 * rank, 4))
                c.store_kv(0, values(tokens, v.first_kv_head, 2, 0),
                           values(tokens, v.first_kv_head, 2, 1), slots, rank=rank)
            c.commit(1, 9)
            c.remove_sequence(1)
            self.assertEqual(c.add_sequence(2, tokens), 8)
            blocks = c.block_ids(2)
            for rank in range(2):
                v = c.layer_view_rank(rank, 0)
                want = values(tokens[:8], v.first_kv_head, 2, 0)
                for pos in range(8):
                    for h in range(2):
                        at = v.base + v.offset(blocks[pos // 4], 0, pos % 4, h)
                        got = np.frombuffer(ctypes.string_at(at, 16), dtype=np.float32)
                        np.testing.assert_array_equal(got, want[pos, h])
            with self.assertRaises(KvCacheError) as e:
                c.layer_view_rank(2, 0)
            self.assertEqual(e.exception.status, Status.INVALID_ARGUMENT)
        finally:
            c.close()

    def test_bad_ranks_are_refused(self):
        cfg = config(3, 1)
        with self.assertRaises(KvCacheError) as e:
            cfg.set_ranks("cpu", [2, 2])
        self.assertIn("both 2", str(e.exception))
        cfg.set_ranks("cpu", [0, 1])
        with self.assertRaises(KvCacheError) as e:
            kvcache.Cache(cfg)
        self.assertIn("3 kv heads, which 2 ranks", str(e.exception))


if __name__ == "__main__":
    unittest.main()
