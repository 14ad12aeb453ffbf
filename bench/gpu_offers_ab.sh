#!/usr/bin/env bash
# The disk tier on a CUDA cache, as the simulator drives it (issue 22; bench/
# results/2026-11-29-gpu-offers-h200.md): kvcache-sim on cuda:0 over a trace,
# first without the disk tier, then with it, alternating the libkvcache
# builds given (the same simulator binary, the library picked by
# LD_LIBRARY_PATH), RUNS rounds; one line per run with the figures of its
# JSON (hit rate, blocks evicted / written to the disk / loaded, bookkeeping
# per step p50 / p99 / p99.9, wall and CPU).
#   [SIM_ARGS='--model M --memory B'] bench/gpu_offers_ab.sh SIM TRACE REQUESTS RUNS LIBDIR...
# (SIM_ARGS: the model and pool, default '--model tiny --memory 12000000')
# e.g. (on the GPU machine, builds carried in build/s21dev):
#   bench/gpu_offers_ab.sh build/s21dev/kvcache-sim build/s21dev/trace.jsonl 2000 2 \
#     build/s21dev/old build/s21dev/new
set -u
sim=$1; trace=$2; requests=$3; runs=$4; shift 4
out=${OUT:-/tmp/gpu-offers}
mkdir -p "$out"
run() {  # label libdir [sim args]
  local label=$1 lib=$2; shift 2
  LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "$sim" --trace "$trace" \
    --requests "$requests" ${SIM_ARGS:---model tiny --memory 12000000} --device cuda:0 --no-progress --json \
    "$@" > "$out/$label.json" 2> "$out/$label.err"
  python3 - "$out/$label.json" "$label" <<'PY'
import json, sys
path, label = sys.argv[1:]
try:
    r = json.load(open(path))["runs"][0]
except Exception as e:
    print(label, "no result:", e); sys.exit()
f = lambda k: r.get(k)
print(f"{label}: hit {f('hit_rate'):.4f} evicted {f('blocks_evicted')} written {f('disk_blocks_written')} "
      f"loaded {f('disk_blocks_loaded')} dropped {f('disk_blocks_dropped')} | wall p50 {f('bookkeeping_us_p50'):.0f} p99 {f('bookkeeping_us_p99'):.0f} "
      f"p99.9 {f('bookkeeping_us_p999'):.0f} us | CPU p50 {f('bookkeeping_cpu_us_p50'):.0f} "
      f"p99 {f('bookkeeping_cpu_us_p99'):.0f} us | run {f('wall_s')} s")
PY
}
run no-disk "$1"
for r in $(seq 1 "$runs"); do
  for lib in "$@"; do
    name=$(basename "$lib")
    dir=$(mktemp -d /tmp/gpu-offers-disk.XXXXXX)
    run "disk-$name-$r" "$lib" --disk-cache "$dir:20000000000"
    rm -rf "$dir"
  done
done
