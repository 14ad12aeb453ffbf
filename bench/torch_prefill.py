#!/usr/bin/env python3
"""PyTorch peers of bench_prefill_attention, run in the same session.

Reads the JSON rows bench_prefill_attention wrote and times, on the same
shapes (bf16, 32 q / 8 kv heads, dim 128):
  - SDPA on contiguous tensors, every backend that accepts the shape (flash,
    cuDNN, efficient; GQA through enable_gqa, else K/V expanded to 32 heads
    beforehand, outside the timing); the fastest is the peer and is named.
    No prefix: is_causal=True. With a prefix: the causal mask aligned to the
    bottom right (torch.nn.attention.bias.causal_lower_right), the mask a
    chunk of new tokens over a cached prefix needs;
  - gather + SDPA: what a user without a paged kernel does: gather the
    sequence's K/V blocks out of a paged pool [blocks][16][8][128] through
    its block table into contiguous tensors, then the fastest SDPA above.
Also measures the bf16 dense matmul rate (8192^3 torch.matmul) as a
measured ceiling beside the H100 SXM datasheet's 989 TFLOP/s.
Writes the markdown report to --out.
"""
import argparse
import datetime
import json
import subprocess

import torch
import torch.nn.functional as F

H_KV, H_Q, D, T = 8, 32, 128, 16
PEAK_TFLOPS = 989.0  # H100 SXM dense bf16, datasheet


def time_us(fn, reps, samples=9):
    """Median over samples of the mean of `reps` back-to-back calls (CUDA events)."""
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


def matmul_tflops():
    n = 8192
    a, b = rand_bf16(n, n), rand_bf16(n, n)
    us = time_us(lambda: torch.matmul(a, b), 20)
    return 2.0 * n ** 3 / us / 1e6


def sdpa_call(backend, q, k, v, prefix):
    """A callable running SDPA with `backend`, or None when it refuses the shape."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.attention.bias import causal_lower_right

    q_len, kv_len = q.shape[2], k.shape[2]
    mask = causal_lower_right(q_len, kv_len) if prefix else None
    for gqa in (True, False):
        kk, vv = k, v
        if not gqa:
            kk = k.repeat_interleave(H_Q // H_KV, dim=1)
            vv = v.repeat_interleave(H_Q // H_KV, dim=1)

        def run(kk=kk, vv=vv, gqa=gqa):
            with sdpa_kernel(backend):
                if mask is None:
                    return F.scaled_dot_product_attention(q, kk, vv, is_causal=True, enable_gqa=gqa)
                return F.scaled_dot_product_attention(q, kk, vv, attn_mask=mask, enable_gqa=gqa)

        try:
            run()
            torch.cuda.synchronize()
            return run, ("gqa" if gqa else "expanded K/V")
        except Exception:  # the backend refuses this shape or mask
            torch.cuda.synchronize()
    return None, None


def peers(row, gen):
    from torch.nn.attention import SDPBackend

    batch, q_len, kv_len = row["batch"], row["q_len"], row["kv_len"]
    prefix = kv_len > q_len
    q = rand_bf16(batch, H_Q, q_len, D)
    k = rand_bf16(batch, H_KV, kv_len, D)
    v = rand_bf16(batch, H_KV, kv_len, D)
    reps = max(3, min(50, int(2e12 / row["flops"])))
    results = {}
    best = None
    for name, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION),
                          ("efficient", SDPBackend.EFFICIENT_ATTENTION)):
        fn, how = sdpa_call(backend, q, k, v, prefix)
        if fn is None:
            continue
        us = time_us(fn, reps)
        results[name] = (us, how)
        if best is None or us < results[best][0]:
            best = name
    out = {"sdpa": results, "best": best}
    if prefix and best is not None:
        # Gather + SDPA: the blocks of each sequence in random places of a pool.
        blocks = (kv_len + T - 1) // T
        pool_blocks = batch * blocks + 64
        k_pool = rand_bf16(pool_blocks, T, H_KV, D)
        v_pool = rand_bf16(pool_blocks, T, H_KV, D)
        table = torch.randperm(pool_blocks, generator=gen)[: batch * blocks].view(batch, blocks).cuda()
        backend = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
                   "efficient": SDPBackend.EFFICIENT_ATTENTION}[best]

        def gathered():
            kg = k_pool[table].view(batch, blocks * T, H_KV, D)[:, :kv_len].transpose(1, 2)
            vg = v_pool[table].view(batch, blocks * T, H_KV, D)[:, :kv_len].transpose(1, 2)
            return kg.contiguous(), vg.contiguous()

        kg, vg = gathered()
        fn, how = sdpa_call(backend, q, kg, vg, prefix)
        del kg, vg

        def run():
            kg2, vg2 = gathered()
            return _sdpa_again(backend, q, kg2, vg2, how)

        out["gather"] = time_us(run, reps)
        out["gather_how"] = how
        del k_pool, v_pool
    return out


def _sdpa_again(backend, q, k, v, how):
    from torch.nn.attention import sdpa_kernel
    from torch.nn.attention.bias import causal_lower_right

    if how != "gqa":
        k = k.repeat_interleave(H_Q // H_KV, dim=1)
        v = v.repeat_interleave(H_Q // H_KV, dim=1)
    with sdpa_kernel(backend):
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=causal_lower_right(q.shape[2], k.shape[2]), enable_gqa=(how == "gqa"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--prefill-json", required=True)
    ap.add_argument("--out")
    ap.add_argument("--command", default="")
    args = ap.parse_args()
    rows = [json.loads(line) for line in open(args.prefill_json) if line.strip()]
    gen = torch.Generator().manual_seed(1)
    mm = matmul_tflops()
    lines = []
    gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                          "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
    lines.append("# Paged prefill attention on %s" % torch.cuda.get_device_name())
    lines.append("")
    lines.append("- date: %s" % datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC"))
    lines.append("- machine: %s; torch %s, CUDA %s" % (gpu, torch.__version__, torch.version.cuda))
    lines.append("- command: `%s`" % args.command)
    lines.append("- shape: bf16, 32 q / 8 kv heads, head dim 128; kvcache: 16-token blocks in random "
                 "places of the pool (NHD); torch: contiguous [batch][heads][tokens][128]")
    lines.append("- time: GPU time, CUDA events around back-to-back calls, median of 9 samples, both sides")
    lines.append("- FLOPs: 4 x 128 x 32 x attended (query, key) pairs of the causal mask; peak: %.0f "
                 "TFLOP/s (H100 SXM dense bf16, datasheet); measured bf16 matmul 8192^3: %.0f TFLOP/s"
                 % (PEAK_TFLOPS, mm))
    lines.append("")
    lines.append("| case | batch | q_len | kv_len | kvcache us | TFLOP/s | % of peak | SDPA best (backend) us "
                 "| vs SDPA best | SDPA flash us | vs flash | gather+SDPA us | vs gather+SDPA | targets |")
    lines.append("|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---|")
    details = []
    for row in rows:
        res = peers(row, gen)
        details.append("- %s %dx%d/%d: %s" % (row["case"], row["batch"], row["q_len"], row["kv_len"], ", ".join(
            "%s %.1f (%s)" % (n, v[0], v[1]) for n, v in res["sdpa"].items())))
        us = row["us"]
        tf = row["flops"] / us / 1e6
        sd = res["sdpa"]
        best = res["best"]
        best_us = sd[best][0] if best else None
        flash_us = sd["flash"][0] if "flash" in sd else None
        gather_us = res.get("gather")
        targets = []
        if row["q_len"] == row["kv_len"] and best_us:
            r = best_us / us
            targets.append(">=0.55x SDPA best: %s; >=0.8x: %s" % ("met" if r >= 0.55 else "MISSED",
                                                                 "met" if r >= 0.8 else "missed"))
        elif flash_us:
            r = flash_us / us
            targets.append(">=1.4x flash: %s" % ("met" if r >= 1.4 else "MISSED"))
            if gather_us:
                targets.append(">=gather+SDPA: %s" % ("met" if gather_us >= us else "MISSED"))

        def f(x, fmt="%.1f"):
            return fmt % x if x else "-"

        lines.append("| %s | %d | %d | %d | %.1f | %.0f | %.0f%% | %s | %s | %s | %s | %s | %s | %s |" % (
            row["case"], row["batch"], row["q_len"], row["kv_len"], us, tf, 100 * tf / PEAK_TFLOPS,
            ("%.1f (%s, %s)" % (best_us, best, sd[best][1])) if best else "-",
            f(best_us / us if best_us else None, "%.2fx"), f(flash_us),
            f(flash_us / us if flash_us else None, "%.2fx"), f(gather_us),
            f(gather_us / us if gather_us else None, "%.2fx"), "; ".join(targets) or "-"))
        print(lines[-1], flush=True)
    lines.append("")
    lines.append("All SDPA timings per backend (us, GQA handling):")
    lines.append("")
    lines.extend(details)
    text = "\n".join(lines) + "\n"
    if args.out:
        open(args.out, "w").write(text)
    print(text)


if __name__ == "__main__":
    main()
