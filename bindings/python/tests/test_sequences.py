"""Sequences through the binding on the CPU backend: prefix reuse counts,
scopes (salt, LoRA, extra keys) that isolate, refusals that change nothing
and say why."""
import unittest

import numpy as np

import kvcache
from kvcache import ExtraKey, KvCacheError, RetentionRange, SequenceOptions, Status
from support import prompt, small_cache


class ReuseTest(unittest.TestCase):
    def test_prefix_reuse_counts(self):
        with small_cache() as c:
            p = prompt(40)
            self.assertEqual(c.add_sequence(1, p), 0)
            self.assertEqual(c.probe(p), 0)  # nothing committed yet
            c.commit(1, 40)
            # Two full blocks (32 tokens) are published; the probe has no effect.
            self.assertEqual(c.probe(p), 32)
            self.assertEqual(c.add_sequence(2, np.array(p, dtype=np.int32)), 32)
            # A prompt sharing one block; the last prompt token is never cached.
            self.assertEqual(c.add_sequence(3, p[:16] + prompt(5, 50)), 16)
            self.assertEqual(c.add_sequence(4, p[:32]), 31)
            s = c.stats()
            self.assertEqual(s.reused_blocks, 2 + 1 + 2)
            self.assertEqual(s.num_sequences, 4)
            d = c.describe_sequence(2)
            self.assertEqual((d.num_tokens, d.prompt_tokens, d.cached_tokens), (40, 40, 32))
            self.assertEqual(c.block_ids(2)[:2], c.block_ids(1)[:2])
            self.assertNotEqual(c.block_ids(2)[2], c.block_ids(1)[2])
            c.check()

    def test_scopes_isolate(self):
        with small_cache() as c:
            p = prompt(33)
            c.add_sequence(1, p, salt=b"tenant-a")
            c.commit(1, 33)
            self.assertEqual(c.add_sequence(2, p), 0)                   # no salt
            self.assertEqual(c.add_sequence(3, p, salt=b""), 0)         # empty salt
            self.assertEqual(c.add_sequence(4, p, salt="tenant-b"), 0)  # another tenant
            self.assertEqual(c.add_sequence(5, p, salt=b"tenant-a"), 32)
            opts = SequenceOptions(salt=b"tenant-a", lora_id=7)
            self.assertEqual(c.probe(p, opts), 0)
            self.assertEqual(c.probe(p, salt=b"tenant-a"), 32)
            image = SequenceOptions(salt=b"tenant-a", extra_keys=[ExtraKey(20, 4, b"img-1")])
            self.assertEqual(c.probe(p, image), 16)  # the block holding tokens 20..23 differs

    def test_retention_options_reach_the_library(self):
        with small_cache(manual_clock=True) as c:
            opts = SequenceOptions(retention_ranges=[RetentionRange(0, 16, 90, 1000),
                                                     (16, kvcache.RETENTION_OPEN_END, 10)],
                                   decode_priority=5, decode_duration_ms=20)
            c.add_sequence(1, prompt(40), opts)
            d = c.describe_sequence(1)
            self.assertEqual((d.prompt_priority, d.decode_priority), (35, 5))
            with self.assertRaises(KvCacheError) as e:
                c.add_sequence(2, prompt(40), retention_ranges=[(10, 5, 50)])
            self.assertEqual(e.exception.status, Status.INVALID_ARGUMENT)
            self.assertIn("end", e.exception.message)
            c.advance_clock(5000)
            with self.assertRaises(KvCacheError) as e:
                c.add_sequence(3, prompt(4), prompt_priority=101)
            self.assertIn("101", e.exception.message)

    def test_make_room_evicts_ahead_into_the_host_tier(self):
        # 4 primary blocks, a host tier of 4 (16 KiB block sets).
        with small_cache(max_tokens=64, host_cache_bytes=4 << 14, partial_reuse=False) as c:
            p = prompt(40)
            c.add_sequence(1, p)
            c.commit(1, 40)
            c.remove_sequence(1)  # 2 blocks cached, 2 free
            self.assertEqual(c.make_room(0), 2)
            self.assertEqual(c.make_room(4), 4)
            s = c.stats()
            self.assertEqual((s.free_blocks, s.cached_blocks, s.offloaded_blocks), (4, 0, 2))
            self.assertEqual(c.make_room(100), 4)  # nothing cached is left: no error
            self.assertEqual(c.add_sequence(2, p), 32)  # onboarded from the host tier
            self.assertEqual(c.stats().onboarded_blocks, 2)

    def test_out_of_blocks_leaves_everything_unchanged(self):
        with small_cache(max_tokens=64) as c:  # 4 blocks
            c.add_sequence(1, prompt(40))      # 3 blocks
            before = c.stats()
            ids_before = c.block_ids(1)
            with self.assertRaises(KvCacheError) as e:
                c.add_sequence(2, prompt(40, 100))
            self.assertEqual(e.exception.status, Status.OUT_OF_BLOCKS)
            self.assertEqual(e.exception.op, "kvc_sequence_add")
            self.assertIn("block", e.exception.message)
            self.assertEqual(c.stats(), before)
            self.assertEqual(c.block_ids(1), ids_before)
            with self.assertRaises(KvCacheError) as e:
                c.describe_sequence(2)
            self.assertEqual(e.exception.status, Status.NOT_FOUND)
            # A decode step that does not fit is refused whole.
            c.add_sequence(3, prompt(16, 200))   # the 4th block
            c.extend_sequence(1, prompt(8, 300))  # block 3 of seq 1 now full (48 tokens)
            before = c.stats()
            with self.assertRaises(KvCacheError) as e:
                c.batch_extend([1, 3], [1, 2])
            self.assertEqual(e.exception.status, Status.OUT_OF_BLOCKS)
            self.assertEqual(c.stats(), before)
            self.assertEqual(c.sequence_lengths([1, 3]).tolist(), [48, 16])
            c.check()

    def test_fork_rewind_pin_remove(self):
        with small_cache() as c:
            c.add_sequence(1, prompt(20))
            c.fork(1, 2)
            self.assertEqual(c.block_ids(2), c.block_ids(1))
            c.extend_sequence(2, [1, 2, 3])
            c.rewind(2, 2)
            self.assertEqual(c.describe_sequence(2).num_tokens, 21)
            self.assertEqual(c.blocks_needed(2, 11), 0)
            self.assertEqual(c.blocks_needed(2, 12), 1)
            c.commit(1, 20)
            c.pin(1)
            with self.assertRaises(KvCacheError) as e:
                c.pin(1)
            self.assertEqual(e.exception.status, Status.ALREADY_EXISTS)
            c.remove_sequence(1)
            self.assertEqual(c.stats().num_pinned, 1)
            c.unpin(1)
            with self.assertRaises(KvCacheError) as e:
                c.unpin(1)
            self.assertEqual(e.exception.status, Status.NOT_FOUND)
            with self.assertRaises(KvCacheError) as e:
                c.rewind(2, 100)
            self.assertIn("100", e.exception.message)
            with self.assertRaises(KvCacheError) as e:
                c.reset_reuse()  # sequence 2 holds blocks
            self.assertEqual(e.exception.status, Status.INVALID_STATE)
            c.remove_sequence(2)
            c.reset_reuse()
            self.assertEqual(c.stats().cached_blocks, 0)

    def test_block_ids_into_a_buffer(self):
        with small_cache() as c:
            c.add_sequence(1, prompt(40))
            out = np.full(8, -7, dtype=np.int32)
            self.assertEqual(c.block_ids(1, out=out), 3)
            self.assertEqual(out[:3].tolist(), c.block_ids(1))
            with self.assertRaises(KvCacheError) as e:
                c.block_ids(1, out=np.zeros(2, dtype=np.int32))
            self.assertEqual(e.exception.status, Status.BUFFER_TOO_SMALL)

    def test_token_buffers_are_checked(self):
        with small_cache() as c:
            for bad, needle in ((np.arange(4, dtype=np.int64), "int64"),
                                (np.arange(8, dtype=np.int32)[::2], "contiguous"),
                                ("abc", "str"), ([1, 2**40], "int")):
                with self.assertRaises(KvCacheError) as e:
                    c.add_sequence(1, bad)
                self.assertEqual(e.exception.status, Status.INVALID_ARGUMENT)
                self.assertEqual(e.exception.op, "kvc_sequence_add")
                self.assertIn(needle, e.exception.message)
            self.assertEqual(c.stats().num_sequences, 0)
            with self.assertRaises(KvCacheError) as e:
                c.add_sequence(1, [])
            self.assertIn("empty", e.exception.message)


if __name__ == "__main__":
    unittest.main()
