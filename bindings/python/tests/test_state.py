"""State resources (state.h): describe with n_groups met and not, slots
through add/fork/remove and a refusal, fork copying the state bit for bit,
bad input; state snapshots: publish, reuse restoring the published bytes,
rewind to a snapshot, the counters."""
import ctypes
import unittest

import kvcache
from kvcache import ResourceKind, ResourceReason, Status


def hybrid(slots):
    # 1 attention layer; SSM 2x4x8 f32, conv 24x4 (n_groups 1: 4*2 + 2*1*8),
    # conv 17x4 (local), generic 100 B aligned 512, unpaged 16 B x 32 tokens.
    with kvcache.Config(num_layers=1, kv_heads=1, head_dim=8, primary_bytes=1 << 20,
                        max_state_slots=slots) as c:
        assert c.add_ssm_state(2, 4, 8, "f32") == 0
        assert c.add_conv_state(24, 4, "f32") == 1
        assert c.add_conv_state(17, 4, "f32") == 2
        assert c.add_generic_state(100, 512) == 3
        assert c.add_unpaged_resource(16, 32) == 4
        assert c.num_resources == 5 and c.max_state_slots == slots
        return kvcache.Cache(c)


def pattern(cache, id, seed, write):
    """Writes seed's pattern into every slot of sequence id, or checks it."""
    same = True
    for r, slot in enumerate(cache.state_slots([id])[0]):
        v = cache.describe_resource(r)
        want = bytes((b * 7 + seed + r) & 0xFF for b in range(v.slot_bytes))
        at = v.base + slot * v.slot_stride
        if write:
            ctypes.memmove(at, want, v.slot_bytes)
        else:
            same = same and ctypes.string_at(at, v.slot_bytes) == want
    return same


class StateTest(unittest.TestCase):
    def test_snapshots_publish_reuse_rewind(self):
        with kvcache.Config(num_layers=1, kv_heads=1, head_dim=8, tokens_per_block=4,
                            primary_bytes=1 << 20, max_state_slots=4,
                            max_state_snapshots=3) as c:
            self.assertEqual(c.max_state_snapshots, 3)
            c.add_ssm_state(2, 4, 8, "f32")
            c.add_conv_state(24, 4, "f32")
            cache = kvcache.Cache(c)
        with cache:
            tokens = list(range(100, 112))
            self.assertEqual(cache.add_sequence(1, tokens[:10]), 0)
            pattern(cache, 1, 8, True)
            cache.commit(1, 8)
            cache.publish_state(1, 8)
            with self.assertRaises(kvcache.KvCacheError) as e:
                cache.publish_state(1, 6)
            self.assertEqual(e.exception.status, Status.INVALID_ARGUMENT)
            self.assertIn("position 6 is not a positive multiple", str(e.exception))
            # Speculative decoding: drafts run; the state goes back to 8 only.
            cache.extend_sequence(1, tokens[10:12])
            pattern(cache, 1, 99, True)
            with self.assertRaises(kvcache.KvCacheError) as e:
                cache.rewind(1, 3)
            self.assertEqual(e.exception.status, Status.INVALID_STATE)
            cache.rewind(1, 4)
            self.assertTrue(pattern(cache, 1, 8, False))
            cache.remove_sequence(1)
            self.assertEqual(cache.add_sequence(2, tokens), 8)
            self.assertTrue(pattern(cache, 2, 8, False))
            s = cache.snapshot_stats()
            self.assertEqual((s.num_slots, s.slots_used, s.published, s.hits, s.hit_tokens,
                              s.restores, s.evicted, s.dropped), (3, 1, 1, 1, 8, 1, 0, 0))
            self.assertEqual((s.bytes_per_snapshot, s.bytes), (256 + 384, 3 * (256 + 512)))
            cache.check()
        with kvcache.Config(max_state_snapshots=kvcache.STATE_SNAPSHOTS_NONE) as c:
            self.assertEqual(c.max_state_snapshots, kvcache.STATE_SNAPSHOTS_NONE)

    def test_snapshots_offload_to_the_host(self):
        # One slot of every resource is 256 + 512 bytes: a quarter of 4096
        # host bytes holds one host snapshot.
        with kvcache.Config(num_layers=1, kv_heads=1, head_dim=8, tokens_per_block=4,
                            primary_bytes=1 << 20, max_state_slots=4, max_state_snapshots=1,
                            host_cache_bytes=4096) as c:
            c.add_ssm_state(2, 4, 8, "f32")
            c.add_conv_state(24, 4, "f32")
            cache = kvcache.Cache(c)
        with cache:
            a, b = list(range(1, 11)), list(range(11, 21))
            for i, p in enumerate((a, b)):
                self.assertEqual(cache.add_sequence(i + 1, p), 0)
                pattern(cache, i + 1, 8 + i, True)
                cache.commit(i + 1, 8)
                cache.publish_state(i + 1, 8)  # b's moves a's snapshot to the host
                cache.remove_sequence(i + 1)
            self.assertEqual(cache.add_sequence(3, a), 8)
            self.assertTrue(pattern(cache, 3, 8, False))
            s = cache.snapshot_stats()
            self.assertEqual((s.host_num_slots, s.host_slots_used, s.host_bytes),
                             (1, 1, 256 + 512))
            self.assertEqual((s.offloaded, s.onboarded, s.host_evicted, s.evicted),
                             (1, 1, 0, 0))
            cache.check()

    def test_describe_slots_and_fork_copy(self):
        with hybrid(2) as cache:
            d = cache.describe()
            self.assertEqual((d.num_resources, d.num_state_slots), (5, 2))
            conv = cache.describe_resource(1)
            self.assertEqual(conv.kind, ResourceKind.CONV)
            self.assertEqual((conv.managed, conv.n_groups), (1, 1))
            bad = cache.describe_resource(2)
            self.assertEqual((bad.managed, bad.reason), (0, ResourceReason.N_GROUPS))
            self.assertIn("no integer n_groups", bad.reason_text)
            ssm = cache.describe_resource(0)
            self.assertEqual((ssm.stride0, ssm.stride1, ssm.stride2), (128, 32, 4))
            self.assertEqual(ssm.dtype, kvcache.DType.F32)

            cache.add_sequence(1, [1, 2, 3])
            s1 = cache.state_slots([1])[0]
            views = [cache.describe_resource(r) for r in range(5)]
            for r, v in enumerate(views):
                data = bytes((b * 13 + r) & 0xFF for b in range(v.slot_bytes))
                ctypes.memmove(v.base + s1[r] * v.slot_stride, data, v.slot_bytes)
            cache.fork(1, 2)
            s2 = cache.state_slots([2])[0]
            for r, v in enumerate(views):
                self.assertNotEqual(s1[r], s2[r])
                self.assertEqual(ctypes.string_at(v.base + s1[r] * v.slot_stride, v.slot_bytes),
                                 ctypes.string_at(v.base + s2[r] * v.slot_stride, v.slot_bytes))
            with self.assertRaises(kvcache.KvCacheError) as e:
                cache.add_sequence(3, [1])
            self.assertEqual(e.exception.status, Status.OUT_OF_BLOCKS)
            self.assertIn("no free state slot", str(e.exception))
            self.assertEqual(cache.describe_resource(0).slots_used, 2)
            cache.remove_sequence(1)
            self.assertEqual(cache.state_slots([2], 0), [1])
            cache.check()
            with self.assertRaises(kvcache.KvCacheError) as e:
                cache.rewind(2, 1)
            self.assertEqual(e.exception.status, Status.INVALID_STATE)

    def test_bad_input(self):
        with kvcache.Config() as c:
            with self.assertRaises(kvcache.KvCacheError) as e:
                c.add_ssm_state(0, 4, 8, "f32")
            self.assertEqual(e.exception.status, Status.INVALID_ARGUMENT)
            self.assertIn("num_heads must be > 0, got 0", str(e.exception))
            self.assertEqual(c.num_resources, 0)
        with hybrid(2) as cache:
            with self.assertRaises(kvcache.KvCacheError) as e:
                cache.describe_resource(5)
            self.assertEqual(e.exception.status, Status.INVALID_ARGUMENT)
            with self.assertRaises(kvcache.KvCacheError) as e:
                cache.state_slots([7], 0)
            self.assertEqual(e.exception.status, Status.NOT_FOUND)


if __name__ == "__main__":
    unittest.main()
