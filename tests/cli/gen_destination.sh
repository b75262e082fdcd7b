#!/usr/bin/env bash
# memra gen checks its destination before generating anything (issue 12): a missing folder and a
# folder given as -o fail at once with the reason, exit code 1, and leave no file behind.
# Args: MEMRA DATA_DIR SHARED_DIR.
set -uo pipefail
source "$(dirname "$0")/lib/common.sh"
"$memra" gen --quiet -o "$tmp/missing/x.gguf" 2>"$tmp/e1.txt"
[ $? -eq 1 ] || fail "gen into a missing folder: exit code not 1"
grep -q "the folder $tmp/missing does not exist" "$tmp/e1.txt" || { cat "$tmp/e1.txt"; fail "missing folder not named"; }
"$memra" gen --quiet -o "$tmp" 2>"$tmp/e2.txt"
[ $? -eq 1 ] || fail "gen -o FOLDER: exit code not 1"
grep -q "is a folder" "$tmp/e2.txt" || { cat "$tmp/e2.txt"; fail "folder destination not refused"; }
[ -z "$(ls "$tmp" | grep -v '^e[12].txt$')" ] || fail "files left behind: $(ls "$tmp")"
"$memra" gen --quiet -o "$tmp/ok.gguf" >/dev/null || fail "gen into a good path failed"
[ -s "$tmp/ok.gguf" ] || fail "no file written"
echo "gen_destination: ok"
