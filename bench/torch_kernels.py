#!/usr/bin/env python3
"""PyTorch peers of the kvcache kernel benchmarks, run in the same session.

Reads the JSON rows that bench_store_kv and bench_decode_attention wrote,
times PyTorch on the same shapes (index_copy_ into the same NHD cache layout
for store; scaled_dot_product_attention on contiguous K/V for decode), and
prints one table per kernel with every figure against its target. With
--out FILE also writes that report as markdown.
"""
import argparse
import datetime
import json
import subprocess

import torch
import torch.nn.functional as F

H_KV, H_Q, D, T = 8, 32, 128, 16


def time_us(fn, reps, samples=9):
    """Median over samples of the mean of `reps` back-to-back calls."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    out = []
    for _ in range(samples):
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        end.synchronize()
        out.append(1000.0 * start.elapsed_time(end) / reps)
    out.sort()
    return out[len(out) // 2]


def rand_bf16(*shape):
    return torch.rand(*shape, device="cuda", dtype=torch.bfloat16) * 2 - 1


def store_peer(tokens, num_slots, gen):
    """index_copy_ of K and V rows into [slots, heads, dim] caches (NHD)."""
    k_cache = rand_bf16(num_slots, H_KV, D)
    v_cache = rand_bf16(num_slots, H_KV, D)
    key, value = rand_bf16(tokens, H_KV, D), rand_bf16(tokens, H_KV, D)
    blocks = torch.randperm(num_slots // T, generator=gen, device="cpu")[: (tokens + T - 1) // T]
    slots = (blocks.repeat_interleave(T)[:tokens] * T + torch.arange(tokens) % T).cuda()

    def run():
        k_cache.index_copy_(0, slots, key)
        v_cache.index_copy_(0, slots, value)

    us = time_us(run, 200 if tokens <= 4096 else 20)
    del k_cache, v_cache
    return us


def sdpa_peers(batch, ctx):
    """SDPA decode (one query token) on contiguous K/V, per backend."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q = rand_bf16(batch, H_Q, 1, D)
    k = rand_bf16(batch, H_KV, ctx, D)
    v = rand_bf16(batch, H_KV, ctx, D)
    kv_bytes = 2 * k.numel() * 2
    reps = max(3, min(100, int(2e9 / kv_bytes)))
    results = {}
    backends = [("default", None), ("flash", SDPBackend.FLASH_ATTENTION),
                ("cudnn", SDPBackend.CUDNN_ATTENTION), ("efficient", SDPBackend.EFFICIENT_ATTENTION)]
    for name, backend in backends:
        try:
            def run():
                if backend is None:
                    F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
                else:
                    with sdpa_kernel(backend):
                        F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
            results[name] = time_us(run, reps)
        except Exception as e:  # a backend that does not take this shape
            results[name] = None
            results[name + "_error"] = str(e).splitlines()[0][:80]
    del q, k, v
    torch.cuda.empty_cache()
    return results


def copy_ceiling_gbs():
    a = rand_bf16(1 << 29)
    b = torch.empty_like(a)
    us = time_us(lambda: b.copy_(a), 5)
    return 2 * a.numel() * 2 / us / 1e3


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--store-json", required=True)
    p.add_argument("--decode-json", required=True)
    p.add_argument("--out")
    p.add_argument("--command", default="")
    args = p.parse_args()
    store = [json.loads(l) for l in open(args.store_json)]
    decode = [json.loads(l) for l in open(args.decode_json)]
    gen = torch.Generator().manual_seed(1)
    torch_copy = copy_ceiling_gbs()

    gpu = torch.cuda.get_device_name(0)
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                              "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
    except OSError:
        smi = gpu
    lines = []
    emit = lambda s="": (print(s), lines.append(s))
    emit(f"# kvcache kernels on {gpu}")
    emit()
    emit(f"- date: {datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}")
    emit(f"- machine: {smi}; torch {torch.__version__}, CUDA {torch.version.cuda}")
    emit(f"- command: `{args.command}`")
    emit(f"- copy ceiling (1 GiB device-to-device, bytes read + written): kvcache bench "
         f"{store[0]['ceiling_gbs']:.0f} GB/s, torch {torch_copy:.0f} GB/s")
    emit()
    emit("## store K/V (8 kv heads, dim 128, bf16, 16-token blocks)")
    emit()
    emit("kvcache us: one call at a time on a stream (host launch included); graph us: per call when "
         "50 calls replay as a CUDA graph (GPU time).")
    emit()
    emit("| layout | tokens | kvcache us | graph us | same-bytes copy us | % of copy | torch index_copy_ us | speedup | targets |")
    emit("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in store:
        pct = 100.0 * r["copy_us"] / r["store_us"]
        torch_us = store_peer(r["tokens"], 1 << 17, gen) if r["layout"] == "NHD" else None
        targets = []
        if r["tokens"] >= 4096:
            targets.append(f">=85% of copy: {'met' if pct >= 85 else 'MISSED'}")
        if r["tokens"] == 256:
            targets.append(f"<=4 us: {'met' if r['store_us'] <= 4 else 'MISSED'} per call, "
                           f"{'met' if 0 < r['graph_us'] <= 4 else 'MISSED'} in a graph")
        if r["tokens"] == 16384 and torch_us:
            targets.append(f">=2.2x torch: {'met' if torch_us / r['store_us'] >= 2.2 else 'MISSED'}")
        graph = f"{r['graph_us']:.2f}" if r["graph_us"] > 0 else "-"
        emit(f"| {r['layout']} | {r['tokens']} | {r['store_us']:.2f} | {graph} | {r['copy_us']:.2f} | {pct:.0f}% | "
             + (f"{torch_us:.2f} | {torch_us / r['store_us']:.2f}x" if torch_us else "- | -")
             + f" | {'; '.join(targets) or '-'} |")
    emit()
    emit("## decode attention (32 q heads, 8 kv heads, dim 128, bf16, 16-token blocks)")
    emit()
    emit("torch: `scaled_dot_product_attention(q, k, v, enable_gqa=True)` on contiguous "
         "[batch, heads, context, dim] K/V; the peer is the fastest backend that ran.")
    emit()
    emit("| layout | batch | context | kvcache us | torch us (backend) | speed vs torch | KV GB/s | % of copy | targets |")
    emit("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    peers = {}
    for r in decode:
        key = (r["batch"], r["context"])
        if key not in peers:
            peers[key] = sdpa_peers(*key)
        res = peers[key]
        ran = {k: v for k, v in res.items() if not k.endswith("_error") and v is not None}
        best = min(ran, key=ran.get) if ran else None
        gbs = r["kv_bytes"] / r["us"] / 1e3
        pct = 100.0 * gbs / r["ceiling_gbs"]
        targets = []
        if best:
            speed = ran[best] / r["us"]
            targets.append(f">=90% of torch: {'met' if speed >= 0.9 else 'MISSED'}")
        if r["batch"] == 1 and r["context"] == 32768:
            targets.append(f">=75% of copy: {'met' if pct >= 75 else 'MISSED'}")
        emit(f"| {r['layout']} | {r['batch']} | {r['context']} | {r['us']:.1f} | "
             + (f"{ran[best]:.1f} ({best}) | {ran[best] / r['us']:.2f}x" if best else "- | -")
             + f" | {gbs:.0f} | {pct:.0f}% | {'; '.join(targets) or '-'} |")
    emit()
    emit("torch SDPA per backend (us; - = refused the shape):")
    emit()
    emit("| batch | context | " + " | ".join(["default", "flash", "cudnn", "efficient"]) + " |")
    emit("|---:|---:|---:|---:|---:|---:|")
    for (b, c), res in peers.items():
        cells = [f"{res[n]:.1f}" if res.get(n) else "-" for n in ["default", "flash", "cudnn", "efficient"]]
        emit(f"| {b} | {c} | " + " | ".join(cells) + " |")
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
