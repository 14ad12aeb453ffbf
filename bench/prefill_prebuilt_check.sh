#!/usr/bin/env bash
# The steps of `bench/gpu_check.sh prefill` on binaries built beforehand
# (where device minutes are scarce: the device builds nothing). Build here:
#   cmake -S . -B build/cuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVCACHE_CUDA=ON \
#     -DKVCACHE_BUILD_TESTS=ON -DKVCACHE_BUILD_BENCH=ON -DKVCACHE_BUILD_EXAMPLES=OFF
#   ninja -C build/cuda kvcache_gpu_tests bench_prefill_attention
# copy the two binaries into bin/ and libhiredis.so.0.14 (if linked) into
# lib/ of the tree sent to the GPU machine, then run this from its root
# with .device-deps carried: prefill GPU tests, memcheck and racecheck over
# prefill tests (narrower filters than gpu_check.sh), the prefill benchmark
# and its PyTorch peers (report in $OUT/prefill-h200.md). Each step's time
# limit (seconds) can be narrowed: T_TESTS, T_MEMCHECK, T_RACECHECK,
# T_BENCH, T_TORCH.
set -u
R=$(pwd)
export LD_LIBRARY_PATH=$R/lib:$R/.device-deps/root/usr/lib/x86_64-linux-gnu
OUT=${OUT:-$R/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
echo "== GPU tests (*Prefill*)"
timeout ${T_TESTS:-60} bin/kvcache_gpu_tests --gtest_filter='*Prefill*' >"$OUT/gpu_tests.log" 2>&1; echo "exit $?"
grep -E "^\[  (FAILED|PASSED|SKIPPED) |OK \]|Failure|Expected|relative|lse\[" "$OUT/gpu_tests.log" | head -40
echo "== memcheck"
timeout ${T_MEMCHECK:-35} compute-sanitizer --tool memcheck --error-exitcode 99 bin/kvcache_gpu_tests \
  --gtest_filter='PrefillGpu.EveryDtype*:PrefillGpu.SplitKv*:PrefillGpu.ReportsErrors' >"$OUT/memcheck.log" 2>&1; echo "exit $?"
grep -E "^\[       OK|^\[  FAILED|ERROR SUMMARY|Invalid" "$OUT/memcheck.log" | head -12
echo "== racecheck"
timeout ${T_RACECHECK:-35} compute-sanitizer --tool racecheck --error-exitcode 99 bin/kvcache_gpu_tests \
  --gtest_filter='PrefillGpu.EveryDtype*' >"$OUT/racecheck.log" 2>&1; echo "exit $?"
grep -E "^\[       OK|^\[  FAILED|RACECHECK SUMMARY|Hazard" "$OUT/racecheck.log" | head -12
echo "== bench"
timeout ${T_BENCH:-40} bin/bench_prefill_attention --json "$OUT/prefill.jsonl" >"$OUT/prefill_bench.log" 2>&1; echo "exit $?"
cat "$OUT/prefill_bench.log"
echo "== torch peers"
PYTHONUNBUFFERED=1 timeout ${T_TORCH:-75} python3 bench/torch_prefill.py --prefill-json "$OUT/prefill.jsonl" \
  --out "$OUT/prefill-h200.md" --command "run_final.sh: prebuilt kvcache_gpu_tests + bench_prefill_attention, the steps of bench/gpu_check.sh prefill" >"$OUT/torch.log" 2>&1; echo "exit $?"
tail -3 "$OUT/torch.log"
