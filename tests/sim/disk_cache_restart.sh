#!/usr/bin/env bash
# kvcache-sim --disk-cache: the same workload twice on one directory; the
# second run starts with the blocks the first one wrote, so it loads more
# blocks from the disk and reuses more prompt tokens.
#   disk_cache_restart.sh KVCACHE_SIM
set -euo pipefail
sim=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
run() {
  "$sim" --tenants 2 --chats 3 --turns 2 --preamble-tokens 128 --system-tokens 256 \
    --question-tokens 64 --answer-tokens 16 --model tiny --memory 4K \
    --disk-cache "$dir:4M" --no-progress --json
}
field() { sed -n "s/.*\"$1\": \([0-9.]*\).*/\1/p" | head -1; }
first=$(run)
second=$(run)
loaded1=$(echo "$first" | field disk_blocks_loaded)
loaded2=$(echo "$second" | field disk_blocks_loaded)
reused1=$(echo "$first" | field reused_tokens)
reused2=$(echo "$second" | field reused_tokens)
written=$(echo "$first" | field disk_blocks_written)
echo "first run: $written blocks to disk, $loaded1 loaded, $reused1 tokens reused"
echo "second run: $loaded2 loaded, $reused2 tokens reused"
[ "$written" -gt 0 ] || { echo "FAIL: nothing written to the disk"; exit 1; }
[ "$loaded2" -gt "$loaded1" ] || { echo "FAIL: the second run loaded no more"; exit 1; }
[ "$reused2" -gt "$reused1" ] || { echo "FAIL: the second run reused no more"; exit 1; }
if "$sim" --model tiny --disk-cache "$dir:4M" --compare --no-progress >/dev/null 2>&1; then
  echo "FAIL: --compare with --disk-cache was accepted"; exit 1
fi
echo "OK"
