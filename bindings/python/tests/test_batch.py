"""Batch tables into caller buffers: the values, the too-small answers that
change nothing, and output buffers of the wrong type, shape or
writability refused before the call."""
import array
import unittest

import numpy as np

from kvcache import KvCacheError, Status
from support import prompt, small_cache


class BatchTest(unittest.TestCase):
    def setUp(self):
        self.c = small_cache()
        self.c.add_sequence(1, prompt(40))
        self.c.add_sequence(2, prompt(5, 100))
        self.ids = np.array([1, 2], dtype=np.uint64)

    def tearDown(self):
        self.c.close()

    def test_padded_and_csr_tables_agree_with_block_ids(self):
        b1, b2 = self.c.block_ids(1), self.c.block_ids(2)
        table = self.c.block_table(self.ids)
        self.assertEqual(table.tolist(), [b1, b2 + [-1, -1]])
        out = np.full((3, 5), 99, dtype=np.int32)
        self.assertIs(self.c.block_table([1, 2], out, pad=-9), out)
        self.assertEqual(out[:2].tolist(), [b1 + [-9, -9], b2 + [-9] * 4])
        self.assertEqual(out[2].tolist(), [99] * 5)  # rows beyond the batch untouched
        flat = array.array("i", [0] * 6)
        self.c.block_table([2, 1], flat)
        self.assertEqual(flat.tolist(), b2 + [-1, -1] + b1)
        csr = self.c.block_table_csr(np.array([1, 2], dtype=np.int64))
        self.assertEqual(csr.indptr.tolist(), [0, 3, 4])
        self.assertEqual(csr.indices[:csr.num_indices].tolist(), b1 + b2)
        self.assertEqual(csr.last_page_len.tolist(), [8, 5])

    def test_too_small_tables_write_nothing(self):
        out = np.full((2, 2), 7, dtype=np.int32)
        with self.assertRaises(KvCacheError) as e:
            self.c.block_table(self.ids, out)
        self.assertEqual(e.exception.status, Status.BUFFER_TOO_SMALL)
        self.assertEqual(e.exception.op, "kvc_batch_block_table")
        self.assertIn("3", e.exception.message)
        self.assertEqual(out.tolist(), [[7, 7], [7, 7]])
        with self.assertRaises(KvCacheError) as e:
            self.c.block_table_csr(self.ids, indices=np.zeros(2, dtype=np.int32))
        self.assertEqual(e.exception.status, Status.BUFFER_TOO_SMALL)

    def test_slot_mapping_advances_only_when_written(self):
        small = np.zeros(10, dtype=np.int64)
        with self.assertRaises(KvCacheError) as e:
            self.c.slot_mapping(self.ids, small)
        self.assertEqual(e.exception.status, Status.BUFFER_TOO_SMALL)
        m = self.c.slot_mapping(self.ids, new_tokens=True)
        self.assertEqual(m.num_slots, 45)
        self.assertEqual(m.new_tokens.tolist(), [40, 5])
        b1 = self.c.block_ids(1)
        self.assertEqual(m.slots[:16].tolist(), list(range(b1[0] * 16, b1[0] * 16 + 16)))
        self.assertEqual(self.c.slot_mapping(self.ids).num_slots, 0)
        self.c.batch_extend(self.ids, np.array([7, 8], dtype=np.int32))
        out = np.zeros(4, dtype=np.int64)
        m = self.c.slot_mapping([1, 2], out)
        self.assertEqual(m.num_slots, 2)
        self.assertEqual(out[1], self.c.block_ids(2)[0] * 16 + 5)
        self.assertEqual(self.c.sequence_lengths(self.ids).tolist(), [41, 6])
        lengths = np.zeros(2, dtype=np.int32)
        self.c.sequence_lengths([2, 1], lengths)
        self.assertEqual(lengths.tolist(), [6, 41])

    def test_output_buffers_are_checked(self):
        readonly = np.zeros((2, 4), dtype=np.int32)
        readonly.flags.writeable = False
        cases = [
            (lambda: self.c.block_table(self.ids, np.zeros((2, 4), dtype=np.int64)), "int64"),
            (lambda: self.c.block_table(self.ids, np.zeros((2, 8), dtype=np.int32)[:, ::2]),
             "contiguous"),
            (lambda: self.c.block_table(self.ids, readonly), "read-only"),
            (lambda: self.c.block_table(self.ids, np.zeros((1, 4), dtype=np.int32)), "rows"),
            (lambda: self.c.sequence_lengths(self.ids, [0, 0]), "writable buffer"),
            (lambda: self.c.sequence_lengths(self.ids, np.zeros(1, dtype=np.int32)), "entries"),
            (lambda: self.c.slot_mapping(self.ids, np.zeros(64, dtype=np.int32)), "int64"),
            (lambda: self.c.batch_extend(self.ids, [1]), "tokens has 1"),
            (lambda: self.c.batch_extend(np.array([1.0, 2.0]), [1, 2]), "float64"),
            (lambda: self.c.block_table_csr(self.ids, indptr=np.zeros(2, dtype=np.int32)),
             "indptr has 2"),
        ]
        before = self.c.stats()
        for call, needle in cases:
            with self.assertRaises(KvCacheError) as e:
                call()
            self.assertEqual(e.exception.status, Status.INVALID_ARGUMENT, needle)
            self.assertIn(needle, e.exception.message)
        self.assertEqual(self.c.stats(), before)
        self.assertEqual(self.c.slot_mapping(self.ids).num_slots, 45)  # cursors untouched

    def test_decode_step_matches_the_single_calls(self):
        self.c.slot_mapping(self.ids)  # the prompts' slots
        step = self.c.decode_step([1, 2], max_blocks=4)
        for i in range(20):
            step.run([i, i + 1])
            step.commit_full_blocks()
            self.assertEqual(step.lengths.tolist(), [41 + i, 6 + i])
            self.assertEqual(step.table[0][:len(self.c.block_ids(1))].tolist(),
                             self.c.block_ids(1))
            b2 = self.c.block_ids(2)
            self.assertEqual(step.table[1].tolist(), b2 + [-1] * (4 - len(b2)))
            self.assertEqual(int(step.slots[1]), b2[(5 + i) // 16] * 16 + (5 + i) % 16)
        self.assertEqual(self.c.describe_sequence(2).committed_tokens, 16)  # filled at 16
        self.assertEqual(self.c.describe_sequence(1).committed_tokens, 48)
        with self.assertRaises(KvCacheError) as e:  # a table too narrow for sequence 1
            self.c.decode_step([1], max_blocks=2).run([0])
        self.assertEqual(e.exception.status, Status.BUFFER_TOO_SMALL)

    def test_unknown_and_repeated_ids(self):
        with self.assertRaises(KvCacheError) as e:
            self.c.sequence_lengths([1, 3])
        self.assertEqual(e.exception.status, Status.NOT_FOUND)
        self.assertIn("3", e.exception.message)
        with self.assertRaises(KvCacheError) as e:
            self.c.batch_extend([1, 1], [5, 6])
        self.assertEqual(e.exception.status, Status.INVALID_ARGUMENT)
        self.assertEqual(self.c.sequence_lengths([1]).tolist(), [40])


if __name__ == "__main__":
    unittest.main()
