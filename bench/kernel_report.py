#!/usr/bin/env python3
"""The kernel report: reads the JSON rows of bench_store_kv,
bench_decode_attention and bench_tier_copy (one run, one machine), adds
PyTorch's index_copy_ as a second store peer when torch is importable, and
prints every figure against the targets of issue 28 as Markdown (--out FILE
also writes it).

Times are labelled: "GPU" = calls captured in a CUDA graph and replayed
(per call); "host" = events around calls issued one at a time from the host.
"""
import argparse
import datetime
import json
import subprocess

H_KV, D, T = 8, 128, 16


def load(path):
    if not path:
        return []
    try:
        return [json.loads(line) for line in open(path) if line.strip()]
    except OSError:
        return []


def fmt(us, digits=1):
    return "-" if us is None or us < 0 else f"{us:.{digits}f}"


def verdict(ok):
    return "met" if ok else "**not met**"


def torch_index_copy(tokens_list):
    """index_copy_ of K and V rows into [slots, heads, dim] caches (NHD):
    per host call and as GPU time (50 calls in a torch CUDA graph)."""
    try:
        import torch
    except ImportError:
        return {}
    out = {}
    gen = torch.Generator().manual_seed(1)
    num_slots = 1 << 17

    def rand(*shape):
        return torch.rand(*shape, device="cuda", dtype=torch.bfloat16) * 2 - 1

    def time_host(fn, reps, samples=9):
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        ts = []
        for _ in range(samples):
            a.record()
            for _ in range(reps):
                fn()
            b.record()
            b.synchronize()
            ts.append(1000.0 * a.elapsed_time(b) / reps)
        ts.sort()
        return ts[len(ts) // 2]

    for tokens in tokens_list:
        k_cache, v_cache = rand(num_slots, H_KV, D), rand(num_slots, H_KV, D)
        key, value = rand(tokens, H_KV, D), rand(tokens, H_KV, D)
        blocks = torch.randperm(num_slots // T, generator=gen)[: (tokens + T - 1) // T]
        slots = (blocks.repeat_interleave(T)[:tokens] * T + torch.arange(tokens) % T).cuda()

        def run():
            k_cache.index_copy_(0, slots, key)
            v_cache.index_copy_(0, slots, value)

        host = time_host(run, 200 if tokens <= 4096 else 20)
        gpu = None
        try:
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                run()
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                for _ in range(50):
                    run()
            gpu = time_host(g.replay, 1) / 50
        except Exception as e:  # graphs refused: leave the GPU column empty
            print("torch graph:", str(e).splitlines()[0][:100])
        out[tokens] = (gpu, host)
        del k_cache, v_cache
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--store-json")
    p.add_argument("--decode-json")
    p.add_argument("--tier-json")
    p.add_argument("--prefill-json")
    p.add_argument("--out")
    p.add_argument("--command", default="")
    p.add_argument("--flashinfer", default="", help="FlashInfer commit the peers were built from")
    args = p.parse_args()
    store, decode = load(args.store_json), load(args.decode_json)
    tier = [r for r in load(args.tier_json) if r.get("bench") == "tier_api"]
    prefill = load(args.prefill_json)

    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.max.sm",
                              "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
    except OSError:
        smi = "?"
    lines = []

    def emit(s=""):
        print(s)
        lines.append(s)

    emit(f"# kvcache kernels against their limits and peers ({smi.split(',')[0] if smi else '?'})")
    emit()
    emit(f"- date: {datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}")
    emit(f"- machine: {smi}")
    emit(f"- command: `{args.command}`")
    if args.flashinfer:
        emit(f"- FlashInfer: github.com/flashinfer-ai/flashinfer at `{args.flashinfer}` (headers, "
             "bench/flashinfer/cuda13-cccl.patch applied), built by the script on this machine")
    if decode:
        emit(f"- limits, measured in the same run: 1 GiB device-to-device copy {decode[0]['copy_gbs']:.0f} GB/s "
             f"(bytes read + written), 1 GiB read-only stream {decode[0]['read_gbs']:.0f} GB/s (bytes read)")
    emit("- GPU = per call when N calls captured in a CUDA graph are replayed (no host launch cost); "
         "host = per call when calls are issued one at a time from the host (events around them)")
    emit()

    # ------------------------------------------------------------ decode
    if decode:
        emit("## Paged decode attention (head dim 128, 16-token blocks in random places, NHD)")
        emit()
        emit("cold = GPU time per call while calls rotate over `sets` disjoint block sets, at least 256 MB "
             "of KV (5x the 50 MB L2), so each call reads KV from HBM; warm = every call on the same "
             "set (what fits in L2 is served from it). FlashInfer reads the same pool, blocks and order "
             "(CSR table); cc = its CUDA-core `BatchDecodeWithPagedKVCache`, tc = its tensor-core decode "
             "(the FA2 prefill kernel with one query per request, what `use_tensor_cores=True` runs). "
             "vs best = faster FlashInfer cold time / kvcache cold time (> 1: kvcache faster). "
             "KV GB/s and % are cold: % of read = of the read-only stream; % of copy = of the copy's "
             "read + write rate (decode only reads, so a read-bound kernel can exceed the copy's "
             "figure: the read-only stream is the physical limit). diff = max |kvcache - FlashInfer| "
             "of the bf16 outputs. kvcache prefill kernel = `kvc_prefill_attention` (kvcache's tensor-core "
             "kernel) with one query per sequence on the same rows, for the diagnosis of the decode kernel.")
        emit()
        emit("| q/kv | KV | batch | context | sets | kvcache cold us | warm us | host us | FI cc cold | FI tc cold "
             "| FI cc warm | FI tc warm | vs best | KV GB/s | % of read | % of copy | diff | kvcache prefill kernel "
             "cold us | targets |")
        emit("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
        bf16 = {(r["q_heads"], r["kv_heads"], r["batch"], r["context"]): r for r in decode if r["dtype"] == "bf16"}
        summary = {"fi_rows": 0, "fi_met": 0, "worst": None}
        for r in decode:
            cold = r["cold_us"]
            gbs = r["kv_bytes"] / cold / 1e3 if cold > 0 else 0
            pct_read = 100 * gbs / r["read_gbs"]
            pct_copy = 100 * gbs / r["copy_gbs"]
            fis = [x for x in (r["fi_cc_cold_us"], r["fi_tc_cold_us"]) if x and x > 0]
            best = min(fis) if fis else None
            speed = best / cold if best and cold > 0 else None
            targets = []
            if r["dtype"] == "bf16" and r["batch"] >= 8:
                if speed is not None:
                    summary["fi_rows"] += 1
                    summary["fi_met"] += speed >= 1.0
                    if summary["worst"] is None or speed < summary["worst"][0]:
                        summary["worst"] = (speed, r)
                    targets.append(f">=1.0x best FI: {verdict(speed >= 1.0)}")
                else:
                    targets.append(">=1.0x best FI: no peer")
            if r["dtype"] == "bf16" and r["batch"] == 1 and r["context"] == 32768 and r["q_heads"] == 32 \
                    and r["kv_heads"] == 8:
                targets.append(f">=85% of copy: {verdict(pct_copy >= 85)}")
            if r["dtype"] == "fp8_e4m3":
                ref = bf16.get((r["q_heads"], r["kv_heads"], r["batch"], r["context"]))
                if ref and ref["cold_us"] > 0 and cold > 0:
                    ratio = ref["cold_us"] / cold
                    targets.append(f"fp8 {ratio:.2f}x bf16 per token, >=1.6x: {verdict(ratio >= 1.6)}")
            diff = max(r["fi_cc_diff"], r["fi_tc_diff"])
            notes = "; ".join(n for n in (r.get("fi_cc_note"), r.get("fi_tc_note")) if n)
            emit(f"| {r['q_heads']}/{r['kv_heads']} | {r['dtype']} | {r['batch']} | {r['context']} | {r['sets']} | "
                 f"**{fmt(cold)}** | {fmt(r['warm_us'])} | {fmt(r['host_us'])} | {fmt(r['fi_cc_cold_us'])} | "
                 f"{fmt(r['fi_tc_cold_us'])} | {fmt(r['fi_cc_warm_us'])} | {fmt(r['fi_tc_warm_us'])} | "
                 + (f"{speed:.3f}x" if speed else "-")
                 + f" | {gbs:.0f} | {pct_read:.0f}% | {pct_copy:.0f}% | "
                 + (f"{diff:.2g}" if diff >= 0 else "-")
                 + f" | {fmt(r.get('kvc_tc_cold_us', -1))} | {'; '.join(targets) or '-'}{' (' + notes + ')' if notes else ''} |")
        emit()
        if summary["fi_rows"]:
            w = summary["worst"]
            emit(f"Decode vs the faster FlashInfer kernel, bf16, batch >= 8: {summary['fi_met']} of "
                 f"{summary['fi_rows']} rows at >= 1.0x; slowest {w[0]:.3f}x "
                 f"({w[1]['q_heads']}/{w[1]['kv_heads']}, batch {w[1]['batch']}, context {w[1]['context']}).")
            emit()
        timing = {r.get("timing", "") for r in decode}
        if any("E" in t for t in timing):
            emit("Some GPU times were taken with events around back-to-back calls (the driver refused "
                 "the graph capture; 'E' in the JSON's timing field).")
            emit()

    # ------------------------------------------------------------ store
    if store:
        torch_rows = torch_index_copy(sorted({r["tokens"] for r in store}))
        emit("## Store K/V (8 kv heads, dim 128, bf16, 16-token blocks; slots of a prefill in random blocks)")
        emit()
        emit("GPU us cold = per call in a CUDA graph whose calls rotate over `sets` disjoint sets of sources, "
             "slots and destinations (>= 256 MB touched, 5x the L2); warm = 50 calls on one set (small rows "
             "then run from L2). copy = the faster of two `cudaMemcpyAsync` (K, V) and one vectorized copy "
             "kernel of the same bytes; % of copy = copy time / store time. fused = a reshape-and-cache "
             "kernel written in bench/cuda/bench_store_kv.cu from vLLM's published algorithm "
             "(`reshape_and_cache_flash`: a thread block per token, min(heads x dim, 512) threads, 16-byte "
             "vectors), launched directly (no argument checks); host = per call issued one at a time from "
             "the host; vs fused (host) = fused host us / kvcache host us. torch = two `index_copy_` (K, V), "
             "NHD only, warm.")
        emit()
        emit("| layout | tokens | sets | store cold us | store warm us | store host us | copy cold us | % of copy "
             "(cold) | copy warm us | % of copy (warm) | fused cold us | fused host us | vs fused (host) | "
             "torch GPU us | torch host us | targets |")
        emit("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
        for r in store:
            limit = min(x for x in (r["memcpy_gpu_us"], r["copy_kernel_gpu_us"]) if x > 0)
            limit_w = min(x for x in (r["memcpy_warm_us"], r["copy_kernel_warm_us"]) if x > 0)
            pct = 100 * limit / r["store_gpu_us"]
            pct_w = 100 * limit_w / r["store_warm_us"]
            vs_fused = r["fused_host_us"] / r["store_host_us"]
            tg, th = torch_rows.get(r["tokens"], (None, None)) if r["layout"] == "NHD" else (None, None)
            targets = []
            if r["tokens"] >= 4096:
                targets.append(f">=95% of copy (GPU, cold): {verdict(pct >= 95)}")
            if r["tokens"] == 256:
                targets.append(f">=1.2x fused per host call: {verdict(vs_fused >= 1.2)}")
            if not r.get("fused_same_bytes", True):
                targets.append("fused peer wrote other bytes")
            emit(f"| {r['layout']} | {r['tokens']} | {r['sets']} | **{fmt(r['store_gpu_us'], 2)}** | "
                 f"{fmt(r['store_warm_us'], 2)} | {fmt(r['store_host_us'], 2)} | {fmt(limit, 2)} | {pct:.0f}% | "
                 f"{fmt(limit_w, 2)} | {pct_w:.0f}% | {fmt(r['fused_gpu_us'], 2)} | {fmt(r['fused_host_us'], 2)} | "
                 f"{vs_fused:.2f}x | {fmt(tg, 2)} | {fmt(th, 2)} | {'; '.join(targets) or '-'} |")
        emit()

    # ------------------------------------------------------------ tier
    if tier:
        emit("## Host tier through the C API (32-layer Llama-3.1-8B cache)")
        emit()
        emit("`kvc_sequence_add()` whose eviction offloads a cached prompt, and whose hit onboards it: wall = "
             "the call to its stream's completion; GPU = events around the call (the copies it enqueued); "
             "beside it the same blocks through `Device::copy_tier` and one pinned `cudaMemcpyAsync`.")
        emit()
        emit("| direction | blocks | MiB | add wall us | add GPU us | GB/s (wall) | copy_tier us | pinned copy us "
             "| wall % of pinned |")
        emit("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in tier:
            emit(f"| {r['direction']} | {r['blocks']} | {r['bytes'] / 2**20:.0f} | {r['add_wall_us']:.0f} | "
                 f"{r['add_gpu_us']:.0f} | {r['bytes'] / r['add_wall_us'] / 1e3:.1f} | {r['copy_tier_us']:.0f} | "
                 f"{r['pinned_us']:.0f} | {100 * r['pinned_us'] / r['add_wall_us']:.0f}% |")
        emit()

    # ------------------------------------------------------------ prefill peer
    fi_prefill = [r for r in prefill if "fi_us" in r]
    if fi_prefill:
        emit("## Paged prefill beside FlashInfer's FA2 paged prefill (causal, bf16, 32 q / 8 kv, dim 128)")
        emit()
        emit("GPU time (events around back-to-back calls, bench_prefill_attention); FI = "
             "`BatchPrefillWithPagedKVCache` on the same pool and blocks; speed = FI us / kvcache us.")
        emit()
        emit("| case | batch | q_len | kv_len | kvcache us | FI us | speed | diff |")
        emit("|---|---:|---:|---:|---:|---:|---:|---:|")
        for r in fi_prefill:
            sp = r["fi_us"] / r["us"] if r["fi_us"] > 0 else None
            emit(f"| {r['case']} | {r['batch']} | {r['q_len']} | {r['kv_len']} | {r['us']:.1f} | {fmt(r['fi_us'])} | "
                 + (f"{sp:.2f}x" if sp else "-") + f" | {r.get('fi_diff', -1):.2g} |")
        emit()

    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
