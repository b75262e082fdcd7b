#!/usr/bin/env bash
# An impossible context is refused before any cache is allocated (issue 12's first defect):
# values past the flag's range (1e11, INT64_MAX) by the options layer, naming the flag; a context
# in range but past the memory available (here: an address-space limit of 4 GB, which the check
# honours as it does MemAvailable) with the KV-cache figure and the flag — for run, perplexity,
# bench and compile's plan when run. Exit code 1, never a signal.
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
limited() { (ulimit -v 4000000 && "$@"); }  # 4 GB of address space
huge=100000000000  # 1e11 tokens: terabytes of KV cache
for ctx in $huge 9223372036854775807 99999999999999999999999; do
  expect "run --ctx-size $ctx" "ctx-size option: .* out of range: expected 0 to 16777216" -- \
    "$memra" run "$model" --backend cpu --tokens 1,2,3 -n 1 --ctx-size $ctx
done
expect "perplexity --ctx $huge" "ctx-size option: .* out of range" -- \
  "$memra" perplexity "$model" --backend cpu -f "$data/demo_heldout_excerpt.txt" --ctx $huge
expect "bench -d $huge" "n-depth option: .* out of range" -- "$memra" bench "$model" --backend cpu -p 16 -n 1 -r 1 -d $huge
expect "compile -c $huge" "ctx-size option: .* out of range" -- "$memra" compile "$model" --arch cpu -c $huge -o "$tmp/x.plan"

max=16777216  # in range: 16 GiB of KV cache on the tiny model
expect "run --ctx-size $max" "lower --ctx-size" -- limited "$memra" run "$model" --backend cpu --tokens 1,2,3 -n 1 --ctx-size $max
grep -q "16.0 GiB of KV cache" "$tmp/err.txt" || fail "run: the error does not give the KV cache size"
expect "perplexity --ctx $max" "lower --ctx-size" -- \
  limited "$memra" perplexity "$model" --backend cpu -f "$data/demo_heldout_excerpt.txt" --ctx $max
expect "bench -d $max" "lower --ctx-size" -- limited "$memra" bench "$model" --backend cpu -p 16 -n 1 -r 1 -d $max
"$memra" compile "$model" --arch cpu -c $max -o "$tmp/big.plan" 2>"$tmp/err.txt" || { cat "$tmp/err.txt"; fail "compile -c $max"; }
expect "run big.plan" "lower --ctx-size" -- limited "$memra" run "$tmp/big.plan" --backend cpu --tokens 1,2,3 -n 1
# A host-memory budget (--max-host-memory, MiB) is checked the same way, before allocating.
expect "run --max-host-memory 1" "more than the 1.0 MiB of host memory (--max-host-memory) available" -- \
  "$memra" run "$model" --backend cpu --tokens 1,2,3 -n 1 -c 4096 --max-host-memory 1
expect "serve --max-host-memory 1" "of host memory (--max-host-memory) available" -- \
  "$memra" serve "$model" --backend cpu --port 0 -np 4 -c 4096 --max-host-memory 1
"$memra" run "$model" --backend cpu --tokens 1,2 -n 1 -c 256 --max-host-memory 1 >/dev/null 2>"$tmp/err.txt" ||
  { cat "$tmp/err.txt"; fail "run -c 256 within a 1 MiB budget"; }
# The figure is printed at load.
"$memra" run "$model" --backend cpu --tokens 1,2 -n 1 -c 256 2>"$tmp/err.txt" >/dev/null || fail "run -c 256"
grep -q "context 256 (KV cache 0.2 MiB + recurrent state" "$tmp/err.txt" || { cat "$tmp/err.txt"; fail "no state figure at load"; }
echo "ctx_memory: ok"
