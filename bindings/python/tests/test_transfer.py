"""Block export/import between two caches (transfer.h): the bytes copied
between the blocks the export and the import name land bit for bit and
serve the receiver's adds; another prompt or salt is refused with nothing
changed; an abort gives every block back."""
import ctypes
import unittest

import kvcache
from kvcache import Status


def cache():
    return kvcache.Cache(num_layers=2, kv_heads=2, head_dim=8, dtype="f32", tokens_per_block=4,
                         max_tokens=256)


def block(c, id):
    """The bytes of block `id` of group 0 (a CPU cache: host memory)."""
    v = c.layer_view(0)
    n = c.describe_group(0).block_bytes
    return (ctypes.c_ubyte * n).from_address(v.base + id * v.block_stride)


def prefill(c, id, tokens):
    c.add_sequence(id, tokens)
    for b, blk in enumerate(c.block_ids(id, 0)):
        data = block(c, blk)
        for i in range(len(data)):
            data[i] = (b * 31 + i * 7) & 0xff
    c.commit(id, len(tokens))


class TransferTest(unittest.TestCase):
    def test_blocks_move_bit_for_bit_and_serve_the_receivers_adds(self):
        with cache() as a, cache() as b:
            prompt = list(range(100, 100 + 6 * 4 + 1))
            prefill(a, 1, prompt)
            with a.export_sequence(1) as exp:
                d = exp.describe()
                self.assertEqual(d, kvcache.TransferDescription(
                    num_groups=1, tokens_per_block=4, seq_id=1, num_blocks=6, first_block=0,
                    num_tokens=24, keys_bytes=d.keys_bytes))
                keys = exp.keys()
                self.assertEqual(len(keys), d.keys_bytes)
                self.assertEqual(keys[:8], b"KVCXFERK")
                src = exp.block_ids(0)
                self.assertEqual(len(src), 6)
                with b.import_begin(7, prompt, keys) as imp:
                    self.assertEqual(imp.describe(), kvcache.TransferDescription(
                        num_groups=1, tokens_per_block=4, seq_id=7, num_blocks=6, first_block=0,
                        num_tokens=24, keys_bytes=0))
                    dst = imp.block_ids(0)
                    for i, to in enumerate(dst):
                        ctypes.memmove(block(b, to), block(a, src[i]), len(block(a, src[i])))
                    with self.assertRaises(kvcache.KvCacheError) as e:
                        imp.complete(1)
                    self.assertEqual(e.exception.status, Status.INVALID_ARGUMENT)
                    self.assertIn("expects 6", str(e.exception))
                    imp.complete(len(dst))
                    with self.assertRaises(kvcache.KvCacheError) as e:
                        imp.abort()
                    self.assertEqual(e.exception.status, Status.INVALID_STATE)
            b.remove_sequence(7)
            self.assertEqual(b.add_sequence(8, prompt), 24)
            ids = b.block_ids(8, 0)
            src = a.block_ids(1, 0)
            for i in range(6):
                self.assertEqual(bytes(block(b, ids[i])), bytes(block(a, src[i])), i)

    def test_another_prompt_or_salt_is_refused_and_an_abort_gives_everything_back(self):
        with cache() as a, cache() as b:
            prompt = list(range(5, 29))
            prefill(a, 1, prompt)
            with a.export_sequence(1) as exp:
                keys = exp.keys()
            before = b.stats()
            other = list(prompt)
            other[9] += 1
            with self.assertRaises(kvcache.KvCacheError) as e:
                b.import_begin(7, other, keys)
            self.assertEqual(e.exception.status, Status.INVALID_ARGUMENT)
            self.assertIn("block 2 differs", str(e.exception))
            with self.assertRaises(kvcache.KvCacheError) as e:
                b.import_begin(7, prompt, keys, salt=b"tenant")
            self.assertIn("another cache salt", str(e.exception))
            with self.assertRaises(kvcache.KvCacheError) as e:
                b.import_begin(7, prompt, keys[:-1])
            self.assertIn("truncated", str(e.exception))
            self.assertEqual(b.stats(), before)

            imp = b.import_begin(7, prompt, keys)
            self.assertEqual(b.stats().num_sequences, 1)
            imp.abort()
            imp.close()
            imp.close()
            self.assertEqual(b.stats(), before)
            with self.assertRaises(kvcache.KvCacheError) as e:
                imp.describe()
            self.assertEqual(e.exception.status, Status.INVALID_STATE)

    def test_a_cache_closed_first_leaves_handles_that_only_free(self):
        a = cache()
        prefill(a, 1, list(range(8)))
        exp = a.export_sequence(1)
        a.close()
        self.assertEqual(exp.describe().num_blocks, 2)
        exp.close()


class PoolShareTest(unittest.TestCase):
    """Sharing pool memory with another process is the CUDA backend's
    (tests/gpu/test_ipc_transfer_gpu.cpp): on the CPU backend both calls
    raise UNSUPPORTED with the reason; the records and arguments still go
    through."""

    def test_cpu_backend_refuses_with_the_reason(self):
        with cache() as c:
            with self.assertRaises(kvcache.KvCacheError) as e:
                c.describe_pool_share()
            self.assertEqual(e.exception.status, Status.UNSUPPORTED)
            self.assertIn("the cpu device cannot share pool memory with another process",
                          str(e.exception))
            with self.assertRaises(kvcache.KvCacheError) as e:
                c.export_pool_chunk(0)
            self.assertEqual(e.exception.status, Status.UNSUPPORTED)
            with self.assertRaises(kvcache.KvCacheError) as e:
                c.describe_pool_share(rank=1)
            self.assertEqual(e.exception.status, Status.INVALID_ARGUMENT)
            self.assertIn("rank must be < num_ranks (1), got 1", str(e.exception))
            with self.assertRaises(kvcache.KvCacheError) as e:
                c.export_pool_chunk(0, pool=5)
            self.assertEqual(e.exception.status, Status.INVALID_ARGUMENT)
            self.assertIn("pool must be < num_pools (1), got 5", str(e.exception))

    def test_records_carry_every_field(self):
        self.assertEqual(kvcache.PoolShare._fields,
                         ("device_ordinal", "rank", "pool", "handle_type", "num_chunks",
                          "granularity", "reserved_bytes", "mapped_bytes"))
        self.assertEqual(kvcache.ShareChunk._fields, ("fd", "index", "offset", "size"))
        self.assertEqual(kvcache.ShareHandle.POSIX_FD, 1)


if __name__ == "__main__":
    unittest.main()
