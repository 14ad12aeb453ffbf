#!/usr/bin/env python3
"""Per-call overhead of the Python binding against the same C calls, in one
process and run: describe, adding (and removing) a cached 4K-token prompt,
and the bookkeeping of a decode step of 64 sequences (kvc_batch_extend,
slot mapping, padded block table, lengths; then the same with the commits
of the blocks that filled). The C loops (bench/python/c_loops.c, built here
with cc) run the calls `iters` times inside one ctypes call; the Python
loops make them through kvcache.Cache with NumPy buffers allocated once.

    python3 bench/python/overhead.py --build build [--repeats 7] [--markdown out.md]

Prints a table: median over the repeats of wall and thread-CPU ns per call
(per step), and the Python layer's overhead over C. The goal of issue 19:
a decode step's bookkeeping of 64 sequences under 50 us from Python.
"""
import argparse
import ctypes
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))


def build_loops(build):
    out = os.path.join(tempfile.mkdtemp(), "libkvc_pyloops.so")
    cmd = ["cc", "-O2", "-shared", "-fPIC", os.path.join(HERE, "c_loops.c"),
           "-I", os.path.join(ROOT, "include"), "-I", os.path.join(build, "include"),
           "-L", build, "-lkvcache", "-Wl,-rpath," + os.path.abspath(build), "-o", out]
    subprocess.run(cmd, check=True)
    return ctypes.CDLL(out)


def timed(fn, iters, repeats):
    """Median (wall ns, thread-CPU ns) per iteration over `repeats` runs."""
    walls, cpus = [], []
    fn(max(iters // 10, 1))  # warm up
    for _ in range(repeats):
        w0, c0 = time.perf_counter_ns(), time.thread_time_ns()
        fn(iters)
        walls.append((time.perf_counter_ns() - w0) / iters)
        cpus.append((time.thread_time_ns() - c0) / iters)
    return statistics.median(walls), statistics.median(cpus)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--markdown")
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    os.environ.setdefault("KVCACHE_LIBRARY", os.path.join(build, "libkvcache.so.0"))
    sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))
    import numpy as np
    import kvcache
    loops = build_loops(build)
    vp, i64, u64, sz = ctypes.c_void_p, ctypes.c_int64, ctypes.c_uint64, ctypes.c_size_t
    loops.loop_describe.argtypes = [vp, i64]
    loops.loop_add_remove.argtypes = [vp, u64, vp, sz, i64]
    loops.loop_decode_steps.argtypes = [vp, vp, vp, sz, vp, vp, sz, vp, ctypes.c_uint32,
                                        ctypes.c_int, i64]

    def check(rc):
        if rc != 0:
            raise RuntimeError("C loop failed with %d: %s" % (rc, kvcache._capi.lib.kvc_last_error_message()))

    # A small model: the calls' cost does not depend on the KV bytes.
    settings = dict(num_layers=1, kv_heads=1, head_dim=64, dtype="bf16", tokens_per_block=16,
                    device="cpu", max_tokens=1 << 20)
    rows = []

    with kvcache.Cache(**settings) as cache:
        h = cache._handle
        c = timed(lambda n: check(loops.loop_describe(h, n)), 200000, args.repeats)
        p = timed(lambda n: [cache.describe() for _ in range(n)], 50000, args.repeats)
        rows.append(("describe (kvc_cache_describe)", c, p))

        prompt = np.arange(1000, 1000 + 4096, dtype=np.int32)
        cache.add_sequence(1, prompt)
        cache.commit(1, 4096)
        cache.remove_sequence(1)

        def py_add(n):
            for _ in range(n):
                cache.add_sequence(2, prompt)
                cache.remove_sequence(2)
        addr = prompt.ctypes.data
        c = timed(lambda n: check(loops.loop_add_remove(h, 2, addr, 4096, n)), 20000, args.repeats)
        p = timed(py_add, 10000, args.repeats)
        rows.append(("sequence_add of a cached 4K prompt + remove", c, p))

    batch, prompt_len = 64, 512
    for commit in (False, True):
        results = []
        for side in ("C", "Python", "DecodeStep"):
            with kvcache.Cache(**settings) as cache:
                ids = np.arange(1, batch + 1, dtype=np.uint64)
                for i in ids:
                    cache.add_sequence(int(i), np.arange(prompt_len, dtype=np.int32) + int(i) * 7919)
                cache.slot_mapping(ids)  # the prompts' slots
                tokens = np.full(batch, 5, dtype=np.int32)
                slots = np.empty(batch, dtype=np.int64)
                max_blocks = 512
                table = np.empty((batch, max_blocks), dtype=np.int32)
                lengths = np.empty(batch, dtype=np.int32)
                h = cache._handle

                def c_steps(n):
                    check(loops.loop_decode_steps(h, ids.ctypes.data, tokens.ctypes.data, batch,
                                                  slots.ctypes.data, table.ctypes.data,
                                                  max_blocks, lengths.ctypes.data, 16,
                                                  int(commit), n))

                def py_steps(n):
                    for _ in range(n):
                        cache.batch_extend(ids, tokens)
                        cache.slot_mapping(ids, slots)
                        cache.block_table(ids, table)
                        cache.sequence_lengths(ids, lengths)
                        if commit:
                            for s in np.flatnonzero(lengths % 16 == 0):
                                cache.commit(int(ids[s]), int(lengths[s]))
                step = cache.decode_step(ids, max_blocks)
                step.tokens[:] = tokens

                def step_steps(n):
                    for _ in range(n):
                        step.run()
                        if commit:
                            step.commit_full_blocks()
                # 16-step multiples keep the commits at their average (4 a step).
                fn = {"C": c_steps, "Python": py_steps, "DecodeStep": step_steps}[side]
                results.append(timed(fn, 320, args.repeats))
        name = ("decode step, 64 sequences: extend + slots + table + lengths" +
                (" + commits of filled blocks (4/step avg)" if commit else ""))
        rows.append((name + " (the four Cache calls)", results[0], results[1]))
        rows.append((name + " (Cache.decode_step)", results[0], results[2]))

    lines = ["| call | C wall ns | C cpu ns | Python wall ns | Python cpu ns | "
             "overhead (cpu ns) | Python / C (cpu) |", "|---|---:|---:|---:|---:|---:|---:|"]
    for name, (cw, cc), (pw, pc) in rows:
        lines.append("| %s | %.0f | %.0f | %.0f | %.0f | %.0f | %.2fx |"
                     % (name, cw, cc, pw, pc, pc - cc, pc / cc))
    lines.append("")
    for label, r in (("the four Cache calls", rows[-2]), ("Cache.decode_step", rows[-1])):
        us = r[2][1] / 1000.0
        lines.append("Decode-step bookkeeping of 64 sequences with commits through %s: %.1f us "
                     "cpu (goal < 50 us: %s)." % (label, us, "met" if us < 50 else "MISSED"))
    text = "\n".join(lines)
    print("kvcache %s (%s), Python %s, NumPy %s, %s"
          % (kvcache.version_string(), kvcache.library_path, platform.python_version(),
             np.__version__, platform.processor() or platform.machine()))
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
