#!/usr/bin/env bash
# Runs bench_redis_tier (onboard throughput from the Redis remote tier
# against redis-benchmark GET of the same sizes) against a redis-server it
# starts on a free loopback port in a temporary directory, without
# persistence, and stops at the end.
#   bench/redis_tier.sh BUILD_DIR [bench_redis_tier arguments...]
# BUILD_DIR: a build with -DKVCACHE_BUILD_BENCH=ON (the bench preset).
set -euo pipefail
build=${1:?usage: bench/redis_tier.sh BUILD_DIR [args...]}
shift
bin="$build/bench/bench_redis_tier"
[ -x "$bin" ] || { echo "no $bin: build the bench_redis_tier target" >&2; exit 1; }
tmp=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --dir "$tmp" --save '' --appendonly no \
  --daemonize no --logfile "$tmp/redis.log" &
pid=$!
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -rf "$tmp"' EXIT
for _ in $(seq 1 500); do
  redis-cli -p "$port" ping 2>/dev/null | grep -q PONG && break
  sleep 0.01
done
redis-cli -p "$port" ping | grep -q PONG || { echo "redis-server did not start" >&2; exit 1; }
echo "redis-server $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/') on 127.0.0.1:$port;" \
  "$(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')"
"$bin" --port "$port" "$@"
