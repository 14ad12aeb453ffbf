#!/usr/bin/env bash
# Issue 18 on the H100 (run from a copy of the tree holding .device-deps and
# prebuilt/, binaries built on the VM: Release, -DKVCACHE_CUDA=ON, sm_90):
# the GPU tests, compute-sanitizer memcheck over the stateful and decode
# tests, then bench_stateful (all parts) and part 3's B = 4, 16K points over
# 20 rounds of fresh allocations. Logs under $OUT.
set -uo pipefail
source tests/gpu/device_env.sh
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader | tee "$OUT/machine.txt"
lscpu | grep -E "Model name" | tee -a "$OUT/machine.txt"
P=prebuilt
chmod +x $P/*
echo "== GPU tests"
t0=$(date +%s)
timeout 150 $P/kvcache_gpu_tests >"$OUT/gpu_tests.log" 2>&1; echo "gpu tests rc $? in $(( $(date +%s) - t0 )) s"
grep -E "^\[  (FAILED|PASSED|SKIPPED) |^\[ +OK \] .*Stateful|Failure|Expected|Which is|relative|differ" "$OUT/gpu_tests.log" | head -60
echo "== memcheck (stateful + decode)"
t0=$(date +%s)
timeout 170 compute-sanitizer --tool memcheck --error-exitcode 99 $P/kvcache_gpu_tests \
  --gtest_filter='*Stateful*:Kernels.Decode*' --gtest_brief=1 >"$OUT/memcheck.log" 2>&1
echo "memcheck rc $? in $(( $(date +%s) - t0 )) s"; tail -6 "$OUT/memcheck.log"
echo "== bench"
t0=$(date +%s)
timeout 200 $P/bench_stateful 2>&1 | tee "$OUT/bench_stateful.md"
echo "bench rc ${PIPESTATUS[0]} in $(( $(date +%s) - t0 )) s"
# Issue 18's tightest recorded point (B = 4, 16K), on 20 fresh allocations.
echo "== part 3 at B = 4, 16K, 20 rounds"
t0=$(date +%s)
timeout 60 $P/bench_stateful decode B=4 ctx=16384 trials=20 pairs=5 2>&1 | tee "$OUT/bench_decode_b4_16k.md"
echo "rounds rc ${PIPESTATUS[0]} in $(( $(date +%s) - t0 )) s"
