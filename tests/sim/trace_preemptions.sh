#!/usr/bin/env bash
# kvcache-sim on a trace through a pool small enough to preempt sequences
# during their chunked prefills, without and with a disk tier:
#  - every request completes (or is rejected, larger than the whole cache)
#    and each prompt counts once (prompt_tokens is
#    the trace's sum of input_length: a request preempted before it decoded
#    anything is not a new prompt when it comes back);
#  - with the disk tier, an add finds more than kvc_cache_probe said (blocks
#    loaded from the disk), and a chunked prefill still stays the newest
#    sequence (the simulator used to admit more after it and stop).
#   trace_preemptions.sh KVCACHE_SIM TRACE plain|disk SIM_ARGS...
# (SIM_ARGS: at least --memory, small enough for preemptions; plain: the
# run without a tier only, for Debug builds, where the library checks every
# invariant after every change and a replay long enough to load blocks from
# the disk takes minutes)
set -euo pipefail
sim=$1
trace=$2
mode=$3
shift 3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# The run's field (the JSON names the workload's requests and prompt_tokens
# first, then each run's).
field() { grep -o "\"$1\": [0-9.]*" | tail -1 | awk '{print $2}'; }
run() {
  "$sim" --trace "$trace" --model tiny --no-progress --json "$@"
}
# The workload's prompt tokens: the sum of the replayed records' input_length
# (the JSON's first prompt_tokens).
first() { grep -o "\"$1\": [0-9.]*" | head -1 | awk '{print $2}'; }
check() {  # NAME JSON
  local requests completed rejected prompt want_prompt
  requests=$(echo "$2" | field requests)
  completed=$(echo "$2" | field completed)
  rejected=$(echo "$2" | field rejected)
  prompt=$(echo "$2" | field prompt_tokens)
  want_prompt=$(echo "$2" | first prompt_tokens)
  echo "$1: $completed of $requests completed ($rejected larger than the cache), $prompt prompt tokens" \
    "(the trace's: $want_prompt), $(echo "$2" | field preemptions) preemptions," \
    "hit rate $(echo "$2" | field hit_rate)"
  [ $((completed + rejected)) = "$requests" ] ||
    { echo "FAIL: $1: not every request completed"; exit 1; }
  [ "$prompt" = "$want_prompt" ] || { echo "FAIL: $1: prompts counted more than once"; exit 1; }
}
plain=$(run "$@")
check "no tier" "$plain"
[ "$(echo "$plain" | field preemptions)" -gt 0 ] ||
  { echo "FAIL: no preemption: the pool no longer exercises the case"; exit 1; }
[ "$mode" = disk ] || { echo "OK"; exit 0; }
disk=$(run --disk-cache "$dir:1G" "$@")
check "disk tier" "$disk"
[ "$(echo "$disk" | field disk_blocks_loaded)" -gt 0 ] ||
  { echo "FAIL: nothing loaded from the disk: the case is not exercised"; exit 1; }
echo "OK"
