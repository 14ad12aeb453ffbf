#!/usr/bin/env bash
# On a GPU machine: a release build with the CUDA backend, every ctest suite
# with a GPU present (the GPU tests, and the C API tests' CUDA paths), the
# demo on cuda:0, and the core benchmarks on that machine's idle CPU. Logs
# go to $OUT (default ./out). Dependencies the machine lacks (xxhash,
# cmocka, Google Benchmark) come as .deb packages unpacked into
# .device-deps/root, as tests/gpu/device_env.sh describes.
#   tests/gpu/device_ctest.sh
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
BUILD=$ROOT/build-device
STATUS=0
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/machine.txt"
lscpu | grep -E "Model name|^CPU\(s\)" | tee -a "$OUT/machine.txt"

cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVCACHE_CUDA=ON \
  -DKVCACHE_BUILD_BENCH=ON -DCMAKE_PREFIX_PATH="$DEPS" >"$OUT/configure.log" 2>&1 ||
  { tail -30 "$OUT/configure.log"; exit 1; }
cmake --build "$BUILD" -j16 >"$OUT/build.log" 2>&1 ||
  { grep -B2 -A10 -E "error|Error" "$OUT/build.log" | head -60; exit 1; }
echo "== ctest (GPU present)"
(cd "$BUILD" && timeout 300 ctest -j8 --output-on-failure >"$OUT/ctest.log" 2>&1) || STATUS=1
grep -E "tests passed|Failed|\*\*\*|Not Run" "$OUT/ctest.log" | head -20
"$BUILD/tests/c/test_foundation" 2>&1 | grep -E "test_cuda_request|PASSED|FAILED" | head -4
"$BUILD/tests/gpu/kvcache_gpu_tests" --gtest_brief=1 2>&1 | tail -3
echo "== demo on cuda:0"
"$BUILD/examples/describe_cache" cuda:0 || STATUS=1
echo "== core benchmarks (idle CPU of the GPU machine, one core)"
taskset -c 3 "$BUILD/bench/bench_core" --benchmark_min_time=0.3 --benchmark_repetitions=5 \
  --benchmark_report_aggregates_only=true >"$OUT/bench_core.log" 2>&1 || STATUS=1
tail -30 "$OUT/bench_core.log"
exit $STATUS
