"""Paged prefill attention through the binding (CPU backend): a ragged
batch (a prompt over a reused cached prefix, a fresh prompt, a decode
row) against a NumPy causal attention over each sequence's K/V, with GQA
and MQA, padded and CSR block tables (bit for bit equal to each other),
the log-sum-exp, a window and a soft cap; refusals that name the argument
and write nothing."""
import unittest

import numpy as np

import kvcache
from kvcache import KvCacheError, Status
from support import DLPackOnly

D, T = 64, 16


def reference(q, qo_indptr, kv_lens, kv, scale, window=0, cap=0.0):
    """out and lse of every query row, in float64: query i of sequence b
    sits at position kv_lens[b] - q_len + i and attends to positions
    [max(0, p + 1 - window), p]."""
    total_q, H = q.shape[0], q.shape[1]
    out = np.empty((total_q, H, D))
    lse = np.empty((total_q, H))
    for b, (k, v) in enumerate(kv):
        lo, hi, L = qo_indptr[b], qo_indptr[b + 1], kv_lens[b]
        group = H // k.shape[1]
        for i in range(hi - lo):
            p = L - (hi - lo) + i
            first = max(0, p + 1 - window) if window else 0
            for h in range(H):
                s = scale * (k[first:p + 1, h // group].astype(np.float64) @
                             q[lo + i, h].astype(np.float64))
                if cap > 0:
                    s = cap * np.tanh(s / cap)
                m = s.max()
                e = np.exp(s - m)
                out[lo + i, h] = (e / e.sum()) @ v[first:p + 1, h // group].astype(np.float64)
                lse[lo + i, h] = m + np.log(e.sum())
    return out, lse


class PrefillTest(unittest.TestCase):
    def build(self, kv_heads, layout):
        """Three sequences: 2 reuses the first 32 tokens (two blocks) of 1
        and computes 13 more; 3 is a fresh prompt of 7; 1 then decodes one
        token. Returns the cache and the batch (ids, q_lens, kv_lens, K/V
        per sequence)."""
        rng = np.random.default_rng(kv_heads * 10 + len(layout))
        c = kvcache.Cache(num_layers=2, kv_heads=kv_heads, head_dim=D, tokens_per_block=T,
                          max_tokens=1024, dtype="f32", layout=layout, device="cpu")
        self.addCleanup(c.close)
        kv = {}

        def store(seq, n):
            """Random K/V for the new tokens of seq (n of them) in layer 0
            (layer 1 stays untouched: the layer argument is honoured)."""
            slots = c.slot_mapping([seq]).slots
            new = slots[slots >= 0]
            self.assertEqual(len(new), n)
            k = rng.standard_normal((n, kv_heads, D), dtype=np.float32)
            v = rng.standard_normal((n, kv_heads, D), dtype=np.float32)
            c.store_kv(0, k, v, new)
            old = kv.get(seq, (np.zeros((0, kv_heads, D), np.float32),) * 2)
            kv[seq] = (np.concatenate([old[0], k]), np.concatenate([old[1], v]))

        system = list(range(100, 132))
        self.assertEqual(c.add_sequence(1, system + list(range(8))), 0)
        store(1, 40)
        c.commit(1, 40)
        self.assertEqual(c.add_sequence(2, system + list(range(50, 63))), 32)
        kv[2] = (kv[1][0][:32], kv[1][1][:32])  # the reused prefix: seq 1's blocks
        store(2, 13)
        c.add_sequence(3, list(range(200, 207)))
        store(3, 7)
        c.extend_sequence(1, [9])
        store(1, 1)
        ids = np.array([2, 3, 1], np.uint64)
        return c, ids, [13, 7, 1], [45, 7, 41], [kv[2], kv[3], kv[1]], rng

    def check(self, kv_heads, layout):
        c, ids, q_lens, kv_lens, kv, rng = self.build(kv_heads, layout)
        qo_indptr = np.concatenate([[0], np.cumsum(q_lens)]).astype(np.int32)
        q = rng.standard_normal((21, 4, D), dtype=np.float32)
        table = c.block_table(ids)
        csr = c.block_table_csr(ids)
        self.assertEqual(c.prefill_workspace_size(0, 3, 21, 4, 45), 0)
        for window, cap in ((0, 0.0), (20, 0.0), (0, 3.0)):
            want, want_lse = reference(q, qo_indptr, kv_lens, kv, 0.125, window, cap)
            padded, lse = np.full_like(q, np.nan), np.full((21, 4), np.nan, np.float32)
            c.prefill_attention(0, q, padded, qo_indptr, kv_lens, table, lse=lse,
                                softmax_scale=0.125, window=window, logits_soft_cap=cap)
            np.testing.assert_allclose(padded, want, rtol=1e-4, atol=1e-5)
            np.testing.assert_allclose(lse, want_lse, rtol=1e-5, atol=1e-5)
            # CSR table, lists for the host arrays, a DLPack query: the same bits.
            out = np.full_like(q, np.nan)
            c.prefill_attention(0, DLPackOnly(q), out, qo_indptr.tolist(), kv_lens,
                                csr.indices[:csr.num_indices], indptr=csr.indptr,
                                max_kv_len=64, softmax_scale=0.125, window=window,
                                logits_soft_cap=cap)
            np.testing.assert_array_equal(out.view(np.uint32), padded.view(np.uint32))
        # Int addresses with the sizes as keywords, the default scale.
        want, _ = reference(q, qo_indptr, kv_lens, kv, 1 / np.sqrt(D))
        out = np.full_like(q, np.nan)
        c.prefill_attention(0, q.ctypes.data, out.ctypes.data, qo_indptr, kv_lens,
                            table.ctypes.data, q_heads=4, q_dtype="f32",
                            table_stride=table.shape[1])
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)
        # The decode row equals decode attention over the same blocks.
        dec = np.empty((1, 4, D), np.float32)
        c.decode_attention(0, q[20:21], dec, np.array([41], np.int32), table[2:3],
                           max_seq_len=41)
        np.testing.assert_allclose(out[20:21], dec, rtol=1e-5, atol=1e-6)

    def test_gqa_nhd(self):
        self.check(2, "nhd")

    def test_mqa_hnd(self):
        self.check(1, "hnd")

    def test_refusals_name_the_argument_and_write_nothing(self):
        c, ids, q_lens, kv_lens, kv, rng = self.build(2, "nhd")
        qo = [0, 13, 20, 21]
        q = rng.standard_normal((21, 4, D), dtype=np.float32)
        table = c.block_table(ids)
        out = np.full_like(q, 7.0)
        cases = [
            (lambda: c.prefill_attention(0, q, out, qo[:3], kv_lens, table),
             Status.INVALID_ARGUMENT, "qo_indptr has 3 entries; kv_lens has 3, so 4"),
            (lambda: c.prefill_attention(0, q, out, qo, np.array(kv_lens, np.int64), table),
             Status.INVALID_ARGUMENT, "kv_lens must hold int32"),
            (lambda: c.prefill_attention(0, q, out, qo, kv_lens, table,
                                         lse=np.zeros((21, 2), np.float32)),
             Status.INVALID_ARGUMENT, "lse must be [total_q, q_heads] = [21, 4]"),
            (lambda: c.prefill_attention(0, q, out, qo, kv_lens, table,
                                         lse=np.zeros((21, 4), np.float64)),
             Status.INVALID_ARGUMENT, "lse must hold float32"),
            (lambda: c.prefill_attention(0, q, out[:20], qo, kv_lens, table),
             Status.INVALID_ARGUMENT, "out has shape"),
            (lambda: c.prefill_attention(0, q, out, qo, kv_lens, table.astype(np.int64)),
             Status.INVALID_ARGUMENT, "block_table must hold int32"),
            (lambda: c.prefill_attention(0, q[:, :, :32], out, qo, kv_lens, table),
             Status.INVALID_ARGUMENT, "query has head_dim 32"),
            # The library's own checks.
            (lambda: c.prefill_attention(0, q, out, [0, 13, 20, 22], kv_lens, table),
             Status.INVALID_ARGUMENT, "qo_indptr[batch] = 22 does not match total_q = 21"),
            (lambda: c.prefill_attention(0, q, out, [0, 13, 20, 21], [45, 6, 41], table),
             Status.INVALID_ARGUMENT, "sequence 1 has q_len 7 (qo_indptr) above its kv_len 6"),
            (lambda: c.prefill_attention(0, q, out, qo, kv_lens, table, max_kv_len=44),
             Status.INVALID_ARGUMENT, "kv_lens[0] = 45 is outside [0, max_kv_len 44]"),
            (lambda: c.prefill_attention(0, q[:, :3].copy(), out[:, :3].copy(), qo, kv_lens, table),
             Status.INVALID_ARGUMENT, "q_heads must be a positive multiple"),
            (lambda: c.prefill_attention(5, q, out, qo, kv_lens, table),
             Status.INVALID_ARGUMENT, "layer"),
        ]
        for call, status, words in cases:
            with self.assertRaises(KvCacheError) as e:
                call()
            self.assertEqual(e.exception.status, status, words)
            self.assertIn(words, e.exception.message)
            self.assertTrue((out == 7.0).all(), words)
        bad = table.copy()
        bad[1, 0] = 9999
        with self.assertRaises(KvCacheError) as e:
            c.prefill_attention(0, q, out, qo, kv_lens, bad)
        self.assertEqual(e.exception.op, "kvc_prefill_attention")
        self.assertIn("block table entry 0 of sequence 1 is 9999", e.exception.message)
        self.assertTrue((out == 7.0).all())


if __name__ == "__main__":
    unittest.main()
