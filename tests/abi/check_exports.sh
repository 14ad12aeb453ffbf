#!/usr/bin/env bash
# The symbols libkvcache exports are exactly the names of the version
# script, each bound to a version node, and the SONAME carries the ABI major.
# usage: check_exports.sh LIBRARY VERSION_SCRIPT ABI_MAJOR
set -euo pipefail
lib=$1 map=$2 abi=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0

"$(dirname "$0")/version_script_names.sh" "$map" >"$work/expected"
# Defined dynamic symbols, minus the version-node marker symbols.
nm -D --defined-only "$lib" | awk '$2 != "A" {print $3}' | sed 's/@.*//' | sort >"$work/actual"

if ! diff -u "$work/expected" "$work/actual" >"$work/diff"; then
  echo "FAIL: exported symbols differ from $map (- script only, + library only):"
  cat "$work/diff"
  fail=1
fi

# Every exported function carries a version node from the script.
nodes=$(grep -oE '^[A-Z0-9_.]+ *\{' "$map" | tr -d ' {' | paste -sd'|')
unversioned=$(objdump -T "$lib" | awk '$4 != "*UND*" && $NF ~ /^kvc_/ {print $(NF-1), $NF}' |
  grep -vE "^($nodes) " || true)
if [ -n "$unversioned" ]; then
  echo "FAIL: exported without a version node of $map:"; echo "$unversioned"
  fail=1
fi

soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
if [ "$soname" != "libkvcache.so.$abi" ]; then
  echo "FAIL: SONAME is '$soname', expected libkvcache.so.$abi"
  fail=1
fi

n=$(wc -l <"$work/actual")
echo "exported symbols ($n, all in version nodes $nodes; SONAME $soname):"
sed 's/^/  /' "$work/actual"
[ "$fail" -eq 0 ] && echo "1 passed, 0 failed" || echo "0 passed, 1 failed"
exit "$fail"
