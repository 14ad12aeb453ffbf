#!/usr/bin/env bash
# Hit rate of the simulator's multi-turn workload on the Nemotron-H-8B
# hybrid preset with the state published every 1, 4 and 16 blocks, and
# never, for two snapshot pool sizes (planned, and SNAPSHOTS). Prints one
# markdown row per run.
#
#   bench/hybrid_snapshots.sh BUILD_DIR [extra simulator options...]
set -euo pipefail
build="${1:?usage: bench/hybrid_snapshots.sh BUILD_DIR [options]}"
shift
sim="$build/examples/simulator/kvcache-sim"
snapshots="${SNAPSHOTS:-64}"
echo "| pool | publish every | hit rate | snapshot hits (tokens) | published (bytes copied) | evicted | wall s |"
echo "|---|---|---|---|---|---|---|"
for pool in 0 "$snapshots"; do
  for every in 0 16 4 1; do
    start=$(date +%s.%N)
    json=$("$sim" --model nemotron-h-8b --publish-every "$every" --state-snapshots "$pool" \
           --json --no-progress "$@")
    end=$(date +%s.%N)
    python3 - "$json" "$every" "$start" "$end" <<'PY'
import json, sys
d = json.loads(sys.argv[1])
r = d["runs"][0]
every = int(sys.argv[2])
wall = float(sys.argv[4]) - float(sys.argv[3])
gib = r["snapshots_published"] * r["snapshot_bytes"] / 2**30
rate = 100.0 * r["reused_tokens"] / r["prompt_tokens"]
print(f"| {r['snapshot_slots']} x {r['snapshot_bytes'] / 2**20:.1f} MiB | "
      f"{every if every else 'never'} | {rate:.1f}% | {r['snapshot_hits']} ({r['snapshot_hit_tokens']}) | "
      f"{r['snapshots_published']} ({gib:.1f} GiB) | {r['snapshots_evicted']} | {wall:.0f} |")
PY
  done
done
