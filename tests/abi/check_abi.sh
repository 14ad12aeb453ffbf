#!/usr/bin/env bash
# Compares the current tree's ABI with the committed baseline using
# abi-compliance-checker (binary and source compatibility; not -strict,
# which would reject appending fields to size-prefixed structs), and
# abidiff as a second opinion on the symbol set.
# With --expect-break, builds the deliberately broken variant instead and
# passes only if the checker reports it incompatible.
# usage: check_abi.sh SOURCE_DIR [--expect-break]
set -euo pipefail
src=$1 mode=${2:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
baseline=$src/tests/abi/baseline/kvcache.dump
[ -f "$baseline" ] || { echo "FAIL: no baseline at $baseline (run tests/abi/update_baseline.sh)"; exit 1; }

if [ "$mode" = "--expect-break" ]; then
  "$src/tests/abi/abi_dump.sh" "$src" "$work/dump" "$work/new.dump" --break
else
  "$src/tests/abi/abi_dump.sh" "$src" "$work/dump" "$work/new.dump"
fi
set +e
abi-compliance-checker -l kvcache -old "$baseline" -new "$work/new.dump" \
  -report-path "$work/report.html" >"$work/acc.log" 2>&1
acc=$?
set -e
grep -E "compatibility|problems" "$work/acc.log" || cat "$work/acc.log"

if [ "$mode" = "--expect-break" ]; then
  # Both planted breaks must be named in the report.
  if [ $acc -ne 1 ]; then echo "FAIL: checker exit $acc on a broken ABI (expected 1)"; exit 1; fi
  for what in kvc_cache_desc kvc_version; do
    grep -q "$what" "$work/report.html" || { echo "FAIL: report does not name $what"; exit 1; }
  done
  echo "the planted breaks (field inserted in kvc_cache_desc, kvc_version widened) were caught"
  echo "1 passed, 0 failed"
  exit 0
fi
if [ $acc -ne 0 ]; then
  echo "FAIL: ABI or API incompatible with the baseline (abi-compliance-checker exit $acc)."
  echo "A break needs a new name (and the old one kept), never a changed one; see README 'ABI'."
  sed -e 's/<[^>]*>/ /g' "$work/report.html" | tr -s ' \n' | grep -iE "problem|change|remov" | head -40
  exit 1
fi
# Second opinion: no exported function of the baseline may disappear.
old_syms=$(grep -oE "'ShortName' => 'kvc_[a-z0-9_]+'" "$baseline" | sort -u)
new_syms=$(grep -oE "'ShortName' => 'kvc_[a-z0-9_]+'" "$work/new.dump" | sort -u)
removed=$(comm -23 <(echo "$old_syms") <(echo "$new_syms"))
if [ -n "$removed" ]; then echo "FAIL: functions removed: $removed"; exit 1; fi
echo "1 passed, 0 failed"
