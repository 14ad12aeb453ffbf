#!/usr/bin/env bash
# One call on the GPU machine for issue 25's CUDA IPC transport: builds
# Release with CUDA and the examples (cuda_ipc_transfer), runs the GPU tests
# (GPU_TEST_FILTER, default all), compute-sanitizer memcheck over the IPC
# tests with every process of the example checked (--target-processes all),
# and bench_ipc_transfer (IPC_BENCH=0 skips it). Logs go to $OUT (default ./out).
#   bench/ipc_device.sh
set -uo pipefail
source "$(dirname "$0")/../tests/gpu/device_env.sh"
BUILD=$ROOT/build-ipc-dev
STATUS=0
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
echo "== configure + build"
t0=$(date +%s)
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVCACHE_CUDA=ON \
  -DKVCACHE_BUILD_TESTS=ON -DKVCACHE_BUILD_BENCH=ON -DKVCACHE_BUILD_EXAMPLES=ON \
  -DKVCACHE_BINDING_RUST=OFF -DKVCACHE_BINDING_GO=OFF -DKVCACHE_BINDING_JAVA=OFF \
  -DCMAKE_PREFIX_PATH="$DEPS" >"$OUT/configure.log" 2>&1 || { tail -40 "$OUT/configure.log"; exit 1; }
cmake --build "$BUILD" -j"$(nproc)" --target kvcache_gpu_tests cuda_ipc_transfer bench_ipc_transfer \
  >"$OUT/build.log" 2>&1 || { grep -B2 -A12 -E "error|Error" "$OUT/build.log" | head -80; exit 1; }
echo "built in $(( $(date +%s) - t0 )) s"
export KVC_IPC_EXAMPLE=$BUILD/examples/cuda_ipc_transfer

echo "== GPU tests (${GPU_TEST_FILTER:-*})"
timeout "${GPU_TEST_TIMEOUT:-200}" "$BUILD/tests/gpu/kvcache_gpu_tests" \
  --gtest_filter="${GPU_TEST_FILTER:-*}" >"$OUT/gpu_tests.log" 2>&1
rc=$?; [ $rc -ne 0 ] && STATUS=1
grep -E "^\[  (FAILED|PASSED|SKIPPED) |Failure|Expected|Which is" "$OUT/gpu_tests.log" | head -60
grep -E "^\[==========\]" "$OUT/gpu_tests.log" | tail -1
echo "gpu tests exit code $rc"

echo "== compute-sanitizer memcheck (${MEMCHECK_FILTER:-CudaIpcTransfer.*:CudaPoolShare.*}, all processes)"
timeout 200 compute-sanitizer --tool memcheck --target-processes all --error-exitcode 99 \
  "$BUILD/tests/gpu/kvcache_gpu_tests" --gtest_filter="${MEMCHECK_FILTER:-CudaIpcTransfer.*:CudaPoolShare.*}" \
  >"$OUT/memcheck.log" 2>&1
rc=$?; [ $rc -ne 0 ] && STATUS=1
grep -E "ERROR SUMMARY|^\[  (FAILED|PASSED) " "$OUT/memcheck.log" | head -20
echo "memcheck exit code $rc"

[ "${IPC_BENCH:-1}" = 1 ] || exit $STATUS
echo "== bench_ipc_transfer"
timeout 150 "$BUILD/bench/bench_ipc_transfer" 2>&1 | tee "$OUT/bench_ipc_transfer.txt"
echo "bench exit code ${PIPESTATUS[0]}"
exit $STATUS
