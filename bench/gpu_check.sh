#!/usr/bin/env bash
# One call on the GPU machine: build the CUDA backend, run the GPU tests,
# compute-sanitizer memcheck over them, and the kernel benchmarks with their
# PyTorch peers. Logs and the report go to $OUT (default ./out).
#   bench/gpu_check.sh [tests|bench|all|tier|prefill|prefill-bench|kernels|kernels-tests|decode-quick]
# bench|all run the kernel report's benchmarks without FlashInfer or ncu.
# kernels: the kernel report of issue 28 (bench/kernel_report.py): store,
# decode, host-tier (C API) and prefill benchmarks, with FlashInfer's
# kernels built in as peers when .device-deps-flashinfer/ holds its pinned
# headers (bench/flashinfer/README.md), ncu over decode rows
# (NCU_ROWS="Q/KV/BATCH/CTX[/fp8] ...", empty to skip); kernels-tests: the
# GPU tests and compute-sanitizer memcheck first (GPU_TEST_FILTER and
# MEMCHECK_FILTER, gtest filters, narrow them to fit a device call).
# decode-quick: decode's GPU tests and memcheck, then the decode benchmark
# with each kernel forced (see below).
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

# FlashInfer's pinned headers (bench/flashinfer/COMMIT), patched for CUDA
# 13's CCCL in a copy: the kernels modes only.
FI_SRC=$ROOT/.device-deps-flashinfer
FI_FLAG=""
case "$MODE" in kernels*|decode-quick)
  if [ -d "$FI_SRC/include/flashinfer" ]; then
    mkdir -p "$WORK/flashinfer" && cp -r "$FI_SRC/include" "$WORK/flashinfer/" &&
      (cd "$WORK/flashinfer" && patch -s -p1 <"$ROOT/bench/flashinfer/cuda13-cccl.patch") &&
      FI_FLAG="-DKVCACHE_BENCH_FLASHINFER_DIR=$WORK/flashinfer/include"
    echo "FlashInfer peers: $(cat "$ROOT/bench/flashinfer/COMMIT") ${FI_FLAG:+(patched, built in)}"
  else
    echo "FlashInfer peers: $FI_SRC missing, kvcache rows only"
  fi ;;
esac

echo "== configure + build"
t0=$(date +%s)
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVCACHE_CUDA=ON \
  -DKVCACHE_BUILD_TESTS=ON -DKVCACHE_BUILD_BENCH=ON -DKVCACHE_BUILD_EXAMPLES=OFF \
  -DKVCACHE_BINDING_RUST=OFF -DKVCACHE_BINDING_GO=OFF -DKVCACHE_BINDING_JAVA=OFF $FI_FLAG \
  -DCMAKE_PREFIX_PATH="$DEPS" >"$WORK/configure.log" 2>&1 || { tail -40 "$WORK/configure.log"; exit 1; }
TARGETS="kvcache_gpu_tests bench_store_kv bench_decode_attention bench_tier_copy bench_prefill_attention"
case "$MODE" in
  prefill|prefill-bench) TARGETS="kvcache_gpu_tests bench_prefill_attention" ;;
  kernels) TARGETS="bench_store_kv bench_decode_attention bench_tier_copy bench_prefill_attention" ;;
  kernels-tests) TARGETS="kvcache_gpu_tests bench_store_kv bench_decode_attention bench_tier_copy bench_prefill_attention" ;;
  decode-quick) TARGETS="kvcache_gpu_tests bench_decode_attention" ;;
esac
# GPU_TARGETS overrides the targets (e.g. kvcache_gpu_tests alone when only
# the tests run).
TARGETS=${GPU_TARGETS:-$TARGETS}
# shellcheck disable=SC2086
cmake --build "$BUILD" -j"$(nproc)" --target $TARGETS \
  >"$OUT/build.log" 2>&1 || { grep -B2 -A12 -E "error|Error" "$OUT/build.log" | head -80; exit 1; }
echo "built in $(( $(date +%s) - t0 )) s"

if [ "$MODE" = tests ] || [ "$MODE" = all ] || [ "$MODE" = kernels-tests ]; then
  echo "== GPU tests"
  timeout 300 "$BUILD/tests/gpu/kvcache_gpu_tests" --gtest_filter="${GPU_TEST_FILTER:-*}" >"$OUT/gpu_tests.log" 2>&1
  rc=$?; [ $rc -ne 0 ] && STATUS=1
  grep -E "^\[  (FAILED|PASSED|SKIPPED) |OK \]|Failure|error|Expected|Which is|relative|first difference" \
    "$OUT/gpu_tests.log" | head -80
  echo "gpu tests exit code $rc"
  echo "== compute-sanitizer memcheck"
  # Not the test whose cuMemCreate fails on purpose (memcheck counts the
  # failed driver call as an error; bench/resize_device.sh leaves it out too).
  timeout 420 compute-sanitizer --tool memcheck --error-exitcode 99 \
    "$BUILD/tests/gpu/kvcache_gpu_tests" --gtest_filter="${MEMCHECK_FILTER:--CudaResize.AGrowBeyond*}" \
    --gtest_brief=1 >"$OUT/memcheck.log" 2>&1
  rc=$?; [ $rc -ne 0 ] && STATUS=1
  tail -6 "$OUT/memcheck.log"
  echo "memcheck exit code $rc"
fi

if [ "$MODE" = decode-quick ]; then
  # Iterating on decode: its GPU tests, memcheck over them, and the decode
  # benchmark at context 8192 (--quick) with each kernel forced
  # (KVC_DECODE_PATH, DECODE_PATHS="0 1 2" by default) and FlashInfer.
  echo "== GPU tests (decode)"
  timeout 200 "$BUILD/tests/gpu/kvcache_gpu_tests" --gtest_filter='*Decode*' >"$OUT/gpu_tests.log" 2>&1
  rc=$?; [ $rc -ne 0 ] && STATUS=1
  grep -E "^\[  (FAILED|PASSED|SKIPPED) |OK \]|Failure|Expected|Which is|relative" "$OUT/gpu_tests.log" | head -40
  echo "gpu tests exit code $rc"
  if [ "${DECODE_MEMCHECK:-1}" = 1 ]; then
    timeout 200 compute-sanitizer --tool memcheck --error-exitcode 99 "$BUILD/tests/gpu/kvcache_gpu_tests" \
      --gtest_filter='Kernels.Decode*' --gtest_brief=1 >"$OUT/memcheck.log" 2>&1
    rc=$?; [ $rc -ne 0 ] && STATUS=1
    tail -4 "$OUT/memcheck.log"; echo "memcheck exit code $rc"
  fi
  for path in ${DECODE_PATHS:-0 1 2}; do
    echo "== decode benchmark, KVC_DECODE_PATH=$path"
    # shellcheck disable=SC2086
    KVC_DECODE_PATH=$path timeout 150 "$BUILD/bench/bench_decode_attention" ${DECODE_BENCH_ARGS---quick} \
      >"$OUT/decode_quick_$path.log" 2>&1 || STATUS=1
    cat "$OUT/decode_quick_$path.log"
  done
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

if [ "$MODE" = tier ]; then
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

case "$MODE" in kernels*|bench|all)
  echo "== kernel benchmarks"
  # Raw tables go to bench.log as they come (a cut-off run keeps them); the
  # JSON rows to rows.jsonl at the end (at most 8 files come back).
  for b in "bench_store_kv 120 store" "bench_decode_attention 240 decode" "bench_tier_copy 120 tier" \
           "bench_prefill_attention 120 prefill"; do
    set -- $b
    echo "-- $1" >>"$OUT/bench.log"
    timeout "$2" "$BUILD/bench/$1" --json "$WORK/$3.jsonl" >>"$OUT/bench.log" 2>&1 ||
      { echo "$1 exit code $?"; tail -20 "$OUT/bench.log"; STATUS=1; }
  done
  cat "$WORK"/store.jsonl "$WORK"/decode.jsonl "$WORK"/tier.jsonl "$WORK"/prefill.jsonl >"$OUT/rows.jsonl" 2>/dev/null
  PYTHONUNBUFFERED=1 timeout 120 python3 bench/kernel_report.py --store-json "$WORK/store.jsonl" \
    --decode-json "$WORK/decode.jsonl" --tier-json "$WORK/tier.jsonl" --prefill-json "$WORK/prefill.jsonl" \
    --flashinfer "${FI_FLAG:+$(cat bench/flashinfer/COMMIT)}" --out "$OUT/kernels-h100.md" \
    --command "bench/gpu_check.sh $MODE" >>"$OUT/bench.log" 2>&1 || { tail -20 "$OUT/bench.log"; STATUS=1; }
  cat "$OUT/kernels-h100.md" 2>/dev/null
  # ncu over decode rows (NCU_ROWS: Q/KV/BATCH/CTX[/fp8] ..., empty: none):
  # kvcache's decode kernel, FlashInfer's, and kvcache's prefill kernel on
  # the same row. ncu locks the clocks to base and flushes caches between
  # passes: compare kernels with each other, not with the tables.
  NCU_ROWS=${NCU_ROWS-64/8/32/8192}
  case "$MODE" in kernels*) ;; *) NCU_ROWS="" ;; esac
  if [ -n "$NCU_ROWS" ] && command -v ncu >/dev/null; then
    for row in $NCU_ROWS; do
      echo "== ncu: decode row $row" | tee -a "$OUT/ncu.log"
      timeout 90 ncu --target-processes all \
        -k 'regex:decode_kernel|prefill_kernel|BatchDecodeWithPagedKVCacheKernel|BatchPrefillWithPagedKVCacheKernel' \
        --launch-count 12 --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy \
        --section LaunchStats --section WarpStateStats --section ComputeWorkloadAnalysis \
        --section InstructionStats --metrics dram__bytes_read.sum,lts__t_bytes.sum \
        "$BUILD/bench/bench_decode_attention" --profile "$row" >>"$OUT/ncu.log" 2>&1 || echo "ncu exit code $?"
    done
    grep -E "^== ncu|  void |Duration|DRAM Throughput|dram__bytes_read|lts__t_bytes|Achieved Occupancy|Registers Per|Warp Cycles Per Issued|Issue Slots Busy|Executed Ipc A" "$OUT/ncu.log" | head -150
  fi ;;
esac
exit $STATUS
