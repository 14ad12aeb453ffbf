#!/usr/bin/env bash
# The layering of docs/ARCHITECTURE.md, checked on every project include:
#   capi -> core -> Device interface (src/backend/device.h) <- cpu | cuda,
#   with base (vocabulary types) beneath all of them; src/store (the tiers'
#   I/O: Redis) implements core's interfaces and only capi includes it.
# Fails naming each forbidden include: base including anything of the
# project but base/ and the public headers; core including capi/, cuda/, a
# backend other than the Device interface, or a CUDA header; backend or
# cuda including core/ or capi/; anything outside src/capi including capi/.
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
forbid src/base 'core/|backend/|capi/|cuda/|stateful/|store/' "base includes only base/ and kvcache/"
forbid src/core 'capi/|cuda/|stateful/|backend/(cpu_|cuda_)|cuda_runtime|cuda\.h|cuda_fp' \
  "core reaches devices only through backend/device.h"
forbid src/core 'store/' "core does no I/O: the stores implement its interfaces from src/store"
forbid src/store 'capi/|cuda/|stateful/|backend/' "a store sees base and core's interfaces, not devices or the C API"
forbid src/backend 'core/|capi/|stateful/|store/' "backends sit below core"
forbid cuda 'core/|capi/|stateful/|store/' "the CUDA backend sits below core"
forbid src/stateful 'core/|capi/|cuda/|store/' "the stateful mode shares base and Device, not the paged manager"
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
echo "include graph: $n project includes in src/ and cuda/ follow capi -> core -> Device <- cpu | cuda, base beneath"
