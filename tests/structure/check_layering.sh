#!/usr/bin/env bash
# The layering of docs/ARCHITECTURE.md, checked on every project include:
#   capi -> core -> Device interface (src/backend/device.h) <- cpu | cuda,
#   core -> BlockStore interface (src/core/block_store.h) <- store (disk,
#   remote), with base (vocabulary types) beneath all of them.
# Fails naming each forbidden include: base including anything of the
# project but base/ and the public headers; core including capi/, cuda/, a
# backend other than the Device interface, or a CUDA header; backend or
# cuda including core/ or capi/; core including store/; store including
# core/ other than the block store interface and its record format
# (block_store.h, block_record.h, sha256.h), or capi/, cuda/, a backend;
# anything outside src/capi including capi/.
# Also: the C API shims never take the cache's lock or reach the manager
# themselves (kvc::Cache, the locked facade, does both).
#   tests/structure/check_layering.sh [SOURCE_ROOT]
set -uo pipefail
root=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$root" || exit 2
bad=0
# forbid DIR REGEX WHY: every include in DIR matching REGEX is an error.
forbid() {
  local dir=$1 re=$2 why=$3 hits
  [ -d "$dir" ] || return 0
  hits=$(grep -rnE --include='*.h' --include='*.hpp' --include='*.cpp' --include='*.cu' \
    --include='*.cuh' "^[[:space:]]*#[[:space:]]*include[[:space:]]*[<\"]($re)" "$dir" || true)
  if [ -n "$hits" ]; then
    echo "forbidden include ($why):"
    echo "$hits" | sed 's/^/  /'
    bad=1
  fi
}
forbid src/base 'core/|backend/|capi/|cuda/|stateful/' "base includes only base/ and kvcache/"
forbid src/core 'capi/|cuda/|stateful/|store/|backend/(cpu_|cuda_)|cuda_runtime|cuda\.h|cuda_fp' \
  "core reaches devices only through backend/device.h, stores only through core/block_store.h"
forbid src/store 'capi/|cuda/|stateful/|backend/' "a store sits beside the core, below capi"
hits=$(grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]core/' src/store 2>/dev/null |
  grep -vE '[<"]core/(block_store|block_record|sha256|portable_hash)\.h[>"]' || true)
if [ -n "$hits" ]; then
  echo "forbidden include (a store sees only core/block_store.h and the record format):"
  echo "$hits" | sed 's/^/  /'
  bad=1
fi
forbid src/backend 'core/|capi/|stateful/' "backends sit below core"
forbid cuda 'core/|capi/|stateful/' "the CUDA backend sits below core"
forbid src/stateful 'core/|capi/|cuda/' "the stateful mode shares base and Device, not the paged manager"
for d in src/base src/core src/backend src/stateful src/store cuda; do
  forbid "$d" 'capi/' "only src/capi includes capi/"
done
hits=$(grep -rnE '\bmutex\(\)|\bmanager\(\)|lock_guard|unique_lock' src/capi 2>/dev/null || true)
if [ -n "$hits" ]; then
  echo "the C API locks or reaches the manager itself (call the kvc::Cache facade):"
  echo "$hits" | sed 's/^/  /'
  bad=1
fi
n=$(grep -rhE --include='*.h' --include='*.cpp' --include='*.cu' --include='*.cuh' \
  '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' $(ls -d src cuda 2>/dev/null) | wc -l)
if [ $bad -ne 0 ]; then
  echo "FAILED: the include graph breaks the layering"
  exit 1
fi
echo "include graph: $n project includes in src/ and cuda/ follow capi -> core -> Device <- cpu | cuda, core -> BlockStore <- store, base beneath"
