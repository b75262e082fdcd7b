#!/usr/bin/env bash
# Fails (exit 1) when clang-format-14 would change a C++/CUDA file: by default the files changed
# since BASE (argument or $MEMRA_FORMAT_BASE; default: every tracked file, which is what a clean
# CI clone checks), listing each with the first lines of its diff.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
command -v clang-format-14 >/dev/null || { echo "check_format: clang-format-14 missing (scripts/setup.sh installs it)"; exit 1; }
base=${1:-${MEMRA_FORMAT_BASE:-}}
if [ -n "$base" ]; then
  files=$(git diff --name-only --diff-filter=ACMR "$base" -- '*.cc' '*.h' '*.cu' '*.cuh' | grep -v '^tests/data/' || true)
else
  files=$(git ls-files '*.cc' '*.h' '*.cu' '*.cuh' | grep -v '^tests/data/')
fi
bad=0
for f in $files; do
  [ -f "$f" ] || continue
  if ! clang-format-14 --dry-run --Werror "$f" >/dev/null 2>&1; then
    echo "check_format: $f is not clang-formatted (run: clang-format-14 -i $f)"
    diff -u "$f" <(clang-format-14 "$f") | sed -n '3,12p'
    bad=1
  fi
done
[ $bad -eq 0 ] && echo "check_format: $(echo "$files" | grep -c . || true) files formatted"
exit $bad
