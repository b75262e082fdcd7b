#!/usr/bin/env bash
# Minimal lit: runs every `// RUN:` line of a test file with %s = the file, `memra` and `FileCheck`
# replaced by the built binaries. Fails on the first failing RUN line.
set -uo pipefail
file=$1 memra=$2 filecheck=$3
status=0; n=0
while IFS= read -r line; do
  cmd=${line#*RUN:}
  cmd=${cmd//%s/$file}
  cmd=$(sed -e "s#\\bmemra\\b#$memra#g" -e "s#\\bFileCheck\\b#$filecheck#g" <<<"$cmd")
  n=$((n+1))
  if ! bash -o pipefail -c "$cmd"; then
    echo "lit.sh: RUN line $n failed: $cmd" >&2; status=1; break
  fi
done < <(grep -E '^\s*//\s*RUN:' "$file")
[ $n -gt 0 ] || { echo "lit.sh: no RUN lines in $file" >&2; exit 1; }
exit $status
