#!/usr/bin/env bash
# Runs the per-call overhead benchmark (BenchmarkOverhead in
# overhead_test.go) and prints a Markdown table of medians over the runs:
# wall ns/op and thread-CPU ns/op of each call from C, through kvc (the SWIG
# layer) and through kvcache (the idiomatic package), and the overhead of
# each Go path over C (cpu ns/op minus C's).
#
#   PKG_CONFIG_PATH=<build dir> bindings/go/bench-table.sh [COUNT] [BENCHTIME]
#
# The raw `go test -bench` output goes to stderr.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
count="${1:-10}"
benchtime="${2:-0.5s}"
cd "$here"
go test -run '^$' -bench Overhead -benchmem -benchtime "$benchtime" -count "$count" . | tee /dev/stderr |
awk '
function median(list,    n, a, i, j, t) {
  n = split(list, a, " ")
  for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
  return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
/^BenchmarkOverhead\// {
  name = $1; sub(/^BenchmarkOverhead\//, "", name); sub(/-[0-9]+$/, "", name)
  split(name, parts, "/"); call = parts[1]; path = parts[2]
  if (!(call in seen)) { seen[call] = 1; order[++ncalls] = call }
  wall[call, path] = wall[call, path] " " $3
  for (i = 4; i < NF; i++) {
    if ($(i + 1) == "cpu-ns/op") cpu[call, path] = cpu[call, path] " " $i
    if ($(i + 1) == "allocs/op") allocs[call, path] = $i
  }
}
END {
  print "| call | path | wall ns/op | cpu ns/op | overhead over C (cpu ns) | allocs/op |"
  print "|---|---|---:|---:|---:|---:|"
  for (k = 1; k <= ncalls; k++) {
    call = order[k]
    c = median(cpu[call, "C"])
    split("C kvc kvcache", paths, " ")
    for (p = 1; p <= 3; p++) {
      path = paths[p]
      if (!((call, path) in cpu)) continue
      m = median(cpu[call, path])
      over = (path == "C") ? "-" : sprintf("%.1f", m - c)
      printf "| %s | %s | %.1f | %.1f | %s | %s |\n", call, path, median(wall[call, path]), m, over, allocs[call, path]
    }
  }
}'
