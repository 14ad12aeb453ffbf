#!/usr/bin/env bash
# ctest go.generated_fresh: regenerates the SWIG layer into a temporary
# folder and fails when it differs from the committed kvc/kvc.go and
# kvc/kvc_wrap.c. Exits 77 (skipped) when SWIG 4.1.0 is not installed.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
want_swig="4.1.0"
if ! command -v swig >/dev/null; then
  echo "go.generated_fresh: skipped: swig $want_swig is not installed (apt-get install swig)"
  exit 77
fi
have_swig="$(swig -version | sed -n 's/^SWIG Version //p')"
if [ "$have_swig" != "$want_swig" ]; then
  echo "go.generated_fresh: skipped: the committed files come from SWIG $want_swig, found $have_swig"
  exit 77
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$here/regenerate.sh" "$tmp"
status=0
for f in kvc.go kvc_wrap.c; do
  if ! diff -u "$here/kvc/$f" "$tmp/$f" > "$tmp/$f.diff"; then
    echo "go.generated_fresh: bindings/go/kvc/$f is stale; run bindings/go/regenerate.sh and commit:"
    head -n 60 "$tmp/$f.diff"
    status=1
  fi
done
[ $status -eq 0 ] && echo "go.generated_fresh: kvc/kvc.go and kvc/kvc_wrap.c match SWIG $want_swig's output"
exit $status
