#!/usr/bin/env bash
# Issue 23 on the GPU machine (run from a copy of the tree holding
# .device-deps): a Release build of the GPU tests, the resize C and C++
# tests and bench_resize; every GPU test (the pools are now VMM-mapped
# wherever the driver allows, so all of them exercise it),
# compute-sanitizer memcheck over the resize and pool tests (but the one
# whose cuMemCreate fails on purpose: memcheck counts a failed API call as
# an error), then
# bench_resize. Logs under $OUT.
set -uo pipefail
source tests/gpu/device_env.sh
BUILD=$ROOT/build-device
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/machine.txt"
t0=$(date +%s)
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVCACHE_CUDA=ON -DKVCACHE_BUILD_BENCH=ON \
  -DKVCACHE_TEST_README=OFF -DCMAKE_PREFIX_PATH="$DEPS" >"$OUT/configure.log" 2>&1 ||
  { tail -30 "$OUT/configure.log"; exit 1; }
cmake --build "$BUILD" -j16 --target kvcache_gpu_tests bench_resize test_resize test_foundation \
  kvcache_cpp_tests >"$OUT/build.log" 2>&1 ||
  { grep -B2 -A10 -E "error|Error" "$OUT/build.log" | head -60; exit 1; }
echo "build in $(( $(date +%s) - t0 )) s"
echo "== GPU tests"
t0=$(date +%s)
timeout 180 "$BUILD/tests/gpu/kvcache_gpu_tests" >"$OUT/gpu_tests.log" 2>&1; echo "gpu tests rc $? in $(( $(date +%s) - t0 )) s"
grep -E "^\[  (FAILED|PASSED|SKIPPED) |^\[ +OK \] .*Resize|Failure|Expected|Which is|error" "$OUT/gpu_tests.log" | head -60
echo "== C and C++ resize tests, test_foundation (CUDA paths)"
"$BUILD/tests/c/test_resize" 2>&1 | tail -2
"$BUILD/tests/c/test_foundation" 2>&1 | grep -E "FAILED|PASSED" | head -3
"$BUILD/tests/cpp/kvcache_cpp_tests" --gtest_filter='Resize*:RandomResize*:FaultInjection*' --gtest_brief=1 2>&1 | tail -3
echo "== memcheck (resize + pool tests)"
t0=$(date +%s)
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 99 "$BUILD/tests/gpu/kvcache_gpu_tests" \
  --gtest_filter='CudaResize.*:CudaPool.*:-CudaResize.AGrowBeyond*' --gtest_brief=1 >"$OUT/memcheck.log" 2>&1
echo "memcheck rc $? in $(( $(date +%s) - t0 )) s"; tail -8 "$OUT/memcheck.log"
echo "== bench_resize"
t0=$(date +%s)
timeout 150 "$BUILD/bench/bench_resize" 2>&1 | tee "$OUT/bench_resize.md"
echo "bench rc ${PIPESTATUS[0]} in $(( $(date +%s) - t0 )) s"
