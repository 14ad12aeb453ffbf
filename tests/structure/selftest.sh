#!/usr/bin/env bash
# check_layering.sh must fail on each kind of forbidden include: planted one
# at a time in a scratch tree.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
plant() {  # FILE INCLUDE
  rm -rf "$tmp/src" "$tmp/cuda"
  mkdir -p "$tmp/src/base" "$tmp/src/core" "$tmp/src/backend" "$tmp/src/capi" "$tmp/cuda"
  echo "#include \"kvcache/common.h\"" >"$tmp/src/core/ok.cpp"
  mkdir -p "$(dirname "$tmp/$1")"
  echo "#include $2" >"$tmp/$1"
  if "$here/check_layering.sh" "$tmp" >/dev/null; then
    echo "not caught: $1 including $2"
    exit 1
  fi
}
plant src/core/a.cpp '"cuda/cuda_device.h"'
plant src/core/a.cpp '"capi/guard.h"'
plant src/core/a.h '<cuda_runtime.h>'
plant src/core/a.cpp '"backend/cpu_device.h"'
plant src/backend/a.cpp '"core/cache.h"'
plant cuda/a.cu '"core/block_manager.h"'
plant src/base/a.h '"core/cache.h"'
plant src/base/a.h '"backend/device.h"'
plant src/stateful/a.cpp '"core/cache.h"'
plant src/core/a.cpp '"store/redis_client.h"'
plant src/store/a.cpp '"capi/guard.h"'
plant src/store/a.cpp '"backend/cpu_device.h"'
plant src/capi/a.cpp '"core/cache.h"
  void f(kvc::Cache& c) { std::lock_guard<std::mutex> l(c.mutex()); }'
plant src/capi/a.cpp '"core/cache.h"
  void f(kvc::Cache& c) { c.manager().remove(1); }'
rm -rf "$tmp/src" "$tmp/cuda"
mkdir -p "$tmp/src/core"
echo '#include "backend/device.h"' >"$tmp/src/core/ok.cpp"
"$here/check_layering.sh" "$tmp" >/dev/null || { echo "a clean tree was refused"; exit 1; }
echo "every planted forbidden include and C API lock was caught"
