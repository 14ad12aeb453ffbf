"""Beam search on StatefulCache (CPU backend): 50 steps of width 4 with
random beam_idx, decode through the beam table bit for bit equal to
decode after an explicit gather (compact() every step) and close to a
NumPy attention over the gathered histories; the layers after the
gather equal NumPy's gathered concatenation bit for bit; refused
reorders (out of range, wrong count) carry the library's message and
change nothing."""
import ctypes
import unittest

import numpy as np

import kvcache
from kvcache import KvCacheError, Status
from test_stateful import D, History, assert_layers_equal, random_kv, snapshot, stateful

WIDTH, STEPS, Q_HEADS = 4, 50, 4


def reference_decode(ref, layer, q, scale):
    """out[b, h] = softmax(scale * q[b, h] . K) V over row b's history,
    in float64."""
    B, H = q.shape[0], q.shape[1]
    out = np.empty(q.shape, np.float64)
    for b in range(B):
        k, v = ref.k[layer][b].astype(np.float64), ref.v[layer][b].astype(np.float64)
        group = H // k.shape[0]
        for h in range(H):
            s = scale * (k[h // group] @ q[b, h].astype(np.float64))
            p = np.exp(s - s.max())
            out[b, h] = (p / p.sum()) @ v[h // group]
    return out


def beam_table(c, layer=0):
    """The beam table of a CPU cache, copied ([batch, stride] int32), or
    None without one."""
    v = c.view(layer)
    if v.beam_table is None:
        return None
    n = v.batch * v.beam_table_stride
    return np.ctypeslib.as_array((ctypes.c_int32 * n).from_address(v.beam_table)).copy()


class BeamSearchTest(unittest.TestCase):
    def setUp(self):
        self.rng = np.random.default_rng(5)
        # GQA in layer 0 (2 kv heads), MQA in layer 1; growth every 16 tokens.
        self.table = stateful(batch=WIDTH, heads=(2, 1), growth_step=16)
        self.gathered = stateful(batch=WIDTH, heads=(2, 1), growth_step=16)
        self.ref = History(self.table)

    def tearDown(self):
        self.table.close()
        self.gathered.close()

    def append_all(self, n):
        for layer in range(2):
            k, v = random_kv(self.table, layer, n)
            self.table.append(layer, k, v)
            self.gathered.append(layer, k, v)
            self.ref.append(layer, k, v)

    def decode(self, c, layer, q):
        out = np.full_like(q, np.nan)
        c.decode(layer, q, out, softmax_scale=0.125)
        return out

    def test_decode_through_table_equals_decode_after_gather(self):
        self.append_all(5)  # the prompt
        moved = 0
        for step in range(STEPS):
            survivors = 1 + int(self.rng.integers(WIDTH))
            idx = (np.arange(WIDTH, dtype=np.int32) if step % 9 == 0 else
                   self.rng.integers(0, survivors, size=WIDTH, dtype=np.int32))
            moved += int((idx != np.arange(WIDTH)).any())
            self.table.reorder(idx)
            self.gathered.reorder(idx.tolist())
            self.gathered.compact()  # the explicit gather: plain rows again
            self.assertIsNone(beam_table(self.gathered))
            self.ref.reorder(idx)
            self.append_all(1)
            for layer in range(2):
                q = self.rng.standard_normal((WIDTH, Q_HEADS, D), dtype=np.float32)
                got = self.decode(self.table, layer, q)
                want = self.decode(self.gathered, layer, q)
                np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32),
                                              "step %d layer %d" % (step, layer))
                np.testing.assert_allclose(got, reference_decode(self.ref, layer, q, 0.125),
                                           rtol=1e-4, atol=1e-5)
            if step % 10 == 9:
                assert_layers_equal(self, self.gathered, self.ref)
                for r in range(WIDTH):
                    self.assertEqual(bytes(self.table.export_row(r)),
                                     bytes(self.gathered.export_row(r)))
        self.assertEqual(self.table.lengths(), [5 + STEPS] * WIDTH)
        st = self.table.stats()
        self.assertEqual(st.reorders, moved)
        self.assertGreater(st.table_bytes, 0)
        self.assertEqual(st.compactions, 0)
        # Only entries past each pair's shared prefix move: less than a
        # whole table per reorder.
        self.assertLess(st.table_entries_copied, moved * WIDTH * (5 + STEPS) // 2)
        self.assertEqual(self.gathered.stats().compactions, moved)
        self.assertGreaterEqual(self.table.layer_stats(0).reallocations, 3)

        # Compacting the table cache: same bytes, same output, no table.
        q = self.rng.standard_normal((WIDTH, Q_HEADS, D), dtype=np.float32)
        before = self.decode(self.table, 0, q)
        self.table.compact()
        self.assertIsNone(beam_table(self.table))
        self.assertEqual(self.table.stats().table_bytes, 0)
        np.testing.assert_array_equal(self.decode(self.table, 0, q), before)
        assert_layers_equal(self, self.table, self.ref)

    def test_bad_reorders_carry_the_library_message_and_change_nothing(self):
        self.append_all(6)
        self.table.reorder([2, 2, 0, 1])
        self.append_all(1)
        table, state = beam_table(self.table), snapshot(self.table)
        q = self.rng.standard_normal((WIDTH, Q_HEADS, D), dtype=np.float32)
        out = self.decode(self.table, 0, q)
        for idx, status, message in (
                ([0, 1, 2, 4], Status.INVALID_ARGUMENT, "beam_idx[3] = 4 is outside [0, 4)"),
                (np.array([3, -1, 0, 0], np.int32), Status.INVALID_ARGUMENT,
                 "beam_idx[1] = -1 is outside [0, 4)"),
                ([0, 1], Status.INVALID_ARGUMENT, "beam_idx has 2 entries, the cache has batch 4")):
            with self.assertRaises(KvCacheError) as e:
                self.table.reorder(idx)
            self.assertEqual((e.exception.status, e.exception.op, e.exception.message),
                             (status, "kvc_stateful_reorder", message))
            np.testing.assert_array_equal(beam_table(self.table), table)
            after = snapshot(self.table)
            self.assertEqual(after[1], state[1])
            for (k, v, lens, _), (k0, v0, lens0, _) in zip(after[0], state[0]):
                self.assertEqual(lens, lens0)
                np.testing.assert_array_equal(k, k0)
                np.testing.assert_array_equal(v, v0)
            np.testing.assert_array_equal(self.decode(self.table, 0, q), out)
        # Layers of different lengths (inside a step): INVALID_STATE.
        k, v = random_kv(self.table, 0, 1)
        self.table.append(0, k, v)
        with self.assertRaises(KvCacheError) as e:
            self.table.reorder([0, 0, 0, 0])
        self.assertEqual(e.exception.status, Status.INVALID_STATE)
        self.assertIn("every layer at the same length", e.exception.message)

    def test_append_over_positions_another_row_reads_is_refused(self):
        with stateful(batch=2, heads=(1,)) as c:
            ref = History(c)
            k, v = random_kv(c, 0, 6)
            c.append(0, k, v)
            c.reorder([1, 1])  # row 0 now reads row 1's six positions
            c.trim(1, 2)
            before = snapshot(c)
            k, v = random_kv(c, 0, 1)
            with self.assertRaises(KvCacheError) as e:
                c.append(0, k, v)
            self.assertEqual(e.exception.status, Status.INVALID_STATE)
            self.assertIn("row 0 reads row 1's buffer at position 4", e.exception.message)
            self.assertEqual(snapshot(c)[1], before[1])
            c.compact()  # plain rows: the append goes through
            c.append(0, k, v)
            self.assertEqual(c.lengths(), [7, 5])
            del ref

    def test_decode_refusals(self):
        self.append_all(3)
        q = np.zeros((WIDTH, Q_HEADS, D), np.float32)
        cases = [
            (lambda: self.table.decode(0, q[:2], q[:2]), "query must be [batch, q_heads, "
                                                          "head_dim] with batch 4"),
            (lambda: self.table.decode(0, q, q[:, :2]), "out has shape"),
            (lambda: self.table.decode(0, q, q.astype(np.float16)), "out has dtype float16"),
            (lambda: self.table.decode(0, q[:, ::2], q[:, ::2]), "query must be contiguous"),
            (lambda: self.table.decode(0, q.ctypes.data, q.ctypes.data), "give q_heads and q_dtype"),
            (lambda: self.table.decode(0, q, q, q_heads=8), "q_heads is 8"),
        ]
        for call, words in cases:
            with self.assertRaises(KvCacheError) as e:
                call()
            self.assertEqual(e.exception.status, Status.INVALID_ARGUMENT, words)
            self.assertIn(words, e.exception.message)
        # The library's own checks: q_heads not a multiple of kv_heads.
        q3 = np.zeros((WIDTH, 3, D), np.float32)
        with self.assertRaises(KvCacheError) as e:
            self.table.decode(0, q3, q3.copy())
        self.assertEqual(e.exception.op, "kvc_stateful_decode")
        self.assertIn("q_heads", e.exception.message)
        # Int addresses with the sizes as keywords equal the array call.
        q = self.rng.standard_normal((WIDTH, Q_HEADS, D), dtype=np.float32)
        out = np.zeros_like(q)
        self.table.decode(1, q.ctypes.data, out.ctypes.data, q_heads=Q_HEADS, q_dtype="f32",
                          softmax_scale=0.125)
        np.testing.assert_array_equal(out, self.decode(self.table, 1, q))


if __name__ == "__main__":
    unittest.main()
