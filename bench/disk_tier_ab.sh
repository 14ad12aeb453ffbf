#!/bin/bash
# Old and new bench_disk_tier binaries alternated in one session (issue 22's
# disk-tier targets; bench/results/2026-11-28-disk-writes-vm-2cpu.md):
#   bench/disk_tier_ab.sh throughput|serving OUTDIR RUNS REPS OLD NEW [PIN]
# runs OLD then NEW, RUNS times each, `REPS` repetitions per run, each run's
# table in OUTDIR/{old,new}-N.txt and the time and load average of every run
# in OUTDIR/log. PIN=1 (serving): KVC_BENCH_PIN=1. Summarize with
#   python3 bench/disk_tier_summary.py throughput|serving OUTDIR
set -eu
part=$1; out=$2; runs=$3; reps=$4; old=$5; new=$6; pin=${7:-0}
mkdir -p "$out" /tmp/disk-run
for i in $(seq 1 "$runs"); do
  for b in old new; do
    bin=$old; [ $b = new ] && bin=$new
    echo "== $b run $i $(date +%T) $(uptime | sed 's/.*load/load/')" >> "$out/log"
    KVC_BENCH_PIN=$pin "$bin" /tmp/disk-run "$reps" "$part" > "$out/$b-$i.txt" 2>&1
  done
done
echo "== end $(date +%T) $(uptime | sed 's/.*load/load/')" >> "$out/log"
