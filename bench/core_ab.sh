#!/usr/bin/env bash
# Before/after of the core's bookkeeping (issue 24) on one machine in one
# session: builds two source trees (release, CPU backend), then alternates
# their runs: bench_core's rows and kvcache-sim on the Mooncake
# conversation trace (unlimited, 12M and 40M bytes, 12M with a 40M host
# tier). Prints, per figure, the median and the spread of each tree.
#
#   bench/core_ab.sh OLD_TREE NEW_TREE [REPS] [TRACE]
#
# OLD_BUILD / NEW_BUILD: build folders to use as they are (bench/bench_core,
# examples/simulator/kvcache-sim, libkvcache.so.0), instead of building the
# trees; each binary runs with LD_LIBRARY_PATH set to its folder.
# TRACE defaults to traces/conversation_trace.jsonl of NEW_TREE. Results go
# to $OUT (default ./out/core_ab): the raw outputs and table.md. Runs are
# pinned to one core (taskset -c $PIN, default 2) where taskset exists. On
# the GPU machine, source tests/gpu/device_env.sh first and pass its DEPS:
#   source tests/gpu/device_env.sh && DEPS=$DEPS bench/core_ab.sh ...
# CORE_RUNS (default 1): bench_core runs per tree in each round, each a
# sample of the table's median and min-max. On a noisy machine one run per
# round is too few (the same binary's commit row moved 37-58 us within
# minutes on the 2-core VM, bench/results/2026-11-29-commit-hashes-vm-2cpu.md):
# interference only adds time, so the min beside the median says more.
set -euo pipefail
OLD=$(cd "$1" && pwd)
NEW=$(cd "$2" && pwd)
REPS=${3:-3}
TRACE=$(readlink -f "${4:-$NEW/traces/conversation_trace.jsonl}")
OUT=${OUT:-$PWD/out}/core_ab
mkdir -p "$OUT"
JOBS=$(nproc)
PIN=()
command -v taskset >/dev/null && PIN=(taskset -c "${PIN_CORE:-2}")

build() {  # tree -> build dir
  local b=$1/build-ab log=$OUT/build-$(basename "$1").log
  rm -rf "$b"
  if ! { cmake -S "$1" -B "$b" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVCACHE_CUDA=OFF \
           -DKVCACHE_REDIS=OFF -DKVCACHE_TEST_README=OFF -DKVCACHE_BUILD_BENCH=ON \
           ${DEPS:+-DCMAKE_PREFIX_PATH="$DEPS"} &&
         cmake --build "$b" -j"$JOBS" --target bench_core kvcache-sim; } >"$log" 2>&1; then
    tail -30 "$log" >&2
    exit 1
  fi
  echo "$b"
}
if [ -n "${OLD_BUILD:-}" ]; then B_OLD=$(cd "$OLD_BUILD" && pwd); else B_OLD=$(build "$OLD") || exit 1; fi
if [ -n "${NEW_BUILD:-}" ]; then B_NEW=$(cd "$NEW_BUILD" && pwd); else B_NEW=$(build "$NEW") || exit 1; fi

SIMS=("unlimited|--memory unlimited" "12M|--memory 12000000" "40M|--memory 40000000"
      "12M-host40M|--memory 12000000 --host-cache 40000000")
for rep in $(seq 1 "$REPS"); do
  for side in old new; do
    b=$B_OLD; [ $side = new ] && b=$B_NEW
    # bench_core: the rows a tree has (an old tree may lack the new ones).
    for run in $(seq 1 "${CORE_RUNS:-1}"); do
      LD_LIBRARY_PATH=$b "${PIN[@]}" "$b/bench/bench_core" --benchmark_filter='AddCached32K/|DecodeStep512|Evict1000|ChainedHash16/|Commit32KNew|AddNew128K' \
        >"$OUT/core-$side-$rep-$run.txt" 2>&1 || true
    done
    for s in "${SIMS[@]}"; do
      name=${s%%|*}
      # shellcheck disable=SC2086
      LD_LIBRARY_PATH=$b "${PIN[@]}" "$b/examples/simulator/kvcache-sim" --trace "$TRACE" --model tiny ${s#*|} --no-progress --json \
        >"$OUT/sim-$name-$side-$rep.json"
    done
  done
done

python3 - "$OUT" "$REPS" <<'EOF'
import glob, json, re, statistics, sys, os
out, reps = sys.argv[1], int(sys.argv[2])
def med(v): return f"{statistics.median(v):.1f} ({min(v):.1f}-{max(v):.1f})" if v else "n/a"
rows = []
figs = [("bookkeeping_cpu_us_p50", "CPU/step p50 us"), ("bookkeeping_cpu_us_p99", "CPU/step p99 us"),
        ("bookkeeping_cpu_us_p999", "CPU/step p99.9 us"), ("bookkeeping_us_p50", "wall/step p50 us"),
        ("bookkeeping_us_p99", "wall/step p99 us"), ("bookkeeping_us_max", "wall/step max us")]
lines = ["| trace run | figure | before: median (min-max) | after: median (min-max) |", "|---|---|---|---|"]
for name in ["unlimited", "12M", "40M", "12M-host40M"]:
    for key, label in figs:
        vals = {}
        for side in ["old", "new"]:
            v = []
            for r in range(1, reps + 1):
                p = f"{out}/sim-{name}-{side}-{r}.json"
                if not os.path.exists(p): continue
                j = json.load(open(p))
                runs = j["runs"] if isinstance(j, dict) and "runs" in j else j
                run = runs[0] if isinstance(runs, list) else runs
                if key in run: v.append(run[key])
            vals[side] = v
        lines.append(f"| {name} | {label} | {med(vals['old'])} | {med(vals['new'])} |")
lines.append("")
lines.append("| bench_core figure | before: median (min-max) | after: median (min-max) |")
lines.append("|---|---|---|")
pat = re.compile(r"^\| (.+?)\s+\|\s+([0-9.]+) (us|ns) \|")
figs = {}
for side in ["old", "new"]:
    for p in sorted(glob.glob(f"{out}/core-{side}-*.txt")):
        for line in open(p):
            m = pat.match(line)
            if m: figs.setdefault(m.group(1).strip() + " (" + m.group(3) + ")", {}).setdefault(side, []).append(float(m.group(2)))
for f, v in figs.items():
    lines.append(f"| {f} | {med(v.get('old', []))} | {med(v.get('new', []))} |")
open(f"{out}/table.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
EOF
