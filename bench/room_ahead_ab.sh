#!/usr/bin/env bash
# Room ahead on and off (issue 24), alternated run by run with one binary:
# kvcache-sim on the Mooncake conversation trace, the rows of issue 24
# (unlimited, 12M and 40M bytes, 12M with a 40M host tier), each row run
# with the simulator's default (kvc_cache_make_room while the device runs a
# step, timed apart) and with --no-room-ahead (every eviction on the call
# that needs the room), one after the other, ROUNDS times. This VM runs in
# phases of minutes, so only runs next to each other compare.
#
#   bench/room_ahead_ab.sh SIM TRACE [ROUNDS]
#
# Prints one line per run: the bookkeeping per step (wall p50, p99, p99.9,
# max; CPU p50, p99), the room made ahead per step (wall p50, p99) and the
# hit rate. Runs are pinned to CPU $PIN (default 1) where taskset exists.
set -euo pipefail
SIM=$1
TRACE=$2
ROUNDS=${3:-3}
PIN=${PIN:-1}
pin=()
command -v taskset >/dev/null && pin=(taskset -c "$PIN")
field() {  # field LABEL COLUMN: the value of a table row
  grep -F "$1" | head -1 | awk -v c="$2" '{print $c}'
}
for round in $(seq 1 "$ROUNDS"); do
  for row in "--memory unlimited" "--memory 12000000" "--memory 40000000" \
             "--memory 12000000 --host-cache 40000000"; do
    for mode in on off; do
      extra=()
      [ "$mode" = off ] && extra=(--no-room-ahead)
      # shellcheck disable=SC2086
      out=$("${pin[@]}" "$SIM" --trace "$TRACE" --model tiny $row --no-progress "${extra[@]}" 2>&1)
      echo "$(date -u +%H:%M:%S) round $round | $row | room ahead $mode" \
        "| p50 $(echo "$out" | field 'bookkeeping/step p50' 3)" \
        "p99 $(echo "$out" | field 'bookkeeping/step p99 ' 3)" \
        "p99.9 $(echo "$out" | field 'bookkeeping/step p99.9' 3)" \
        "max $(echo "$out" | field 'bookkeeping/step max' 3)" \
        "| cpu p50 $(echo "$out" | field 'bookkeeping CPU/step p50' 4)" \
        "p99 $(echo "$out" | field 'bookkeeping CPU/step p99 ' 4)" \
        "| ahead p50 $(echo "$out" | field 'room ahead/step p50' 4)" \
        "p99 $(echo "$out" | field 'room ahead/step p99' 4)" \
        "| hit $(echo "$out" | field 'hit rate' 3)"
    done
  done
done
