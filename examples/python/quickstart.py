#!/usr/bin/env python3
"""kvcache from Python, on the CPU backend with NumPy buffers: two requests
sharing a system prompt, the second reusing the first one's blocks; K/V
stored through the store kernel, one decode step with its block tables and
paged decode attention, statistics. Checks what it prints and exits
non-zero when something is off (ctest runs it).

    KVCACHE_LIBRARY=build/libkvcache.so.0 PYTHONPATH=bindings/python \\
        python3 examples/python/quickstart.py
"""
import sys

import numpy as np

import kvcache

LAYERS, KV_HEADS, Q_HEADS, HEAD_DIM = 2, 2, 8, 64
rng = np.random.default_rng(0)

# On CUDA (device="cuda:0") the pool takes the least of max_tokens and
# free_gpu_memory_fraction (default 0.9!) of the free GPU memory: in a
# process that also holds a model, bound it with either.
config = kvcache.Config(num_layers=LAYERS, kv_heads=KV_HEADS, head_dim=HEAD_DIM, dtype="f32",
                        tokens_per_block=16, device="cpu", max_tokens=4096,
                        free_gpu_memory_fraction=0.3)
with config, kvcache.Cache(config) as cache:
    print(cache)
    system = list(range(100, 148))                  # 48 tokens: three full blocks
    first, second = system + [1, 2, 3], system + [7, 8]

    def prefill(ids):
        """Stores random K/V for every new token of `ids` in every layer."""
        slots = cache.slot_mapping(ids).slots       # -1 for tokens found cached
        for layer in range(LAYERS):
            k = rng.standard_normal((len(slots), KV_HEADS, HEAD_DIM), dtype=np.float32)
            v = rng.standard_normal((len(slots), KV_HEADS, HEAD_DIM), dtype=np.float32)
            cache.store_kv(layer, k, v, slots)
        return slots

    cached = cache.add_sequence(1, first)
    prefill([1])
    cache.commit(1, len(first))                     # its full blocks become reusable
    cached2 = cache.add_sequence(2, second)
    slots2 = prefill([2])
    cache.commit(2, len(second))
    print("request 1: %d of %d prompt tokens cached" % (cached, len(first)))
    print("request 2: %d of %d prompt tokens cached, %d computed"
          % (cached2, len(second), int((slots2 >= 0).sum())))

    # One decode step: a token for each, the tables, attention per layer.
    ids = np.array([1, 2], dtype=np.uint64)
    cache.batch_extend(ids, np.array([11, 12], dtype=np.int32))
    prefill(ids)
    table = cache.block_table(ids)
    lengths = cache.sequence_lengths(ids)
    query = rng.standard_normal((2, Q_HEADS, HEAD_DIM), dtype=np.float32)
    out = np.empty_like(query)
    cache.decode_attention(0, query, out, lengths, table, max_seq_len=64)
    print("decode step: lengths %s, block tables %s" % (lengths.tolist(), table.tolist()))
    stats = cache.stats()
    print("stats: %d blocks in use, %d reused, hit rate %.2f"
          % (stats.in_use_blocks, stats.reused_blocks, stats.hit_rate))

    ok = (cached == 0 and cached2 == 48 and table[0][:3].tolist() == table[1][:3].tolist()
          and lengths.tolist() == [52, 51] and np.isfinite(out).all() and stats.reused_blocks == 3)
    try:
        cache.add_sequence(1, [5])
    except kvcache.KvCacheError as e:
        print("refused as expected: %s" % e)
        ok = ok and e.status == kvcache.Status.ALREADY_EXISTS
print("quickstart: %s" % ("OK" if ok else "FAILED"))
sys.exit(0 if ok else 1)
