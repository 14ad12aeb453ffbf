#!/usr/bin/env bash
# Runs a binding README the way its reader would, outside the repository:
# its code blocks and commands, in order, in an empty folder, with a clean
# environment. Then checks what the program printed against the C reference
# of tests/outside (program.c, compiled and run here against the same
# build).
#
#   run_readme.sh README SOURCE_DIR BUILD_DIR [NAME=VALUE...]
#
# The README's blocks, by their info string:
#   ```sh            commands, run with `set -euo pipefail` (one script for the
#                    whole README, so a `cd` or `export` carries on);
#   ```go, ```rust, ```java, ```python, ```toml, ```c
#                    a file: the first line is a comment naming it
#                    (`// src/main.rs`, `# Cargo.toml`); written where the
#                    commands run, before the commands that follow it;
#   ```text          output, not run: one of them must be the reference
#                    transcript, as the program prints it;
#   anything else    prose (tables, excerpts), not run.
# A code block of a listed language that names no file fails the test: every
# command and program of the README runs here.
#
# Paths in the README are rewritten: /path/to/kvcache -> SOURCE_DIR,
# /path/to/build -> BUILD_DIR, /opt/kvcache -> a fresh `cmake --install` of
# BUILD_DIR. The environment is empty but for PATH, HOME (a fresh folder)
# and the NAME=VALUE arguments (toolchain homes and caches, never where
# kvcache is: that is the README's job).
#
# The program's standard output, over all its runs, must be the reference
# transcript repeated once per run; the reference itself must say that 512
# prompt tokens were reused and carry the NOT_FOUND error of sequence 99.
set -euo pipefail
readme=$1 src=$2 build=$3
shift 3
name=$(basename "$(dirname "$readme")")
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kvcache-readme-$name.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

fail() {
  echo "$name README: $*" >&2
  exit 1
}

# 1. The reference transcript, from C.
${CC:-cc} -std=c11 -Wall -Werror -I"$src/include" -I"$build/include" "$src/tests/outside/program.c" \
  -L"$build" -lkvcache -Wl,-rpath,"$build" -o "$tmp/reference"
"$tmp/reference" >"$tmp/reference.txt"
grep -qx 'request 2: 1000 prompt tokens, 512 cached' "$tmp/reference.txt" ||
  fail "the C reference did not reuse 512 tokens: $(cat "$tmp/reference.txt")"
grep -q '^error: status -2: .*sequence 99' "$tmp/reference.txt" ||
  fail "the C reference did not report NOT_FOUND for sequence 99: $(cat "$tmp/reference.txt")"
[ "$(tail -n 1 "$tmp/reference.txt")" = closed ] || fail "the C reference did not close"

# 2. An installed kvcache, for the README's /opt/kvcache.
cmake --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log"; fail "cmake --install failed"; }

# 3. The README as one script; its text blocks apart.
mkdir -p "$tmp/work" "$tmp/home" "$tmp/text"
awk -v script="$tmp/script.sh" -v textdir="$tmp/text" -v readme="$readme" '
  function bad(msg) { print readme ": " msg > "/dev/stderr"; failed = 1 }
  BEGIN { print "set -euo pipefail" > script }
  !inside && /^```/ {
    info = substr($0, 4); sub(/[[:space:]].*/, "", info)
    inside = 1; first = 1; block++; kind = "prose"
    if (info == "sh") kind = "sh"
    else if (info == "text") { kind = "text"; ntext++; out = sprintf("%s/%02d.txt", textdir, ntext) }
    else if (info ~ /^(go|rust|java|python|toml|c)$/) kind = "file"
    next
  }
  inside && /^```[[:space:]]*$/ {
    if (kind == "file") print "KVCACHE_README_EOF" > script
    if (kind == "file" && first) bad("block " block " (" info ") is empty")
    inside = 0; next
  }
  inside && kind == "sh" { print > script; next }
  inside && kind == "text" { print > out; next }
  inside && kind == "file" {
    if (first) {
      first = 0
      if (!match($0, /^(\/\/|#) [A-Za-z0-9_.\/-]+$/)) {
        bad("block " block " (" info ") does not start with a comment naming its file: " $0)
        kind = "prose"; next
      }
      file = $0; sub(/^(\/\/|#) /, "", file)
      printf "mkdir -p \"$(dirname %s)\"\ncat > %s <<'"'"'KVCACHE_README_EOF'"'"'\n", file, file > script
    }
    print > script; next
  }
  END { if (inside) bad("unterminated block"); exit failed }
' "$readme" || fail "malformed"
sed -i -e "s|/path/to/kvcache|$src|g" -e "s|/path/to/build|$build|g" \
  -e "s|/opt/kvcache|$tmp/prefix|g" "$tmp/script.sh"

found=0
for t in "$tmp"/text/*.txt; do
  [ -e "$t" ] && cmp -s "$t" "$tmp/reference.txt" && found=1
done
if [ $found = 0 ]; then
  echo "the README shows no text block equal to the reference transcript:"
  cat "$tmp/reference.txt"
  fail "output block missing or stale"
fi

# 4. Run it.
cd "$tmp/work"
if ! env -i PATH="$PATH" HOME="$tmp/home" "$@" bash "$tmp/script.sh" >"$tmp/stdout" 2>"$tmp/stderr"; then
  echo "--- script"; nl -ba "$tmp/script.sh"
  echo "--- stderr"; tail -n 60 "$tmp/stderr"
  echo "--- stdout"; cat "$tmp/stdout"
  fail "the README's commands failed"
fi

# 5. The output: the reference, once per run of the program.
lines=$(wc -l <"$tmp/reference.txt")
total=$(wc -l <"$tmp/stdout")
runs=$((total / lines))
expected="$tmp/expected.txt"
: >"$expected"
for _ in $(seq 1 "$runs"); do cat "$tmp/reference.txt" >>"$expected"; done
if [ "$runs" -lt 1 ] || ! cmp -s "$tmp/stdout" "$expected"; then
  echo "--- the program printed:"; cat "$tmp/stdout"
  echo "--- the C reference printed (once per run expected):"; cat "$tmp/reference.txt"
  diff "$expected" "$tmp/stdout" | head -n 40 || true
  fail "output differs from the C reference"
fi
echo "$name README: every block ran outside the tree; the program printed the C reference's" \
  "transcript in each of its $runs runs:"
sed 's/^/  /' "$tmp/reference.txt"
