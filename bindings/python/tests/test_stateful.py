"""StatefulCache on the CPU backend: appends across growth boundaries equal
NumPy concatenation bit for bit (both layouts, per-layer heads, ragged
rows, NumPy / DLPack / int address sources), the growth grid of the two
policies, trim, reset, export/import round trips, and refusals that carry
the library's message and change nothing."""
import ctypes
import unittest

import numpy as np

import kvcache
from kvcache import GrowthPolicy, KvCacheError, Layout, Status
from support import DLPackOnly

RNG = np.random.default_rng(11)
D = 64


def stateful(batch=4, layout="hnd", heads=(2, 1, 2), dtype="f32", **options):
    return kvcache.StatefulCache(batch=batch, layout=layout, num_layers=len(heads),
                                 kv_heads=list(heads), head_dim=D, dtype=dtype, device="cpu",
                                 **options)


def random_kv(c, layer, n, kind=np.float32):
    """Random K/V of n tokens per row in the cache's layout: float32 values
    or any bit pattern of a 16-bit type."""
    h = c.kv_heads[layer]
    shape = (c.batch, h, n, D) if c.layout == Layout.HND else (c.batch, n, h, D)
    if kind == np.float32:
        return tuple(RNG.standard_normal(shape, dtype=np.float32) for _ in range(2))
    return tuple(RNG.integers(0, 1 << 16, size=shape, dtype=np.uint16) for _ in range(2))


class History:
    """The reference: per (layer, row) the K and V of its tokens as
    [heads, tokens, head_dim] arrays, grown by np.concatenate."""

    def __init__(self, c):
        self.c = c
        self.k = [[np.zeros((h, 0, D), np.float32) for _ in range(c.batch)] for h in c.kv_heads]
        self.v = [[x.copy() for x in row] for row in self.k]

    def append(self, layer, k, v, row_tokens=None):
        hnd = self.c.layout == Layout.HND
        for r in range(self.c.batch):
            n = k.shape[2 if hnd else 1] if row_tokens is None else row_tokens[r]
            for hist, new in ((self.k, k), (self.v, v)):
                part = new[r, :, :n] if hnd else new[r, :n].transpose(1, 0, 2)
                old = hist[layer][r]
                hist[layer][r] = np.concatenate([old.astype(new.dtype), part], axis=1)

    def reorder(self, beam_idx):
        for hist in (self.k, self.v):
            for layer in range(len(hist)):
                hist[layer] = [hist[layer][int(b)].copy() for b in beam_idx]

    def trim(self, row, n):
        for hist in (self.k, self.v):
            for layer in range(len(hist)):
                for r in (range(self.c.batch) if row is None else [row]):
                    hist[layer][r] = hist[layer][r][:, :hist[layer][r].shape[1] - n]

    def lengths(self, layer=0):
        return [x.shape[1] for x in self.k[layer]]


def assert_layers_equal(test, c, ref, layers=None):
    """Every row's first `length` positions of every layer equal the
    reference bit for bit (the cache must have no beam table)."""
    for layer in (range(c.num_layers) if layers is None else layers):
        K, V = c.layer_arrays(layer)
        test.assertEqual(c.lengths(layer), ref.lengths(layer))
        for r in range(c.batch):
            n = ref.lengths(layer)[r]
            for got, want in ((K, ref.k[layer][r]), (V, ref.v[layer][r])):
                g = got[r, :, :n] if c.layout == Layout.HND else got[r, :n].transpose(1, 0, 2)
                np.testing.assert_array_equal(g.view(np.uint8), want.view(np.uint8),
                                              "layer %d row %d" % (layer, r))


def snapshot(c):
    """Everything a refused call must leave as it was."""
    layers = []
    for layer in range(c.num_layers):
        K, V = c.layer_arrays(layer)
        layers.append((K.copy(), V.copy(), c.lengths(layer), c.view(layer).beam_table_stride))
    return layers, c.stats()


class StatefulAppendTest(unittest.TestCase):
    def check_appends(self, layout, kind, dtype):
        with stateful(layout=layout, dtype=dtype, growth_step=8) as c:
            ref = History(c)
            grew = 0
            for n in (1, 5, 13, 1, 1, 1, 20, 3, 1, 8):  # crosses the 8-token grid often
                for layer in range(c.num_layers):
                    k, v = random_kv(c, layer, n, kind)
                    # bf16 bits in uint16 arrays: the dtype is given.
                    c.append(layer, k, v, src_dtype=None if kind == np.float32 else dtype)
                    ref.append(layer, k, v)
                assert_layers_equal(self, c, ref)
            for layer in range(c.num_layers):
                s = c.layer_stats(layer)
                grew += s.reallocations
                self.assertEqual(s.max_length, 54)
                self.assertGreaterEqual(s.capacity, 54)
                self.assertEqual((s.capacity - s.growth_offset) % 8, 0)
                self.assertGreaterEqual(s.reallocations, 2)
            self.assertEqual(c.stats().reallocations, grew)

    def test_hnd_f32_equals_concatenation(self):
        self.check_appends("hnd", np.float32, "f32")

    def test_nhd_bf16_bits_equal_concatenation(self):
        self.check_appends("nhd", np.uint16, "bf16")

    def test_row_tokens_append_ragged_rows(self):
        with stateful(heads=(2,), growth_step=4) as c:
            ref = History(c)
            for rows in ([3, 0, 7, 1], [7, 7, 0, 2], None, [0, 0, 0, 0]):
                k, v = random_kv(c, 0, 7)
                c.append(0, k, v, row_tokens=rows)
                ref.append(0, k, v, rows)
                assert_layers_equal(self, c, ref)
            self.assertEqual(c.lengths(0), [17, 14, 14, 10])
            out = np.zeros(4, np.uint32)
            self.assertIs(c.lengths(0, out), out)
            self.assertEqual(out.tolist(), [17, 14, 14, 10])

    def test_dlpack_and_int_addresses(self):
        with stateful(heads=(2,)) as a, stateful(heads=(2,)) as b:
            k, v = random_kv(a, 0, 6)
            a.append(0, k, v)
            b.append(0, DLPackOnly(k[:, :, :3].copy()), DLPackOnly(v[:, :, :3].copy()))
            k2, v2 = k[:, :, 3:].copy(), v[:, :, 3:].copy()
            b.append(0, k2.ctypes.data, v2.ctypes.data, num_tokens=3, src_dtype="f32")
            np.testing.assert_array_equal(a.layer_arrays(0)[0][:, :, :6], b.layer_arrays(0)[0][:, :, :6])
            np.testing.assert_array_equal(a.layer_arrays(0)[1][:, :, :6], b.layer_arrays(0)[1][:, :, :6])
            with self.assertRaises(KvCacheError) as e:
                b.append(0, k2.ctypes.data, v2.ctypes.data)
            self.assertIn("give num_tokens and src_dtype", e.exception.message)

    def test_growth_policies_and_initial_length(self):
        with stateful(heads=(1, 1, 1, 1), growth_step=16, initial_length=20) as c:
            offsets = [c.layer_stats(l).growth_offset for l in range(4)]
            self.assertEqual(offsets, [0, 4, 8, 12])
            self.assertEqual([c.layer_stats(l).capacity for l in range(4)], [32, 20, 24, 28])
            self.assertEqual(c.stats().reallocations, 0)
        with stateful(heads=(1, 1), growth_step=16, growth_policy="uniform") as c:
            self.assertEqual([c.layer_stats(l).growth_offset for l in range(2)], [0, 0])
        with stateful(heads=(1, 1), growth_policy=GrowthPolicy.UNIFORM, layout=Layout.NHD) as c:
            self.assertEqual(c.layout, Layout.NHD)

    def test_max_length_refused_and_nothing_changed(self):
        with stateful(heads=(2,), max_length=10) as c:
            k, v = random_kv(c, 0, 8)
            c.append(0, k, v)
            before = snapshot(c)
            k, v = random_kv(c, 0, 3)
            with self.assertRaises(KvCacheError) as e:
                c.append(0, k, v)
            self.assertEqual(e.exception.status, Status.INVALID_ARGUMENT)
            self.assertEqual(e.exception.op, "kvc_stateful_append")
            self.assertIn("max_length", e.exception.message)
            self.assert_unchanged(c, before)

    def test_binding_refusals_name_the_argument(self):
        with stateful(heads=(2, 1)) as c:
            k, v = random_kv(c, 0, 3)
            cases = [
                (lambda: c.append(0, k[:3], v[:3]), "batch 4"),
                (lambda: c.append(1, k, v), "kv_heads 1"),
                (lambda: c.append(0, k[:, :, :, :32], v[:, :, :, :32]), "head_dim 64"),
                (lambda: c.append(0, k, v[:, :, :1]), "value has shape"),
                (lambda: c.append(0, k.astype(np.float16), v.astype(np.float16)), "src_dtype f16"),
                (lambda: c.append(0, k.transpose(0, 2, 1, 3), v), "kv_heads 2"),
                (lambda: c.append(0, k, v, row_tokens=[1, 1]), "row_tokens has 2 entries"),
                (lambda: c.append(0, k, v, row_tokens=[1.5] * 4), "row_tokens"),
                (lambda: c.reorder(np.zeros(4, np.int64)), "beam_idx must hold int32"),
            ]
            before = snapshot(c)
            for call, words in cases:
                with self.assertRaises(KvCacheError) as e:
                    call()
                self.assertEqual(e.exception.status, Status.INVALID_ARGUMENT, words)
                self.assertIn(words, e.exception.message)
            self.assert_unchanged(c, before)
            # A row may not take more than num_tokens: the library says so.
            with self.assertRaises(KvCacheError) as e:
                c.append(0, k, v, row_tokens=[1, 4, 0, 0])
            self.assertIn("row_tokens[1]", e.exception.message)
            self.assert_unchanged(c, before)

    def assert_unchanged(self, c, before):
        layers, stats = snapshot(c)
        self.assertEqual(stats, before[1])
        for (k, v, lens, stride), (k0, v0, lens0, stride0) in zip(layers, before[0]):
            self.assertEqual((lens, stride), (lens0, stride0))
            np.testing.assert_array_equal(k.view(np.uint8), k0.view(np.uint8))
            np.testing.assert_array_equal(v.view(np.uint8), v0.view(np.uint8))


class StatefulRowsTest(unittest.TestCase):
    assert_unchanged = StatefulAppendTest.assert_unchanged

    def fill(self, c, ref, n):
        for layer in range(c.num_layers):
            k, v = random_kv(c, layer, n)
            c.append(layer, k, v)
            ref.append(layer, k, v)

    def test_trim_one_row_and_every_row(self):
        with stateful(growth_step=8) as c:
            ref = History(c)
            self.fill(c, ref, 10)
            cap = c.layer_stats(0).capacity
            c.trim(1, 3)
            ref.trim(1, 3)
            self.assertEqual(c.lengths(), [10, 7, 10, 10])
            c.trim(None, 2)
            ref.trim(None, 2)
            c.trim(kvcache.ALL_ROWS, 0)
            self.assertEqual(c.lengths(2), [8, 5, 8, 8])
            self.fill(c, ref, 1)  # lands at each row's new length
            assert_layers_equal(self, c, ref)
            self.assertEqual(c.layer_stats(0).capacity, cap)  # capacity kept

    def test_trim_too_long_refused_with_the_library_message(self):
        with stateful() as c:
            ref = History(c)
            self.fill(c, ref, 5)
            c.trim(1, 1)
            before = snapshot(c)
            for row, n, message in ((1, 5, "cannot trim 5 tokens from row 1, which has 4"),
                                    (None, 5, "cannot trim 5 tokens from row 1, which has 4"),
                                    (4, 1, "row must be < batch (4) or KVC_STATEFUL_ALL_ROWS, "
                                           "got 4")):
                with self.assertRaises(KvCacheError) as e:
                    c.trim(row, n)
                self.assertEqual(e.exception.status, Status.INVALID_ARGUMENT)
                self.assertEqual(e.exception.op, "kvc_stateful_trim")
                self.assertEqual(e.exception.message, message)
                self.assert_unchanged(c, before)

    def test_reset_keeps_or_releases_memory(self):
        with stateful() as c:
            ref = History(c)
            self.fill(c, ref, 9)
            c.reorder([1, 1, 0, 2])
            kv = c.stats().kv_bytes
            c.reset()
            self.assertEqual(c.lengths(), [0] * 4)
            self.assertEqual(c.stats().kv_bytes, kv)
            self.assertEqual(c.stats().table_bytes, 0)
            self.assertIsNone(c.view(0).beam_table)
            c.reset(release_memory=True)
            self.assertEqual(c.stats().kv_bytes, 0)
            self.assertEqual(c.layer_stats(0).capacity, 0)
            ref = History(c)
            self.fill(c, ref, 3)
            assert_layers_equal(self, c, ref)

    def test_export_import_round_trip(self):
        with stateful(growth_step=8) as a, stateful(growth_step=32, batch=2) as b:
            ref = History(a)
            self.fill(a, ref, 11)
            a.trim(3, 4)
            ref.trim(3, 4)
            # Row 3 read through a beam table: rows 0 and 2 continue row 3.
            a.reorder([3, 1, 3, 0])
            ref.reorder([3, 1, 3, 0])
            state = a.export_row(0)
            self.assertIsInstance(state, bytearray)
            self.assertEqual(bytes(state), bytes(a.export_row(2)))
            # Into another cache of the same model (other batch, growth).
            b.import_row(1, bytes(state))
            self.assertEqual(b.lengths(), [0, 7])
            for layer in range(3):
                K, V = b.layer_arrays(layer)
                np.testing.assert_array_equal(K[1, :, :7], ref.k[layer][0])
                np.testing.assert_array_equal(V[1, :, :7], ref.v[layer][0])
            self.assertEqual(bytes(b.export_row(1)), bytes(state))
            # Into a row of the same cache, from a NumPy buffer; then into a
            # caller buffer: exact, too small, and after compaction.
            a.compact()
            a.import_row(1, np.frombuffer(bytes(state), np.uint8))
            ref.k = [[x if r != 1 else ref.k[l][0] for r, x in enumerate(row)]
                     for l, row in enumerate(ref.k)]
            ref.v = [[x if r != 1 else ref.v[l][0] for r, x in enumerate(row)]
                     for l, row in enumerate(ref.v)]
            assert_layers_equal(self, a, ref)
            out = bytearray(len(state) + 10)
            self.assertEqual(a.export_row(1, out), len(state))
            self.assertEqual(bytes(out[:len(state)]), bytes(state))
            with self.assertRaises(KvCacheError) as e:
                a.export_row(1, bytearray(len(state) - 1))
            self.assertEqual(e.exception.status, Status.BUFFER_TOO_SMALL)

    def test_import_refusals_change_nothing(self):
        with stateful() as a, stateful(heads=(2, 1, 1)) as other:
            ref = History(a)
            self.fill(a, ref, 6)
            state = bytes(a.export_row(0))
            ref_o = History(other)
            self.fill(other, ref_o, 2)
            before = snapshot(other)
            for bad in (state, state[:-1], b"not a state", b""):
                with self.assertRaises(KvCacheError) as e:
                    other.import_row(0, bad)
                self.assertEqual(e.exception.status, Status.INVALID_ARGUMENT)
                self.assertEqual(e.exception.op, "kvc_stateful_import_row")
                self.assert_unchanged(other, before)
            before = snapshot(a)
            with self.assertRaises(KvCacheError) as e:
                a.import_row(4, state)
            self.assertEqual(e.exception.status, Status.INVALID_ARGUMENT)
            with self.assertRaises(KvCacheError) as e:
                a.import_row(0, 12)
            self.assertIn("state must be a buffer", e.exception.message)
            self.assert_unchanged(a, before)


class StatefulLifecycleTest(unittest.TestCase):
    def test_close_twice_and_use_after_close(self):
        c = stateful()
        self.assertFalse(c.closed)
        self.assertEqual(repr(c), "StatefulCache(cpu, f32, hnd, batch 4, 3 layers, head_dim 64)")
        c.close()
        c.close()
        self.assertTrue(c.closed)
        self.assertEqual(repr(c), "StatefulCache(<closed>)")
        k = np.zeros((4, 2, 1, D), np.float32)
        calls = {
            "kvc_stateful_layer_view": lambda: c.view(0),
            "kvc_stateful_get_lengths": c.lengths,
            "kvc_stateful_append": lambda: c.append(0, k, k),
            "kvc_stateful_reorder": lambda: c.reorder([0, 0, 0, 0]),
            "kvc_stateful_compact": c.compact,
            "kvc_stateful_trim": lambda: c.trim(None, 0),
            "kvc_stateful_reset": c.reset,
            "kvc_stateful_export_row": lambda: c.export_row(0),
            "kvc_stateful_import_row": lambda: c.import_row(0, b"x"),
            "kvc_stateful_decode": lambda: c.decode(0, k[:, :, 0], k[:, :, 0]),
            "kvc_stateful_decode_workspace_size": lambda: c.decode_workspace_size(0, 2),
            "kvc_stateful_get_async_error": c.async_error,
            "kvc_stateful_get_stats": c.stats,
            "kvc_stateful_get_layer_stats": lambda: c.layer_stats(0),
        }
        for op, call in calls.items():
            with self.assertRaises(KvCacheError) as e:
                call()
            self.assertEqual(e.exception.status, Status.INVALID_STATE, op)
            self.assertEqual(e.exception.op, op)
            self.assertIn("closed StatefulCache", e.exception.message)

    def test_context_manager_config_and_create_refusals(self):
        with kvcache.Config(num_layers=2, kv_heads=2, head_dim=D, dtype="f16") as cfg:
            with kvcache.StatefulCache(cfg, batch=3, initial_length=5) as c:
                self.assertEqual((c.batch, c.num_layers, c.dtype, c.layout, c.kv_factor),
                                 (3, 2, kvcache.DType.F16, Layout.HND, 2))
                self.assertEqual(c.async_error(), None)
                self.assertEqual(c.decode_workspace_size(0, 4), 0)
            self.assertTrue(c.closed)
            with self.assertRaises(TypeError):
                kvcache.StatefulCache(cfg, batch=2, head_dim=D)
            for options, status, words in (
                    (dict(batch=0), Status.INVALID_ARGUMENT, "batch must be in 1..1024, got 0"),
                    (dict(batch=2, growth_policy=7), Status.INVALID_ARGUMENT, "got 7"),
                    (dict(batch=2, layout=5), Status.INVALID_ARGUMENT, "layout"),
                    (dict(batch=2, growth_step=70000), Status.INVALID_ARGUMENT, "growth_step")):
                with self.assertRaises(KvCacheError) as e:
                    kvcache.StatefulCache(cfg, **options)
                self.assertEqual((e.exception.status, e.exception.op),
                                 (status, "kvc_stateful_create"))
                self.assertIn(words, e.exception.message)
        with self.assertRaises(KvCacheError) as e:
            stateful(attention_windows=[16])
        self.assertEqual(e.exception.status, Status.UNSUPPORTED)
        with self.assertRaises(ValueError):
            stateful(growth_policy="sometimes")


if __name__ == "__main__":
    unittest.main()
