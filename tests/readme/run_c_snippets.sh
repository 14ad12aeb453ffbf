#!/usr/bin/env bash
# Compiles and runs every ```c block of README.md against the built
# library, so the README cannot drift from the API. A block with a main()
# is a whole program; any other block is a fragment, run inside main()
# after the prelude below has made a small CPU cache (`cache`) and the
# variables fragments use (`id`, `tokens`, `n`, `cached`). A block fails
# the test if it does not compile or exits non-zero.
#   run_c_snippets.sh README INCLUDE_DIR GENERATED_INCLUDE_DIR LIBRARY_DIR [SANITIZERS]
set -euo pipefail
readme=$1 inc=$2 gen=$3 libdir=$4
san=${5:+-fsanitize=$5}
cc=${CC:-cc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
awk -v dir="$tmp" '
  /^```c[[:space:]]*$/ { n++; f = sprintf("%s/snippet%02d.c", dir, n); inside = 1; next }
  /^```/ && inside { inside = 0; close(f); next }
  inside { print > f }
' "$readme"
count=0
for s in "$tmp"/snippet*.c; do
  [ -e "$s" ] || continue
  count=$((count + 1))
  name=$(basename "$s" .c)
  prog=$tmp/$name.prog.c
  if grep -q "int main" "$s"; then
    cp "$s" "$prog"
  else
    {
      echo '#include <stdio.h>'
      echo '#include <stdlib.h>'
      grep '^#include' "$s" || true
      cat <<'PRELUDE'
#include <kvcache/kvcache.h>
int main(void) {
  kvc_config_t *prelude_cfg = NULL;
  kvc_cache_t *cache = NULL;
  if (kvc_config_create(&prelude_cfg) != KVC_OK) return 1;
  kvc_config_set_num_layers(prelude_cfg, 2);
  kvc_config_set_kv_heads(prelude_cfg, 2);
  kvc_config_set_head_dim(prelude_cfg, 8);
  kvc_config_set_max_tokens(prelude_cfg, 4096);
  if (kvc_cache_create(prelude_cfg, &cache) != KVC_OK) {
    fprintf(stderr, "prelude: %s\n", kvc_last_error_message());
    return 1;
  }
  kvc_config_destroy(prelude_cfg);
  uint64_t id = 1, cached = 0;
  int32_t tokens[1000];
  for (int i = 0; i < 1000; i++) tokens[i] = i;
  size_t n = 1000;
  (void)id; (void)cached; (void)tokens; (void)n;
PRELUDE
      grep -v '^#include' "$s"
      echo '  kvc_cache_destroy(cache);'
      echo '  return 0;'
      echo '}'
    } >"$prog"
  fi
  if ! "$cc" -std=c11 -Wall -Werror $san -I"$inc" -I"$gen" "$prog" -L"$libdir" -lkvcache \
      -Wl,-rpath,"$libdir" -o "$tmp/$name" 2>"$tmp/$name.log"; then
    echo "README C block $count does not compile:"
    cat "$tmp/$name.log"
    nl -ba "$prog" | head -80
    exit 1
  fi
  if ! "$tmp/$name" >"$tmp/$name.out" 2>&1; then
    echo "README C block $count failed when run:"
    cat "$tmp/$name.out"
    exit 1
  fi
  echo "README C block $count: compiled and ran"
done
[ "$count" -gt 0 ] || { echo "no C block found in $readme"; exit 1; }
echo "$count passed, 0 failed"
