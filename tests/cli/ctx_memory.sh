#!/usr/bin/env bash
# An impossible context is refused before any cache is allocated, with the figure and the flag
# (issue 12's first defect): run, perplexity and bench at --ctx-size / --ctx / -d far past the
# host's memory, and a context whose byte count overflows. Exit code 1, never a signal.
# Args: MEMRA DATA_DIR SHARED_DIR.
set -uo pipefail
source "$(dirname "$0")/lib/common.sh"
expect() {  # expect WHAT PATTERN -- command...
  local what=$1 pattern=$2
  shift 3
  "$@" >"$tmp/out.txt" 2>"$tmp/err.txt"
  local rc=$?
  [ $rc -eq 1 ] || { cat "$tmp/err.txt"; fail "$what: exit code $rc, expected 1"; }
  grep -q -- "$pattern" "$tmp/err.txt" || { cat "$tmp/err.txt"; fail "$what: no \"$pattern\" in the error"; }
}
huge=100000000000  # 1e11 tokens: terabytes of KV cache
expect "run --ctx-size $huge" "lower --ctx-size" -- "$memra" run "$model" --backend cpu --tokens 1,2,3 -n 1 --ctx-size $huge
grep -q "of KV cache" "$tmp/err.txt" || fail "run: the error does not give the KV cache size"
expect "run --ctx-size INT64_MAX" "lower --ctx-size" -- \
  "$memra" run "$model" --backend cpu --tokens 1,2,3 -n 1 --ctx-size 9223372036854775807
expect "perplexity --ctx $huge" "lower --ctx-size" -- \
  "$memra" perplexity "$model" --backend cpu -f "$data/demo_heldout_excerpt.txt" --ctx $huge
expect "bench -d $huge" "lower --ctx-size" -- "$memra" bench "$model" --backend cpu -p 16 -n 1 -r 1 -d $huge
echo "ctx_memory: ok"
