#!/usr/bin/env python3
"""Beam search on kvcache's stateful cache (OpenVINO's stateful mode) from
Python, on the CPU backend with random K/V in NumPy arrays: a prompt in
every beam, then per step a reorder by the surviving beams (only beam
table entries move, no K/V), one new token per beam and layer appended in
place (the layers grow on staggered steps), and decode attention reading
each beam's history through the beam table. At the end the best beam is
saved and restored into a fresh cache, and the beams are compacted: the
decode output must not change. Checks what it prints and exits non-zero
when something is off (ctest runs it).

    KVCACHE_LIBRARY=build/libkvcache.so.0 PYTHONPATH=bindings/python \\
        python3 examples/python/beam_search.py
"""
import sys

import numpy as np

import kvcache

LAYERS, KV_HEADS, Q_HEADS, HEAD_DIM, BEAMS, STEPS = 4, 2, 8, 64, 4, 100
rng = np.random.default_rng(2024)
model = dict(num_layers=LAYERS, kv_heads=KV_HEADS, head_dim=HEAD_DIM, dtype="f32", device="cpu")


def append_all(cache, tokens):
    """Random K/V of `tokens` new tokens for every beam, in every layer:
    [beams, kv_heads, tokens, head_dim] (the HND layout)."""
    for layer in range(LAYERS):
        k = rng.standard_normal((BEAMS, KV_HEADS, tokens, HEAD_DIM), dtype=np.float32)
        v = rng.standard_normal((BEAMS, KV_HEADS, tokens, HEAD_DIM), dtype=np.float32)
        cache.append(layer, k, v)


def decode_all(cache, query):
    """Decode attention of every layer; the outputs of the last one."""
    out = np.empty_like(query)
    for layer in range(LAYERS):
        cache.decode(layer, query, out)
    return out


with kvcache.StatefulCache(batch=BEAMS, growth_step=32, **model) as cache:
    print(cache)
    append_all(cache, 20)                                  # the prompt, in every beam
    query = rng.standard_normal((BEAMS, Q_HEADS, HEAD_DIM), dtype=np.float32)
    gathered = 0  # positions a gather of every beam would have copied per layer
    for step in range(STEPS):
        a, b = rng.integers(BEAMS, size=2)
        beam_idx = np.array([a, a, b, b], dtype=np.int32)  # two beams survive, each forked
        cache.reorder(beam_idx)
        gathered += BEAMS * cache.lengths(0)[0]
        append_all(cache, 1)
        out = decode_all(cache, query)
        if step % 25 == 0:
            print("step %d: beams from %s, lengths %s" % (step, beam_idx.tolist(),
                                                          cache.lengths(0)))
    st = cache.stats()
    print("%d reorders moved %d table entries (a gather would have copied %d positions per "
          "layer); %d bytes held, peak %d, %d layer growths"
          % (st.reorders, st.table_entries_copied, gathered, st.bytes_allocated, st.peak_bytes,
             st.reallocations))
    growth_steps = set()
    for layer in range(LAYERS):
        ls = cache.layer_stats(layer)
        print("layer %d: capacity %d (offset %d), %d growths, last at length %d"
              % (layer, ls.capacity, ls.growth_offset, ls.reallocations, ls.last_growth_length))
        growth_steps.add(ls.last_growth_length)

    # Save beam 0 (read through the beam table) and restore it elsewhere.
    state = cache.export_row(0)
    with kvcache.StatefulCache(batch=1, **model) as single:
        single.import_row(0, state)
        restored = np.empty((1, Q_HEADS, HEAD_DIM), np.float32)
        single.decode(LAYERS - 1, query[:1], restored)
    print("beam 0 saved: %d bytes, restored into a batch-1 cache of length %d"
          % (len(state), cache.lengths(0)[0]))

    before = decode_all(cache, query)
    cache.compact()
    after = decode_all(cache, query)
    print("compacted: table bytes %d; decode output %s"
          % (cache.stats().table_bytes, "unchanged" if np.array_equal(before, after)
             else "CHANGED"))

    ok = (cache.lengths(0) == [20 + STEPS] * BEAMS and st.reorders > 0
          and st.table_entries_copied < gathered and len(growth_steps) == LAYERS
          and np.isfinite(out).all() and np.array_equal(before, after)
          and np.array_equal(restored[0], before[0]) and cache.stats().table_bytes == 0)
    try:
        cache.reorder([0, 1, 2, BEAMS])
    except kvcache.KvCacheError as e:
        print("refused as expected: %s" % e)
        ok = ok and e.status == kvcache.Status.INVALID_ARGUMENT
print("beam_search: %s" % ("OK" if ok else "FAILED"))
sys.exit(0 if ok else 1)
