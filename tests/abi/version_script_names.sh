#!/usr/bin/env bash
# Prints the names listed under "global:" in any node of a version script,
# sorted (a section ends at "local:" or at the node's closing brace:
# "} KVCACHE_0.1;" is no name).
# usage: version_script_names.sh VERSION_SCRIPT
set -euo pipefail
awk '/global:/{g=1; next} /local:|}/{g=0} g && /;/ {gsub(/[ \t;]/,""); if ($0 != "") print}' "$1" | sort
