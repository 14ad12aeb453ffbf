#!/usr/bin/env bash
# Builds libkvcache the way the ABI baseline is built (-Og, CPU backend
# only, so the dump does not depend on the machine having nvcc; xxhash's
# forced inlining does not build at -Og, so its hints are off) in WORK and
# dumps the ABI of its public headers with abi-dumper.
# Debug information comes from the C API's sources only (src/capi: every
# exported function is defined there, so their DWARF carries every public
# type). The internals' DWARF, most of the library's, is what abi-dumper
# spent its time reading (78 s of a 143 s check on 2 cores, now 18 s of 60).
# A dump made this way and one made with the whole library's debug
# information are equal to abi-compliance-checker both ways (0 problems, 0
# warnings) and list the same functions.
# With --break, first applies two deliberate ABI breaks to the copied tree
# (a field inserted mid-struct and a widened return type), so the suite can
# prove that the checker catches breaks.
# usage: abi_dump.sh SOURCE_DIR WORK_DIR OUT_DUMP [--break]
set -euo pipefail
src=$1 work=$2 out=$3 mode=${4:-}
rm -rf "$work"
mkdir -p "$work/tree"
for f in CMakeLists.txt include src cuda cmake pkgconfig; do cp -r "$src/$f" "$work/tree/"; done

if [ "$mode" = "--break" ]; then
  # 1. A field inserted in the middle of a transparent struct.
  sed -i 's/^\(  kvc_device_kind_t device_kind; \/\*\*< KVC_DEVICE_\*. \*\/\)$/  uint32_t abi_break_probe; \/**< Deliberate break. *\/\n\1/' \
    "$work/tree/include/kvcache/cache.h"
  grep -q abi_break_probe "$work/tree/include/kvcache/cache.h" || { echo "abi_dump: break 1 not applied"; exit 2; }
  # 2. A return type widened from 32 to 64 bits.
  sed -i 's/^KVC_API uint32_t kvc_version(void)/KVC_API uint64_t kvc_version(void)/' \
    "$work/tree/cmake/version.h.in" "$work/tree/src/capi/version_api.cpp"
  grep -q 'uint64_t kvc_version(void)' "$work/tree/cmake/version.h.in" || { echo "abi_dump: break 2 not applied"; exit 2; }
fi

cat >>"$work/tree/CMakeLists.txt" <<'CMAKE'
# abi_dump.sh: debug information for the C API's sources only.
file(GLOB abi_dump_capi_sources ${CMAKE_CURRENT_SOURCE_DIR}/src/capi/*.cpp)
set_source_files_properties(${abi_dump_capi_sources} TARGET_DIRECTORY kvcache_objects
                            PROPERTIES COMPILE_OPTIONS -g)
CMAKE
cmake -S "$work/tree" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
  -DCMAKE_C_FLAGS_DEBUG="-Og" \
  -DCMAKE_CXX_FLAGS_DEBUG="-Og -DXXH_NO_INLINE_HINTS=1" -DKVCACHE_CUDA=OFF \
  -DKVCACHE_BUILD_TESTS=OFF -DKVCACHE_BUILD_EXAMPLES=OFF -DKVCACHE_BUILD_BENCH=OFF \
  -DKVCACHE_BUILD_BINDINGS=OFF >/dev/null
cmake --build "$work/build" --target kvcache >/dev/null

mkdir -p "$work/headers/kvcache"
cp "$work/tree/include/kvcache/"*.h "$work/build/include/kvcache/version.h" "$work/headers/kvcache/"
version=$(sed -n 's/^#define KVC_VERSION_STRING "\(.*\)"$/\1/p' "$work/headers/kvcache/version.h")
abi-dumper "$work/build/libkvcache.so" -o "$out" -lver "$version" \
  -public-headers "$work/headers" -quiet >/dev/null
# Every exported function must be in the dump with its types: one defined
# outside src/capi has no debug information here.
exported=$(nm -D --defined-only "$work/build/libkvcache.so" | awk '$3 ~ /^kvc_/ {sub(/@.*/, "", $3); print $3}' | sort -u)
dumped=$(grep -oE "'ShortName' => 'kvc_[a-z0-9_]+'" "$out" | sed "s/.*=> '\(.*\)'/\1/" | sort -u)
missing=$(comm -23 <(echo "$exported") <(echo "$dumped"))
if [ -n "$missing" ]; then
  echo "abi_dump: exported but not in the dump (defined outside src/capi?): $missing"
  exit 2
fi
echo "abi_dump: $out (kvcache $version${mode:+, $mode})"
