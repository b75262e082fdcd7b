#!/usr/bin/env bash
# memra run's output on a shared terminal (issue 12): the echoed prompt ends its line before any
# stderr line (--trace-layers prints during the prefill), token ids go to stdout together, and
# Ctrl-C (SIGINT) stops a generation with exit code 0 and the timings so far.
# Args: MEMRA DATA_DIR SHARED_DIR.
set -uo pipefail
source "$(dirname "$0")/lib/common.sh"
"$memra" run "$model" --backend cpu -p "hello" -n 4 --temp 0 --trace-layers --print-token-ids >"$tmp/all.txt" 2>&1 ||
  fail "run --trace-layers"
first=$(grep -n -m1 "^hello" "$tmp/all.txt" | cut -d: -f1)
[ -n "$first" ] || { cat "$tmp/all.txt"; fail "no echoed prompt"; }
[ "$(sed -n "${first}p" "$tmp/all.txt")" = "hello" ] || { cat "$tmp/all.txt"; fail "an stderr line joined the prompt's line"; }
"$memra" run "$model" --backend cpu -p "hello" -n 4 --temp 0 --print-token-ids >"$tmp/out.txt" 2>/dev/null || fail "run"
grep -q "^prompt ids: " "$tmp/out.txt" && grep -q "^generated ids: " "$tmp/out.txt" || fail "ids not both on stdout"

# Ctrl-C: a generation that would run for minutes (the whole 16k context) stops at once.
"$memra" run "$model" --backend cpu -p "hello" -n -1 -c 16384 --ignore-eos >"$tmp/gen.txt" 2>"$tmp/gen.err" &
pid=$!
sleep 2
kill -INT $pid
for _ in $(seq 50); do kill -0 $pid 2>/dev/null || break; sleep 0.2; done
kill -0 $pid 2>/dev/null && { kill -9 $pid; fail "Ctrl-C did not stop the generation within 10 s"; }
wait $pid
rc=$?
[ $rc -eq 0 ] || { cat "$tmp/gen.err"; fail "exit code $rc after Ctrl-C, expected 0"; }
grep -q "interrupted (Ctrl-C)" "$tmp/gen.err" || { cat "$tmp/gen.err"; fail "no timings line after Ctrl-C"; }
echo "output_hygiene: ok"
