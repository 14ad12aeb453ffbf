#!/usr/bin/env bash
# Builds the C API of libkvcache the way the ABI baseline is built (-Og, CPU
# backend only, so the dump does not depend on the machine having nvcc;
# xxhash's forced inlining does not build at -Og, so its hints are off) in
# WORK and dumps the ABI of its public headers with abi-dumper.
# Only the C API's sources are compiled (src/capi, with debug information):
# every exported function is defined there, so their objects, linked into a
# shared library with the version script and the internals left unresolved,
# export the same functions with the same types. The internals were most of
# the build (50 of 71 s on 2 cores) and their DWARF what abi-dumper spent
# its time reading. A dump made this way and one of the whole library are
# equal to abi-compliance-checker both ways (0 problems, 0 warnings) and list
# the same functions; the library's own exports are checked against the
# version script by abi.exported_symbols (check_exports.sh).
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
capi_objects=$(ninja -C "$work/build" -t targets all |
  grep -oE 'CMakeFiles/kvcache_objects\.dir/src/capi/[a-z0-9_]+\.cpp\.o' | sort -u)
[ -n "$capi_objects" ] || { echo "abi_dump: no object of src/capi in the build"; exit 2; }
ninja -C "$work/build" $capi_objects >/dev/null
(cd "$work/build" &&
  c++ -shared -Wl,--version-script="$work/tree/src/kvcache.map" -o libkvcache.so $capi_objects)

mkdir -p "$work/headers/kvcache"
cp "$work/tree/include/kvcache/"*.h "$work/build/include/kvcache/version.h" "$work/headers/kvcache/"
version=$(sed -n 's/^#define KVC_VERSION_STRING "\(.*\)"$/\1/p' "$work/headers/kvcache/version.h")
abi-dumper "$work/build/libkvcache.so" -o "$out" -lver "$version" \
  -public-headers "$work/headers" -quiet >/dev/null
# Every function of the version script must be in the dump with its types:
# one defined outside src/capi is not in this library.
exported=$("$(dirname "$0")/version_script_names.sh" "$work/tree/src/kvcache.map" | grep '^kvc_')
dumped=$(grep -oE "'ShortName' => 'kvc_[a-z0-9_]+'" "$out" | sed "s/.*=> '\(.*\)'/\1/" | sort -u)
missing=$(comm -23 <(echo "$exported") <(echo "$dumped"))
if [ -n "$missing" ]; then
  echo "abi_dump: exported but not in the dump (defined outside src/capi?): $missing"
  exit 2
fi
echo "abi_dump: $out (kvcache $version${mode:+, $mode})"
