#!/usr/bin/env bash
# One call on the GPU machine: build the CUDA backend, run the GPU tests,
# compute-sanitizer memcheck over them, and the kernel benchmarks with their
# PyTorch peers. Logs and the report go to $OUT (default ./out).
#   bench/gpu_check.sh [tests|bench|all|tier|prefill|prefill-bench]
# tier: the GPU tests, memcheck over the host-tier tests, and the host-tier
# copy benchmark (bench/cuda/bench_tier_copy.cu) alone.
# prefill: the GPU tests, compute-sanitizer memcheck and racecheck over the
# prefill attention tests, and the prefill benchmark with its PyTorch peers
# (bench/cuda/bench_prefill_attention.cu, bench/torch_prefill.py);
# prefill-bench: that benchmark alone.
# Dependencies the machine lacks come as .deb packages unpacked here first
# (.device-deps/ is git-ignored; pass it to the device call as carried):
#   (prepared as tests/gpu/device_env.sh says)
set -uo pipefail
MODE=${1:-all}
source "$(dirname "$0")/../tests/gpu/device_env.sh"
BUILD=$ROOT/build-kern-dev
STATUS=0

# At most 8 files come back from $OUT: intermediate files live in $WORK.
WORK=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem \
  --format=csv

echo "== configure + build"
t0=$(date +%s)
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVCACHE_CUDA=ON \
  -DKVCACHE_BUILD_TESTS=ON -DKVCACHE_BUILD_BENCH=ON -DKVCACHE_BUILD_EXAMPLES=OFF \
  -DKVCACHE_BINDING_RUST=OFF -DKVCACHE_BINDING_GO=OFF -DKVCACHE_BINDING_JAVA=OFF \
  -DCMAKE_PREFIX_PATH="$DEPS" >"$WORK/configure.log" 2>&1 || { tail -40 "$WORK/configure.log"; exit 1; }
TARGETS="kvcache_gpu_tests bench_store_kv bench_decode_attention bench_tier_copy"
case "$MODE" in prefill|prefill-bench) TARGETS="kvcache_gpu_tests bench_prefill_attention" ;; esac
# shellcheck disable=SC2086
cmake --build "$BUILD" -j16 --target $TARGETS \
  >"$OUT/build.log" 2>&1 || { grep -B2 -A12 -E "error|Error" "$OUT/build.log" | head -80; exit 1; }
echo "built in $(( $(date +%s) - t0 )) s"

if [ "$MODE" = tests ] || [ "$MODE" = all ]; then
  echo "== GPU tests"
  timeout 300 "$BUILD/tests/gpu/kvcache_gpu_tests" >"$OUT/gpu_tests.log" 2>&1
  rc=$?; [ $rc -ne 0 ] && STATUS=1
  grep -E "^\[  (FAILED|PASSED|SKIPPED) |OK \]|Failure|error|Expected|Which is|relative|first difference" \
    "$OUT/gpu_tests.log" | head -80
  echo "gpu tests exit code $rc"
  echo "== compute-sanitizer memcheck"
  timeout 420 compute-sanitizer --tool memcheck --error-exitcode 99 \
    "$BUILD/tests/gpu/kvcache_gpu_tests" --gtest_brief=1 >"$OUT/memcheck.log" 2>&1
  rc=$?; [ $rc -ne 0 ] && STATUS=1
  tail -6 "$OUT/memcheck.log"
  echo "memcheck exit code $rc"
fi

if [ "$MODE" = tier ]; then
  echo "== GPU tests"
  timeout 300 "$BUILD/tests/gpu/kvcache_gpu_tests" >"$OUT/gpu_tests.log" 2>&1
  rc=$?; [ $rc -ne 0 ] && STATUS=1
  grep -E "^\[  (FAILED|PASSED|SKIPPED) |Failure|Expected|Which is" "$OUT/gpu_tests.log" | head -40
  echo "gpu tests exit code $rc"
  echo "== compute-sanitizer memcheck (host tier)"
  timeout 300 compute-sanitizer --tool memcheck --error-exitcode 99 \
    "$BUILD/tests/gpu/kvcache_gpu_tests" --gtest_filter='*HostTier*' --gtest_brief=1 \
    >"$OUT/memcheck_tier.log" 2>&1
  rc=$?; [ $rc -ne 0 ] && STATUS=1
  tail -6 "$OUT/memcheck_tier.log"
  echo "memcheck exit code $rc"
fi

if [ "$MODE" = tier ] || [ "$MODE" = all ]; then
  echo "== host-tier copy benchmark"
  timeout 240 "$BUILD/bench/bench_tier_copy" --json "$WORK/tier.jsonl" | tee "$OUT/tier-h100.md" || STATUS=1
fi

if [ "$MODE" = prefill ]; then
  # Every GPU test, then both sanitizers over the prefill cases that cover
  # every kernel variant (the long prompts only cost CPU time for the
  # reference).
  echo "== GPU tests (all)"
  timeout 240 "$BUILD/tests/gpu/kvcache_gpu_tests" >"$OUT/gpu_tests.log" 2>&1
  rc=$?; [ $rc -ne 0 ] && STATUS=1
  grep -E "^\[  (FAILED|PASSED|SKIPPED) |Prefill.*OK \]|Failure|Expected|Which is|relative|lse\[" \
    "$OUT/gpu_tests.log" | head -60
  echo "gpu tests exit code $rc"
  for tool in memcheck racecheck; do
    echo "== compute-sanitizer $tool (prefill tests)"
    filter='PrefillGpu.*:-PrefillGpu.LongPrompts*'
    # racecheck instruments every shared-memory access: fewer cases.
    [ $tool = racecheck ] && filter='PrefillGpu.EveryDtype*:PrefillGpu.SplitKv*:PrefillGpu.EveryThreadBlock*'
    timeout 110 compute-sanitizer --tool $tool --error-exitcode 99 \
      "$BUILD/tests/gpu/kvcache_gpu_tests" --gtest_filter="$filter" >"$OUT/$tool.log" 2>&1
    rc=$?; [ $rc -ne 0 ] && STATUS=1
    grep -E "^\[       OK|^\[  FAILED|ERROR SUMMARY|RACECHECK SUMMARY|Hazard|Invalid" "$OUT/$tool.log" | head -20
    echo "$tool exit code $rc"
  done
fi

if [ "$MODE" = prefill ] || [ "$MODE" = prefill-bench ]; then
  echo "== prefill benchmark"
  timeout 90 "$BUILD/bench/bench_prefill_attention" --json "$WORK/prefill.jsonl" | tee "$OUT/prefill_bench.log" || STATUS=1
  if [ "${PREFILL_TORCH:-1}" = 1 ]; then
    PYTHONUNBUFFERED=1 timeout 200 python3 bench/torch_prefill.py --prefill-json "$WORK/prefill.jsonl" \
      --out "$OUT/prefill-h100.md" --command "bench/gpu_check.sh $MODE" >>"$OUT/prefill_bench.log" 2>&1 ||
      { tail -20 "$OUT/prefill_bench.log"; STATUS=1; }
    cat "$OUT/prefill-h100.md" 2>/dev/null
  fi
fi

if [ "$MODE" = bench ] || [ "$MODE" = all ]; then
  echo "== benchmarks"
  timeout 150 "$BUILD/bench/bench_store_kv" --json "$WORK/store.jsonl" | tee "$OUT/bench.log" || STATUS=1
  timeout 200 "$BUILD/bench/bench_decode_attention" --json "$WORK/decode.jsonl" | tee -a "$OUT/bench.log" || STATUS=1
  PYTHONUNBUFFERED=1 timeout 240 python3 bench/torch_kernels.py --store-json "$WORK/store.jsonl" \
    --decode-json "$WORK/decode.jsonl" --out "$OUT/kernels-h100.md" \
    --command "bench/gpu_check.sh $MODE" >>"$OUT/bench.log" 2>&1 || { tail -20 "$OUT/bench.log"; STATUS=1; }
  cat "$OUT/kernels-h100.md" 2>/dev/null
fi
exit $STATUS
