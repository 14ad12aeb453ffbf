#!/usr/bin/env bash
# Picks the committed seeds of a configuration from a campaign's corpus:
# libFuzzer's merge keeps the inputs that add features, then the N longest
# of them (the longest programs reach the most states) replace OUT_DIR.
# Prints the features the picked seeds reach against the whole corpus.
#
# usage: tests/fuzz/pick_seeds.sh BINARY CORPUS_DIR OUT_DIR [N]   (N: 40)
set -euo pipefail
bin=$1 corpus=$2 out=$3 n=${4:-40}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/merged" "$tmp/picked"
"$bin" -merge=1 -max_len=4096 "$tmp/merged" "$corpus" >"$tmp/merge.log" 2>&1
ls -S "$tmp/merged" >"$tmp/by-size"
head -n "$n" "$tmp/by-size" | while read -r f; do cp "$tmp/merged/$f" "$tmp/picked/"; done
features() {
  "$bin" -runs=0 -max_len=4096 "$1" >"$tmp/run.log" 2>&1 || true
  grep -o 'INITED cov: [0-9]* ft: [0-9]*' "$tmp/run.log" | tail -1
}
echo "corpus ($(ls "$corpus" | wc -l) inputs): $(features "$corpus")"
echo "merged ($(ls "$tmp/merged" | wc -l) inputs): $(features "$tmp/merged")"
echo "picked ($(ls "$tmp/picked" | wc -l) inputs): $(features "$tmp/picked")"
rm -rf "$out"
mkdir -p "$out"
cp "$tmp/picked/"* "$out/"
