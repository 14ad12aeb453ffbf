"""Kernels on the CPU backend through the binding: K/V bytes written by the
store kernel (contiguous and strided sources, NumPy buffers, DLPack and
int addresses) read back bit for bit through the layer views, decode
attention against a NumPy reference, block copies, and the refusals (wrong
dtype, shape, contiguity, device) that name the argument and change
nothing."""
import unittest

import numpy as np

import kvcache
from kvcache import KvCacheError, Status, StoreStrides
from support import DLPackOnly, prompt, small_cache

RNG = np.random.default_rng(7)


def bf16_bits(shape):
    """Random bf16 bit patterns (uint16), any value: a store copies bytes."""
    return RNG.integers(0, 1 << 16, size=shape, dtype=np.uint16)


def read_layer(cache, layer, slots, dtype):
    """K and V of the tokens at `slots`, read through the layer view from
    the pool bytes: [2, n, heads, dim] of `dtype`."""
    v = cache.layer_view(layer)
    pool = np.frombuffer(cache.pool_memory(v.pool), dtype=np.uint8)
    row = v.head_dim * v.elem_size
    out = np.empty((v.kv_factor, len(slots), v.kv_heads, row), dtype=np.uint8)
    base = v.base - cache.describe_pool(v.pool).base
    for i, s in enumerate(slots):
        b, t = divmod(int(s), v.tokens_per_block)
        for k in range(v.kv_factor):
            for h in range(v.kv_heads):
                off = base + v.offset(b, k, t, h)
                out[k, i, h] = pool[off:off + row]
    return out.view(dtype)


class FakeCuda:
    """A CUDA array as CuPy or Numba describe one (never dereferenced: the
    binding refuses it on a CPU cache before any call)."""

    def __init__(self, shape, typestr="<f2", ordinal=0):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr,
                                         "data": (0xDEAD0000, False), "strides": None,
                                         "version": 3}


class FakeTorch:
    """The duck type of a torch tensor: data_ptr(), stride(), dtype, device."""

    class device:
        type = "cuda"
        index = 1

    def __init__(self, shape, dtype="torch.bfloat16"):
        self.shape, self.dtype = shape, dtype

    def data_ptr(self):
        return 0xBEEF0000

    def stride(self):
        out, acc = [], 1
        for n in reversed(self.shape):
            out.append(acc)
            acc *= n
        return tuple(reversed(out))


class StoreTest(unittest.TestCase):
    def setUp(self):
        self.c = small_cache(layout="hnd")
        self.c.add_sequence(1, prompt(24))
        self.c.add_sequence(2, prompt(24, 500))
        self.slots = self.c.slot_mapping([1, 2]).slots  # 48 slots, in (sequence, token) order

    def tearDown(self):
        self.c.close()

    def test_contiguous_store_round_trips(self):
        k, v = bf16_bits((48, 2, 64)), bf16_bits((48, 2, 64))
        layer0 = read_layer(self.c, 0, self.slots, np.uint16)
        self.c.store_kv(1, k, v, self.slots, src_dtype="bf16")
        got = read_layer(self.c, 1, self.slots, np.uint16)
        np.testing.assert_array_equal(got[0], k)
        np.testing.assert_array_equal(got[1], v)
        # Layer 0 was not written.
        np.testing.assert_array_equal(read_layer(self.c, 0, self.slots, np.uint16), layer0)

    def test_strided_batch_heads_tokens_dim_view(self):
        # A model's cache tensors [batch, kv_heads, capacity, dim], sliced
        # to this step's 24 tokens: no copy, kvc_store_kv_strided.
        kb, vb = bf16_bits((2, 2, 30, 64)), bf16_bits((2, 2, 30, 64))
        k, v = kb[:, :, 3:27], vb[:, :, 3:27]
        self.assertFalse(k.flags.c_contiguous)
        self.c.store_kv(0, k, v, self.slots, src_dtype="bf16")
        got = read_layer(self.c, 0, self.slots, np.uint16)
        np.testing.assert_array_equal(got[0], k.transpose(0, 2, 1, 3).reshape(48, 2, 64))
        np.testing.assert_array_equal(got[1], v.transpose(0, 2, 1, 3).reshape(48, 2, 64))

    def test_strided_transposed_dlpack_and_int_addresses(self):
        # [heads, tokens, dim] transposed to [tokens, heads, dim], through DLPack.
        k = bf16_bits((2, 48, 64)).transpose(1, 0, 2)
        v = bf16_bits((48, 2, 64))
        self.c.store_kv(1, DLPackOnly(k), DLPackOnly(v), DLPackOnly(self.slots), src_dtype="bf16")
        got = read_layer(self.c, 1, self.slots, np.uint16)
        np.testing.assert_array_equal(got[0], k)
        np.testing.assert_array_equal(got[1], v)
        # The same through int addresses with explicit strides (elements).
        k2 = bf16_bits((2, 48, 64))
        self.c.store_kv(1, k2.ctypes.data, v.ctypes.data, self.slots.ctypes.data,
                        num_tokens=48, src_dtype="bf16",
                        strides=StoreStrides(0, key=(0, 64, 48 * 64), value=(0, 128, 64)))
        np.testing.assert_array_equal(read_layer(self.c, 1, self.slots, np.uint16)[0],
                                      k2.transpose(1, 0, 2))

    def test_refusals_change_nothing(self):
        k = bf16_bits((48, 2, 64))
        before = bytes(self.c.pool_memory())
        cases = [
            (dict(key=k.astype(np.float64), value=k.astype(np.float64)), "float64"),
            (dict(key=np.zeros((48, 2, 64), np.float16), value=np.zeros((48, 2, 64), np.float16)),
             "key has dtype float16 but src_dtype is bf16"),
            (dict(key=bf16_bits((48, 2, 128))[:, :, ::2], value=k), "contiguous in its last"),
            (dict(key=bf16_bits((48, 4, 64)), value=k), "kv_heads is 2"),
            (dict(key=k, value=bf16_bits((47, 2, 64))), "value has shape"),
            (dict(key=k, value=k, slot_mapping=self.slots.astype(np.int32)), "int64"),
            (dict(key=k, value=k, slot_mapping=self.slots[:40]), "40 entries; 48"),
            (dict(key=k, value=k, slot_mapping=self.slots[::-1]), "contiguous"),
            (dict(key=FakeCuda((48, 2, 64)), value=k), "key is on cuda:0 but the cache is on cpu"),
            (dict(key=k, value=FakeTorch((48, 2, 64))), "value is on cuda:1"),
            (dict(key=k.ctypes.data, value=k), "give num_tokens"),
            (dict(key=object(), value=k), "key must be a buffer"),
        ]
        for kwargs, needle in cases:
            args = dict(layer=1, slot_mapping=self.slots, src_dtype="bf16")
            args.update(kwargs)
            with self.assertRaises(KvCacheError) as e:
                self.c.store_kv(**args)
            self.assertEqual(e.exception.status, Status.INVALID_ARGUMENT, needle)
            self.assertEqual(e.exception.op, "kvc_store_kv")
            self.assertIn(needle, e.exception.message)
        # Errors found by the library: a slot out of range, a layer out of range.
        bad = self.slots.copy()
        bad[5] = 10_000
        with self.assertRaises(KvCacheError) as e:
            self.c.store_kv(1, k, k, bad, src_dtype="bf16")
        self.assertIn("slot_mapping[5] = 10000 is outside", e.exception.message)
        with self.assertRaises(KvCacheError) as e:
            self.c.store_kv(2, k, k, self.slots, src_dtype="bf16")
        self.assertIn("layer must be < num_layers (2), got 2", e.exception.message)
        with self.assertRaises(KvCacheError) as e:  # strided, then refused by the library
            self.c.store_kv(0, bf16_bits((2, 2, 24, 64)), bf16_bits((2, 2, 24, 64)), bad,
                            src_dtype="bf16")
        self.assertEqual(e.exception.op, "kvc_store_kv_strided")
        self.assertEqual(bytes(self.c.pool_memory()), before)
        self.assertIsNone(self.c.async_error())


class DecodeTest(unittest.TestCase):
    def test_decode_attention_matches_numpy(self):
        with small_cache(dtype="f32", kv_heads=2, head_dim=64) as c:
            lens = [37, 9, 16]
            for i, n in enumerate(lens):
                c.add_sequence(i, prompt(n, 100 * i))
            ids = list(range(3))
            slots = c.slot_mapping(ids).slots
            k = RNG.standard_normal((len(slots), 2, 64), dtype=np.float32)
            v = RNG.standard_normal((len(slots), 2, 64), dtype=np.float32)
            c.store_kv(1, k, v, slots)
            q = RNG.standard_normal((3, 8, 64), dtype=np.float32)
            out = np.full_like(q, np.nan)
            table = c.block_table(ids)
            seq_lens = c.sequence_lengths(ids)
            self.assertEqual(c.decode_workspace_size(1, 3, 8, 48), 0)
            c.decode_attention(1, q, out, seq_lens, table, max_seq_len=48)
            start = 0
            for b, n in enumerate(lens):
                for h in range(8):
                    kk, vv = k[start:start + n, h // 4], v[start:start + n, h // 4]
                    s = kk @ q[b, h] / 8.0
                    p = np.exp(s - s.max())
                    np.testing.assert_allclose(out[b, h], (p / p.sum()) @ vv, rtol=1e-5, atol=1e-5)
                start += n
            csr = c.block_table_csr(ids)
            out2 = np.full_like(q, np.nan)
            c.decode_attention(1, q, out2, seq_lens, csr.indices[:csr.num_indices],
                               indptr=csr.indptr, max_seq_len=48)
            np.testing.assert_array_equal(out, out2)
            for kwargs, needle in (
                    (dict(query=q[:, :, :32].copy()), "query has head_dim 32"),
                    (dict(query=q[:, ::2]), "query must be contiguous"),
                    (dict(out=np.zeros((3, 8, 64), dtype=np.float16)), "out has dtype float16"),
                    (dict(seq_lens=seq_lens.astype(np.int64)), "int32"),
                    (dict(block_table=table[:2]), "block_table has 2 entries; 3"),
                    (dict(query=q.astype(np.float16), out=out.astype(np.float16)),
                     "q_dtype f16 does not fit a f32 cache")):
                args = dict(layer=1, query=q, out=out2, seq_lens=seq_lens, block_table=table,
                            max_seq_len=48)
                args.update(kwargs)
                out2[:] = 5
                with self.assertRaises(KvCacheError) as e:
                    c.decode_attention(**args)
                self.assertEqual(e.exception.status, Status.INVALID_ARGUMENT, needle)
                self.assertIn(needle, e.exception.message)
                self.assertTrue((out2 == 5).all())

    def test_copy_blocks(self):
        with small_cache() as c:
            c.add_sequence(1, prompt(20))
            slots = c.slot_mapping([1]).slots
            k = bf16_bits((20, 2, 64))
            c.store_kv(0, k, k, slots, src_dtype="bf16")
            src = c.block_ids(1)[1]
            c.copy_blocks([src], [9], num_tokens=np.array([3], dtype=np.uint32))
            got = read_layer(c, 0, [9 * 16 + t for t in range(3)], np.uint16)
            np.testing.assert_array_equal(got[0], k[16:19])
            with self.assertRaises(KvCacheError) as e:
                c.copy_blocks([src], [9, 10])
            self.assertIn("differ in length", e.exception.message)
            with self.assertRaises(KvCacheError) as e:
                c.copy_blocks([src], [99])
            self.assertIn("dst[0] = 99 is outside", e.exception.message)


if __name__ == "__main__":
    unittest.main()
