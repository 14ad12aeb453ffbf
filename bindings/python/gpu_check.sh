#!/usr/bin/env bash
# On the GPU machine: the CUDA strided-store GPU tests (and the store tests
# beside them), compute-sanitizer memcheck over the strided ones, the Python
# binding's unit tests (test_cuda.py included: torch on cuda:0) and
# examples/python/transformers_e2e.py, against a CUDA build of libkvcache.
# Logs go to $OUT (default ./out).
#
#   bindings/python/gpu_check.sh [PREBUILT]
#
# PREBUILT: a folder holding libkvcache.so.0 and kvcache_gpu_tests built
# elsewhere with -DKVCACHE_CUDA=ON (they need no library the machine lacks);
# without it, or when they do not run there, both are built here first
# (.device-deps carried, as tests/gpu/device_env.sh says).
set -uo pipefail
source "$(dirname "$0")/../../tests/gpu/device_env.sh"
PREBUILT=${1:-}
STATUS=0
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/machine.txt"
python3 -c 'import torch, transformers, numpy; print("torch", torch.__version__, "transformers", transformers.__version__, "numpy", numpy.__version__)' | tee -a "$OUT/machine.txt"
if [ -n "$PREBUILT" ] && "$PREBUILT/kvcache_gpu_tests" --gtest_list_tests >/dev/null 2>&1; then
  LIB=$PREBUILT/libkvcache.so.0 TESTS=$PREBUILT/kvcache_gpu_tests
  echo "== prebuilt binaries from $PREBUILT"
else
  echo "== building (CUDA, release)"
  BUILD=$ROOT/build-py-dev
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVCACHE_CUDA=ON \
    -DKVCACHE_BUILD_EXAMPLES=OFF -DKVCACHE_BUILD_BINDINGS=OFF -DCMAKE_PREFIX_PATH="$DEPS" \
    >"$OUT/configure.log" 2>&1 || { tail -30 "$OUT/configure.log"; exit 1; }
  cmake --build "$BUILD" -j16 --target kvcache kvcache_gpu_tests >"$OUT/build.log" 2>&1 ||
    { grep -B2 -A10 -E "error" "$OUT/build.log" | head -60; exit 1; }
  LIB=$BUILD/libkvcache.so.0 TESTS=$BUILD/tests/gpu/kvcache_gpu_tests
fi
echo "== GPU tests: strided store and store"
timeout 200 "$TESTS" --gtest_filter='StoreStrided*:Kernels.Store*' >"$OUT/gpu_tests.log" 2>&1 || STATUS=1
grep -E "^\[  (FAILED|PASSED|SKIPPED) |OK \]|Failure|Expected|first difference" "$OUT/gpu_tests.log" | head -30
echo "== compute-sanitizer memcheck (StoreStrided*)"
timeout 200 compute-sanitizer --tool memcheck --error-exitcode 99 "$TESTS" \
  --gtest_filter='StoreStrided*' --gtest_brief=1 >"$OUT/memcheck.log" 2>&1 || STATUS=1
tail -4 "$OUT/memcheck.log"
export KVCACHE_LIBRARY=$(readlink -f "$LIB") PYTHONPATH=$ROOT/bindings/python PYTHONUNBUFFERED=1
echo "== Python unit tests"
(cd bindings/python && timeout 200 python3 -m unittest discover -s tests -t tests -v) \
  >"$OUT/unittest.log" 2>&1 || STATUS=1
grep -E "^Ran|^OK|FAILED|Error|skipped|test_cuda" "$OUT/unittest.log" | head -20
echo "== examples/python/transformers_e2e.py"
timeout 300 python3 examples/python/transformers_e2e.py 2>&1 | tee "$OUT/transformers_e2e.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || STATUS=1
exit $STATUS
