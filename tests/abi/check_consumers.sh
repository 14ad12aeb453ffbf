#!/usr/bin/env bash
# Installs the build into a fresh prefix and builds a C program against it
# twice: with `pkg-config --cflags --libs kvcache` and with CMake's
# find_package(kvcache). Both must build and run.
# usage: check_consumers.sh BUILD_DIR SOURCE_DIR CC CMAKE HEADER_VERSION
set -euo pipefail
build=$1 src=$2 cc=$3 cmake=$4 version=$5
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
"$cmake" --install "$build" --prefix "$prefix/usr" >/dev/null
pcdir=$(dirname "$(find "$prefix" -name kvcache.pc | head -n1)")
libdir=$(dirname "$pcdir")
pass=0

echo "== pkg-config consumer (prefix $prefix/usr)"
export PKG_CONFIG_PATH=$pcdir
modversion=$(pkg-config --modversion kvcache)
flags=$(pkg-config --cflags --libs kvcache)
echo "pkg-config --modversion kvcache: $modversion"
echo "pkg-config --cflags --libs kvcache: $flags"
if [ "$modversion" != "$version" ]; then
  echo "FAIL: pkg-config version $modversion != header version $version"; exit 1
fi
# shellcheck disable=SC2086
"$cc" -std=c99 -Wall -Wextra -Werror -o "$prefix/consumer_pc" "$src/tests/abi/consumer/consumer.c" $flags
LD_LIBRARY_PATH=$libdir "$prefix/consumer_pc"
pass=$((pass + 1))

echo "== find_package(kvcache) consumer"
"$cmake" -S "$src/tests/abi/consumer" -B "$prefix/cmake-build" -DCMAKE_PREFIX_PATH="$prefix/usr" \
  -DCMAKE_C_COMPILER="$cc" >/dev/null
"$cmake" --build "$prefix/cmake-build" >/dev/null
"$prefix/cmake-build/consumer"
pass=$((pass + 1))
echo "$pass passed, 0 failed"
