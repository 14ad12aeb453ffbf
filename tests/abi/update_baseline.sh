#!/usr/bin/env bash
# Records the public API of a commit (HEAD by default; uncommitted changes
# never enter a baseline) as the ABI baseline: the abi-dumper dump and a
# snapshot of the headers, which the old-client test is compiled against.
# Run it only when a release fixes the ABI, and commit what it writes.
# usage: tests/abi/update_baseline.sh [COMMIT]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
base=$root/tests/abi/baseline
mkdir -p "$work/src"
git -C "$root" archive "${1:-HEAD}" | tar -x -C "$work/src"
"$root/tests/abi/abi_dump.sh" "$work/src" "$work/dump" "$work/kvcache.dump"
rm -rf "$base/include" && mkdir -p "$base/include/kvcache"
cp "$work/dump/headers/kvcache/"*.h "$base/include/kvcache/"
# Paths inside the dump name the temporary tree; normalise them so the file
# does not change with the machine it was made on.
sed "s|$work/dump/|/kvcache/|g" "$work/kvcache.dump" >"$base/kvcache.dump"
echo "baseline updated: $base"
