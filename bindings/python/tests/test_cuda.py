"""The binding on a CUDA cache with torch tensors (GPU machines only; skipped
elsewhere): the strided store from [batch, kv_heads, n, dim] views read back
bit for bit from the pool, tensors through DLPack only, torch streams, and
the refusals of host memory, another device's or dtype's tensors."""
import unittest

import kvcache
from kvcache import KvCacheError, Status

try:
    import torch
except ImportError:
    torch = None

HAVE_CUDA = (torch is not None and torch.cuda.is_available() and
             bool(kvcache.features() & kvcache.Feature.CUDA_DEVICE))


class DLPackOnly:
    def __init__(self, t):
        self.t = t

    def __dlpack__(self, stream=None):
        return self.t.__dlpack__()

    def __dlpack_device__(self):
        return self.t.__dlpack_device__()


@unittest.skipUnless(HAVE_CUDA, "needs torch with CUDA and a CUDA build of libkvcache")
class CudaTest(unittest.TestCase):
    def setUp(self):
        self.c = kvcache.Cache(num_layers=2, kv_heads=4, head_dim=128, dtype="bf16",
                               tokens_per_block=16, device="cuda:0", max_tokens=1024,
                               free_gpu_memory_fraction=0.1)
        self.c.add_sequence(1, list(range(40)))
        self.c.add_sequence(2, list(range(100, 140)))
        self.slots = torch.from_numpy(self.c.slot_mapping([1, 2]).slots).cuda()

    def tearDown(self):
        torch.cuda.synchronize()
        self.c.close()

    def pool_layer(self, layer):
        v = self.c.layer_view(layer)

        class Pool:
            __cuda_array_interface__ = {
                "shape": (v.num_blocks, v.kv_factor, v.tokens_per_block, v.kv_heads, v.head_dim),
                "strides": (v.block_stride, v.kv_stride, v.token_stride, v.head_stride, 2),
                "typestr": "<i2", "data": (v.base, False), "version": 3}
        return torch.as_tensor(Pool(), device="cuda")

    def read_back(self, layer):
        """[2, tokens, heads, dim] int16 of the 80 slots."""
        p = self.pool_layer(layer)
        s = self.slots
        return p[s // 16, :, s % 16].permute(1, 0, 2, 3)

    def test_strided_store_round_trips(self):
        stream = torch.cuda.Stream()
        big_k = torch.randn(2, 4, 50, 128, device="cuda", dtype=torch.bfloat16)
        v = torch.randn(2, 40, 4, 128, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
        k = big_k[:, :, 5:45]
        with torch.cuda.stream(stream):
            self.c.store_kv(1, k, v, self.slots, stream=stream)
            self.c.store_kv(0, DLPackOnly(k), DLPackOnly(v), DLPackOnly(self.slots),
                            stream=stream.cuda_stream)
        stream.synchronize()
        self.assertIsNone(self.c.async_error(stream))
        want_k = k.transpose(1, 2).reshape(80, 4, 128).view(torch.int16)
        want_v = v.transpose(1, 2).reshape(80, 4, 128).view(torch.int16)
        for layer in (0, 1):
            got = self.read_back(layer)
            self.assertTrue(torch.equal(got[0], want_k), layer)
            self.assertTrue(torch.equal(got[1], want_v), layer)

    def test_decode_attention_on_torch_tensors(self):
        k = torch.randn(1, 4, 40, 128, device="cuda", dtype=torch.bfloat16)
        slots = torch.from_numpy(self.c.slot_mapping([1]).slots).cuda()  # nothing new: empty
        self.assertEqual(slots.numel(), 0)
        self.c.store_kv(1, k, k, self.slots[:40])
        q = torch.randn(1, 16, 128, device="cuda", dtype=torch.bfloat16)
        out = torch.empty_like(q)
        table = torch.from_numpy(self.c.block_table([1])).cuda()
        lens = torch.from_numpy(self.c.sequence_lengths([1])).cuda()
        ws = torch.empty(self.c.decode_workspace_size(1, 1, 16, 64), dtype=torch.uint8,
                         device="cuda")
        self.c.decode_attention(1, q, out, lens, table, max_seq_len=48, workspace=ws)
        ref = torch.nn.functional.scaled_dot_product_attention(
            q.unsqueeze(2).float(), k.float(), k.float(), enable_gqa=True)[:, :, 0]
        self.assertLess((out.float() - ref).abs().max().item(), 2e-2)

    def test_refusals(self):
        import numpy as np
        k = torch.randn(80, 4, 128, device="cuda", dtype=torch.bfloat16)
        cases = [
            (dict(key=np.zeros((80, 4, 128), np.uint16)), "key is host memory"),
            (dict(key=k.cpu()), "key is host memory"),
            (dict(key=k.float()), "key has dtype float32 but src_dtype is bf16"),
            (dict(key=k.half()), "key has dtype float16 but src_dtype is bf16"),
            (dict(key=torch.randn(80, 4, 256, device="cuda", dtype=torch.bfloat16)[..., ::2]),
             "contiguous in its last"),
            (dict(slot_mapping=self.slots.int()), "int64"),
            (dict(slot_mapping=self.slots.cpu()), "slot_mapping is host memory"),
            (dict(stream="default"), "stream must be"),
        ]
        if torch.cuda.device_count() > 1:
            cases.append((dict(key=k.to("cuda:1")), "key is on cuda:1 but the cache is on cuda:0"))
        for kwargs, needle in cases:
            args = dict(layer=0, key=k, value=k, slot_mapping=self.slots, src_dtype="bf16")
            args.update(kwargs)
            with self.assertRaises(KvCacheError) as e:
                self.c.store_kv(**args)
            self.assertEqual(e.exception.status, Status.INVALID_ARGUMENT, needle)
            self.assertIn(needle, e.exception.message)
        with self.assertRaises(KvCacheError) as e:
            self.c.pool_memory()
        self.assertEqual(e.exception.status, Status.UNSUPPORTED)


if __name__ == "__main__":
    unittest.main()
