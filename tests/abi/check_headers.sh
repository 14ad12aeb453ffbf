#!/usr/bin/env bash
# Every public header compiles alone as C99 and as C++17 with
# -Wall -Wextra -pedantic -Werror, with nothing but the kvcache include
# folders on the path (so no CUDA or C++ header can be reachable from C).
# usage: check_headers.sh CC CXX SRC_INCLUDE GENERATED_INCLUDE
set -euo pipefail
cc=$1 cxx=$2 inc=$3 gen=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
headers=$( (cd "$inc" && ls kvcache/*.h; cd "$gen" && ls kvcache/*.h) | sort -u)
pass=0 fail=0
for h in $headers; do
  printf '#include <%s>\n#include <%s>\nint kvc_header_test_%s;\n' "$h" "$h" "$(basename "$h" .h)" \
    >"$work/t.c"
  cp "$work/t.c" "$work/t.cpp"
  for mode in c cxx; do
    if [ $mode = c ]; then
      cmd=("$cc" -std=c99 -x c "$work/t.c")
    else
      cmd=("$cxx" -std=c++17 -x c++ "$work/t.cpp")
    fi
    if "${cmd[@]}" -Wall -Wextra -pedantic -Werror -I"$inc" -I"$gen" -fsyntax-only 2>"$work/err"; then
      pass=$((pass + 1))
    else
      fail=$((fail + 1))
      echo "FAIL: $h as $mode:"; cat "$work/err"
    fi
  done
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
