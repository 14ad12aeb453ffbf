#!/usr/bin/env bash
# Fuzzes one harness for a fixed time, starting from its committed seeds,
# and fails on any finding (a crash, a sanitizer report, a failed check of
# the harness, a leak, a timeout or running out of memory).
#
# usage: run_fuzzer.sh BINARY SEED_DIR WORK_DIR [SECONDS] [PROCESSES]
#   SECONDS   default $KVC_FUZZ_SECONDS, else 60; HALF: half of that
#   PROCESSES default 1; several share WORK_DIR/corpus (libFuzzer reloads it)
# Leaves in WORK_DIR: corpus/ (what the run found), findings/ (inputs that
# failed), log-N (each process's output) and summary (one line of figures).
set -uo pipefail
bin=$1 seeds=$2 work=$3
secs=${4:-${KVC_FUZZ_SECONDS:-60}}
[ "$secs" = HALF ] && secs=$(((${KVC_FUZZ_SECONDS:-60} + 1) / 2))
procs=${5:-1}
name=$(basename "$work")

rm -rf "$work"
mkdir -p "$work/corpus" "$work/findings" "$seeds"
# abort_on_error: a report ends in SIGABRT, which libFuzzer turns into a
# saved input; malloc_context_size: deeper stacks cost time on every malloc.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}:abort_on_error=1:malloc_context_size=10
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}:halt_on_error=1

start=$SECONDS
pids=()
for ((i = 0; i < procs; ++i)); do
  # -report_slow_units=60: an input slower than libFuzzer's 10 s default but
  # under the timeout is no finding (a disk input flushes its writer thread
  # before each add, seconds in all on a loaded machine); a hang still is.
  "$bin" -max_total_time="$secs" -max_len=4096 -len_control=0 -timeout=60 -rss_limit_mb=4096 \
    -report_slow_units=60 \
    -print_final_stats=1 -reload=10 -artifact_prefix="$work/findings/" \
    "$work/corpus" "$seeds" >"$work/log-$i" 2>&1 &
  pids+=($!)
done
rc=0
for pid in "${pids[@]}"; do wait "$pid" || rc=1; done
elapsed=$((SECONDS - start))
((elapsed < 1)) && elapsed=1

# Figures: executions and API calls summed over the processes, coverage
# (libFuzzer's cov: edges, ft: features) from the best of them.
execs=0 calls=0 failed=0 checks=0 cov=0 ft=0
for ((i = 0; i < procs; ++i)); do
  log="$work/log-$i"
  e=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  execs=$((execs + ${e:-0}))
  read -r c f k < <(sed -n 's/^kvcache_fuzz: [0-9]* inputs, \([0-9]*\) API calls in the programs (\([0-9]*\) failed.* \([0-9]*\) more API calls by the checks$/\1 \2 \3/p' "$log" | tail -1)
  calls=$((calls + ${c:-0})) failed=$((failed + ${f:-0})) checks=$((checks + ${k:-0}))
  line=$(grep -E '^#[0-9]+' "$log" | grep -o 'cov: [0-9]* ft: [0-9]*' | tail -1)
  c=$(echo "$line" | awk '{print $2}') f=$(echo "$line" | awk '{print $4}')
  ((${c:-0} > cov)) && cov=$c
  ((${f:-0} > ft)) && ft=$f
done
findings=$(find "$work/findings" -type f | wc -l)
corpus=$(find "$work/corpus" -type f | wc -l)
printf '%-12s %3d proc %5ds  execs %10d (%6d/s)  program calls %11d (%7d/s, %d failed)  check calls %11d  cov %5d  ft %6d  new corpus %5d  findings %d\n' \
  "$name" "$procs" "$elapsed" "$execs" $((execs / elapsed)) "$calls" $((calls / elapsed)) "$failed" \
  "$checks" "$cov" "$ft" "$corpus" "$findings" | tee "$work/summary"

if ((rc != 0 || findings != 0)); then
  echo "== $name: FINDINGS (inputs in $work/findings; rerun one with KVC_FUZZ_TRACE=1 $bin FILE)"
  for ((i = 0; i < procs; ++i)); do
    grep -E '==kvcache_fuzz==|^SUMMARY|ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error' "$work/log-$i" | head -20
  done
  ls -l "$work/findings"
  exit 1
fi
