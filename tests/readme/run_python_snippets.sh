#!/usr/bin/env bash
# Runs every ```python block of README.md with the Python binding of this
# build (KVCACHE_LIBRARY and PYTHONPATH set by ctest); a block fails the
# test if it raises.
#   run_python_snippets.sh README PYTHON
set -euo pipefail
readme=$1 python=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
awk -v dir="$tmp" '
  /^```python[[:space:]]*$/ { n++; f = sprintf("%s/snippet%02d.py", dir, n); inside = 1; next }
  /^```/ && inside { inside = 0; close(f); next }
  inside { print > f }
' "$readme"
count=0
for s in "$tmp"/snippet*.py; do
  [ -e "$s" ] || continue
  count=$((count + 1))
  if ! "$python" "$s" >"$s.out" 2>&1; then
    echo "README Python block $count failed:"
    cat "$s.out"
    nl -ba "$s"
    exit 1
  fi
  echo "README Python block $count: ran"
done
[ "$count" -gt 0 ] || { echo "no Python block found in $readme"; exit 1; }
echo "$count passed, 0 failed"
