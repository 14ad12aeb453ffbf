#!/usr/bin/env bash
# The whole GPU check of a tree on binaries built beforehand (where device
# minutes are scarce, the device builds nothing): every GPU test (the CUDA
# IPC example's two processes included), compute-sanitizer memcheck over
# MEMCHECK_FILTER (every process) and racecheck over the prefill tests,
# then the prefill benchmark with its PyTorch peers. Build here:
#   cmake -S . -B build/cuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVCACHE_CUDA=ON \
#     -DKVCACHE_BUILD_TESTS=ON -DKVCACHE_BUILD_BENCH=ON -DKVCACHE_BUILD_EXAMPLES=ON
#   ninja -C build/cuda kvcache_gpu_tests cuda_ipc_transfer bench_prefill_attention
# copy kvcache_gpu_tests, cuda_ipc_transfer and bench_prefill_attention into
# bin/, libkvcache.so.0 and libhiredis.so.0.14 into lib/ of the tree sent
# to the GPU machine (carry it and .device-deps), and run this from its
# root. Logs and the prefill report go to $OUT. Time limits per step
# (seconds): T_TESTS, T_MEMCHECK, T_RACECHECK, T_BENCH, T_TORCH; PREFILL_BENCH=0
# skips the benchmark.
set -u
R=$(pwd)
export LD_LIBRARY_PATH=$R/lib:$R/.device-deps/root/usr/lib/x86_64-linux-gnu
export KVC_IPC_EXAMPLE=$R/bin/cuda_ipc_transfer
OUT=${OUT:-$R/out}; mkdir -p "$OUT"
STATUS=0
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader

echo "== GPU tests (${GPU_TEST_FILTER:-*})"
timeout "${T_TESTS:-200}" bin/kvcache_gpu_tests --gtest_filter="${GPU_TEST_FILTER:-*}" \
  >"$OUT/gpu_tests.log" 2>&1
rc=$?; [ $rc -ne 0 ] && STATUS=1
grep -E "^\[  (FAILED|PASSED|SKIPPED) |Failure|Expected|Which is" "$OUT/gpu_tests.log" | head -40
grep -E "^\[==========\]" "$OUT/gpu_tests.log" | tail -1
echo "gpu tests exit code $rc"

MC=${MEMCHECK_FILTER:-PrefillGpu.*:Kernels.*:CudaIpcTransfer.*}
echo "== compute-sanitizer memcheck ($MC, all processes)"
timeout "${T_MEMCHECK:-150}" compute-sanitizer --tool memcheck --target-processes all \
  --error-exitcode 99 bin/kvcache_gpu_tests --gtest_filter="$MC" >"$OUT/memcheck.log" 2>&1
rc=$?; [ $rc -ne 0 ] && STATUS=1
grep -E "ERROR SUMMARY|^\[  (FAILED|PASSED|SKIPPED) " "$OUT/memcheck.log" | sort | uniq -c | head -20
echo "memcheck exit code $rc"

RC=${RACECHECK_FILTER:-PrefillGpu.EveryDtype*}
echo "== compute-sanitizer racecheck ($RC)"
timeout "${T_RACECHECK:-60}" compute-sanitizer --tool racecheck --error-exitcode 99 \
  bin/kvcache_gpu_tests --gtest_filter="$RC" >"$OUT/racecheck.log" 2>&1
rc=$?; [ $rc -ne 0 ] && STATUS=1
grep -E "RACECHECK SUMMARY|^\[  (FAILED|PASSED) " "$OUT/racecheck.log" | head -5
echo "racecheck exit code $rc"

if [ "${PREFILL_BENCH:-1}" = 1 ]; then
  echo "== prefill benchmark"
  timeout "${T_BENCH:-60}" bin/bench_prefill_attention --json "$OUT/prefill.jsonl" \
    >"$OUT/prefill_bench.log" 2>&1
  echo "exit $?"; cat "$OUT/prefill_bench.log"
  echo "== torch peers"
  PYTHONUNBUFFERED=1 timeout "${T_TORCH:-90}" python3 bench/torch_prefill.py \
    --prefill-json "$OUT/prefill.jsonl" --out "$OUT/prefill-report.md" \
    --command "bench/gpu_prebuilt_check.sh (prebuilt binaries)" >"$OUT/torch.log" 2>&1
  echo "exit $?"; tail -3 "$OUT/torch.log"
fi
exit $STATUS
