#!/usr/bin/env bash
# Issue 18 on the H100 (run from a copy of the tree holding .device-deps and
# prebuilt/): GPU tests, memcheck, bench_stateful. Prebuilt binaries
# (sm_90, built on the VM) first; a build here only if they do not run.
set -uo pipefail
source tests/gpu/device_env.sh
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader | tee "$OUT/machine.txt"
lscpu | grep -E "Model name" | tee -a "$OUT/machine.txt"
P=prebuilt
chmod +x $P/*
if ! $P/kvcache_gpu_tests --gtest_list_tests >/dev/null 2>"$OUT/prebuilt.err"; then
  echo "prebuilt binaries do not run: $(head -c 300 $OUT/prebuilt.err); building"
  cmake -S . -B bd -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVCACHE_CUDA=ON -DKVCACHE_BUILD_BENCH=ON \
    -DKVCACHE_BUILD_EXAMPLES=OFF -DKVCACHE_BUILD_BINDINGS=OFF -DCMAKE_PREFIX_PATH="$DEPS" >"$OUT/configure.log" 2>&1
  cmake --build bd -j16 --target kvcache_gpu_tests bench_stateful >"$OUT/build.log" 2>&1 || { grep -A8 error "$OUT/build.log" | head -40; exit 1; }
  mkdir -p p2 && cp bd/tests/gpu/kvcache_gpu_tests bd/bench/bench_stateful p2/ && P=p2
fi
echo "== GPU tests"
t0=$(date +%s)
timeout 120 $P/kvcache_gpu_tests >"$OUT/gpu_tests.log" 2>&1; echo "gpu tests rc $? in $(( $(date +%s) - t0 )) s"
grep -E "^\[  (FAILED|PASSED|SKIPPED) |^\[ +OK \] .*Stateful|Failure|Expected|Which is|relative|differ" "$OUT/gpu_tests.log" | head -60
echo "== memcheck (stateful + decode)"
t0=$(date +%s)
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 99 $P/kvcache_gpu_tests \
  --gtest_filter='*Stateful*:Kernels.Decode*' --gtest_brief=1 >"$OUT/memcheck.log" 2>&1
echo "memcheck rc $? in $(( $(date +%s) - t0 )) s"; tail -5 "$OUT/memcheck.log"
echo "== bench"
t0=$(date +%s)
timeout 150 $P/bench_stateful 2>&1 | tee "$OUT/bench_stateful.md"
echo "bench rc ${PIPESTATUS[0]} in $(( $(date +%s) - t0 )) s"
