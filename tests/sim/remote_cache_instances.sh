#!/usr/bin/env bash
# kvcache-sim --instances 2 --remote-cache: two engines, requests dealt to
# them in turn, on one redis-server this script starts on a free loopback
# port (and stops). Sharing the Redis tier, an engine loads blocks the other
# evicted, so the two together reuse more prompt tokens than without it, and
# more than with the same tier kept apart per engine (--remote-private).
# Skips (exit 0, saying why) without redis-server or hiredis.
#   remote_cache_instances.sh KVCACHE_SIM
set -euo pipefail
sim=$1
bin=${KVC_REDIS_SERVER:-$(command -v redis-server || true)}
[ -n "$bin" ] || { echo "SKIP: no redis-server (install redis-server)"; exit 0; }
dir=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$bin" --port "$port" --bind 127.0.0.1 --dir "$dir" --save '' --appendonly no \
  --logfile "$dir/redis.log" &
pid=$!
trap 'kill -9 $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -rf "$dir"' EXIT
for _ in $(seq 1 500); do  # bounded: PING until it answers
  python3 -c "import socket,sys; s=socket.create_connection(('127.0.0.1',$port),1); s.sendall(b'PING\r\n'); sys.exit(s.recv(7)!=b'+PONG\r\n')" 2>/dev/null && break
  sleep 0.01
done
run() {
  "$sim" --tenants 2 --chats 4 --turns 3 --preamble-tokens 128 --system-tokens 256 \
    --question-tokens 64 --answer-tokens 16 --model tiny --memory 4K --instances 2 \
    --no-progress --json "$@"
}
sum() { grep -o "\"$1\": [0-9]*" | awk '{s += $2} END {print s + 0}'; }
if ! shared=$(run --remote-cache "redis://127.0.0.1:$port/0" 2>"$dir/err"); then
  if grep -q "built without hiredis" "$dir/err"; then echo "SKIP: $(cat "$dir/err")"; exit 0; fi
  cat "$dir/err"; exit 1
fi
alone=$(run)
private=$(run --remote-cache "redis://127.0.0.1:$port/0" --remote-private)
written=$(echo "$shared" | sum remote_blocks_written)
loaded=$(echo "$shared" | sum remote_blocks_loaded)
reused_shared=$(echo "$shared" | sum reused_tokens)
reused_alone=$(echo "$alone" | sum reused_tokens)
reused_private=$(echo "$private" | sum reused_tokens)
echo "two instances sharing Redis: $written blocks written, $loaded loaded, $reused_shared tokens reused"
echo "two instances alone: $reused_alone tokens reused; each its own namespace: $reused_private"
[ "$written" -gt 0 ] || { echo "FAIL: nothing written to Redis"; exit 1; }
[ "$loaded" -gt 0 ] || { echo "FAIL: nothing loaded from Redis"; exit 1; }
[ "$reused_shared" -gt "$reused_alone" ] || { echo "FAIL: sharing Redis reused no more"; exit 1; }
[ "$reused_shared" -gt "$reused_private" ] || {
  echo "FAIL: sharing Redis reused no more than private namespaces"; exit 1; }
if "$sim" --model tiny --remote-cache "redis://127.0.0.1:$port/0" --compare --no-progress \
    >/dev/null 2>&1; then
  echo "FAIL: --compare with --remote-cache was accepted"; exit 1
fi
echo "OK"
