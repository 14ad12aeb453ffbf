#!/bin/bash
# The Java binding on the GPU machine, which has no JDK, SWIG or network.
#
#   bindings/java/gpu_check.sh pack BUILD   # here: BUILD is a build folder of
#                                           # this tree with the Java binding
#                                           # (and java_overhead_bench) built
#   bindings/java/gpu_check.sh tests        # there: CUDA build of libkvcache,
#                                           # the JNI library compiled against
#                                           # it, the JUnit suite
#   bindings/java/gpu_check.sh bench        # there: the overhead benchmark
#
# `pack` fills BUILD/devbench (git-ignored, ~50 MB) with what travels: a
# jlink'd Java 17 runtime, JUnit's console launcher, the JNI C file SWIG
# generated, the jars, the test classes, the JNI headers, and for `bench`
# the CPU-only libraries of BUILD. Then, from the repository root, call the
# device tool with carry ["BUILD/devbench", ".device-deps"] (.device-deps:
# libxxhash for the library build, see bench/README-gpu.md) and the command
# `JAVA_BUNDLE=BUILD/devbench bindings/java/gpu_check.sh tests`.
set -uo pipefail
ROOT=$(pwd)
mode=${1:-tests}

if [ "$mode" = pack ]; then
  B=${2:?usage: gpu_check.sh pack BUILD}
  D=$B/devbench
  JDK=$(dirname "$(dirname "$(readlink -f "$(command -v javac)")")")
  rm -rf "$D" && mkdir -p "$D/lib" || exit 1
  "$JDK/bin/jlink" --add-modules java.base,java.logging,java.management,java.xml,jdk.unsupported \
    --strip-debug --no-header-files --no-man-pages --compress=2 --output "$D/jre" || exit 1
  cp -r "$JDK/include" "$D/jni"
  cp /usr/share/java/junit-platform-console-standalone.jar "$D/junit.jar"
  J=$B/bindings/java
  cp "$J/generated/kvcache_wrap.c" "$J"/kvcache-*.jar "$D/" || exit 1
  cp -r "$J/test-classes" "$D/"
  cp -L "$B/libkvcache.so.0" "$D/lib/"
  cp -L "$(ldconfig -p | awk '/libxxhash.so.0 /{print $NF; exit}')" "$D/lib/"
  [ -f "$J/libkvcache_java_bench_native.so" ] && cp "$J/libkvcache_jni.so" "$J/libkvcache_java_bench_native.so" "$D/"
  du -sh "$D"
  exit 0
fi

D=${JAVA_BUNDLE:?set JAVA_BUNDLE to the packed folder}
D=$(cd "$D" && pwd)
OUT=${OUT:-$ROOT/out}
mkdir -p "$OUT"

if [ "$mode" = bench ]; then
  # The CPU-only libraries packed from BUILD: the same bits as the dev VM run.
  export LD_LIBRARY_PATH=$D/lib
  echo "machine:$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2) x $(nproc) cores; load: $(cut -d' ' -f1-3 /proc/loadavg)"
  pin=""; [ "$(nproc)" -ge 8 ] && pin="taskset -c 2-5"
  $pin "$D/jre/bin/java" -Dorg.kvcache.library.path="$D/libkvcache_jni.so" \
    -Dkvcache.bench.native="$D/libkvcache_java_bench_native.so" \
    -cp "$D/kvcache-${KVC_VERSION:-0.2.0}.jar:$D/kvcache-java-bench.jar" org.kvcache.JavaOverhead \
    "${2:-2000000}" "${3:-9}" | tee "$OUT/java-overhead.txt"
  exit
fi

DEPS=$ROOT/.device-deps/root/usr
LIBDIR=$DEPS/lib/x86_64-linux-gnu
sed -i "s|^prefix=.*|prefix=$DEPS|" "$LIBDIR"/pkgconfig/*.pc
export PKG_CONFIG_PATH=$LIBDIR/pkgconfig
export LD_LIBRARY_PATH=$LIBDIR
export PATH=/usr/local/cuda/bin:$PATH
B=/tmp/kvcache-java-cuda
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKVCACHE_CUDA=ON \
  -DKVCACHE_BUILD_TESTS=OFF -DKVCACHE_BUILD_EXAMPLES=OFF -DKVCACHE_BUILD_BINDINGS=OFF \
  -DCMAKE_PREFIX_PATH="$DEPS" > "$OUT/configure.log" 2>&1 || { tail -30 "$OUT/configure.log"; exit 1; }
cmake --build $B -j"$(nproc)" --target kvcache > "$OUT/build.log" 2>&1 \
  || { grep -B2 -A10 error "$OUT/build.log" | head -60; exit 1; }
gcc -std=c99 -O2 -Wall -Wextra -shared -fPIC -fno-strict-aliasing -o $B/libkvcache_jni.so \
  "$D/kvcache_wrap.c" -Iinclude -I$B/include -I"$D/jni" -I"$D/jni/linux" \
  -L$B -lkvcache -Wl,-rpath,$B -Wl,--no-undefined || exit 1
ldd $B/libkvcache_jni.so | grep kvcache
jar=$(ls "$D"/kvcache-[0-9]*.jar)
"$D/jre/bin/java" -Xcheck:jni -Dorg.kvcache.library.path=$B/libkvcache_jni.so \
  -Dkvcache.test.jar="$jar" -jar "$D/junit.jar" \
  --class-path "$jar:$D/test-classes" --select-package org.kvcache.tests \
  --fail-if-no-tests --disable-banner --disable-ansi-colors --details=tree 2>&1 | tee "$OUT/junit.log"
