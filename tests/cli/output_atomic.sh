#!/usr/bin/env bash
# Output files appear whole or not at all (ir/support/AtomicFile.h, issue 20): memra gen, compile
# and run --logits-out past a file-size limit (ulimit -f: a write fails half way, as on a full
# disk) exit 1 naming the file and the cause, and leave neither the file nor a temporary; SIGINT
# or SIGTERM during a long memra gen leaves nothing either; an existing file is only replaced by
# a whole new one.
# Args: MEMRA DATA_DIR SHARED_DIR.
set -uo pipefail
source "$(dirname "$0")/lib/common.sh"
out=$tmp/out
mkdir -p "$out"
nothing_left() {  # nothing_left WHAT: the output folder holds only what the test put there
  local left
  left=$(ls "$out" | grep -v '^keep\.' || true)
  [ -z "$left" ] || fail "$1: left behind: $left"
}

# A write that fails half way: 64 KiB allowed per file.
limited() { (ulimit -f 64; "$memra" "$@"); }
limited gen --preset tiny --quiet -o "$out/g.gguf" 2>"$tmp/e.txt"
rc=$?
[ $rc -eq 1 ] || { cat "$tmp/e.txt"; fail "gen past the size limit: exit code $rc, not 1"; }
grep -q "g.gguf: write failed: File too large" "$tmp/e.txt" || { cat "$tmp/e.txt"; fail "gen: the error names no file or cause"; }
grep -q "crashed" "$tmp/e.txt" && { cat "$tmp/e.txt"; fail "gen: a failed write reported as a crash"; }
nothing_left "gen past the size limit"

limited compile "$model" --arch cpu -o "$out/x.plan" 2>"$tmp/e.txt"
rc=$?
[ $rc -eq 1 ] || { cat "$tmp/e.txt"; fail "compile past the size limit: exit code $rc, not 1"; }
grep -q "x.plan: write failed: File too large" "$tmp/e.txt" || { cat "$tmp/e.txt"; fail "compile: the error names no file or cause"; }
nothing_left "compile past the size limit"

# --logits-out of a 100-token prompt is 100 x 259 x 4 bytes, past 64 KiB.
limited run "$model" --backend cpu --tokens "$(seq -s, 1 100)" -n 1 --logits-out "$out/l.f32" >/dev/null 2>"$tmp/e.txt"
rc=$?
[ $rc -eq 1 ] || { cat "$tmp/e.txt"; fail "--logits-out past the size limit: exit code $rc, not 1"; }
grep -q "l.f32: write failed" "$tmp/e.txt" || { cat "$tmp/e.txt"; fail "--logits-out: the error names no file"; }
nothing_left "--logits-out past the size limit"

# An existing file stays as it was when its replacement fails.
"$memra" gen --preset tiny --quiet -o "$out/keep.gguf" >/dev/null 2>&1 || fail "gen of the tiny model failed"
sum=$(md5sum <"$out/keep.gguf")
limited gen --preset tiny --quiet --dtype f16 -o "$out/keep.gguf" 2>/dev/null && fail "gen past the limit succeeded"
[ "$(md5sum <"$out/keep.gguf")" = "$sum" ] || fail "a failed gen changed the file it was to replace"
nothing_left "a failed replacement"

# A signal during a long gen (the 0.8b preset writes ~0.9 GB; stopped after ~1 s). Background jobs
# of a script ignore SIGINT, so the launcher restores its default action first.
for sig in INT TERM; do
  python3 -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])' \
    "$memra" gen --preset 0.8b --dtype q8_0 --quiet -o "$out/big.gguf" 2>"$tmp/e.txt" &
  pid=$!
  for _ in $(seq 50); do
    ls "$out" | grep -q 'big.gguf.tmp' && break
    sleep 0.1
  done
  ls "$out" | grep -q 'big.gguf.tmp' || fail "SIG$sig: gen never started writing"
  sleep 0.5
  kill -"$sig" "$pid"
  wait "$pid"
  rc=$?
  [ $rc -ne 0 ] || fail "SIG$sig: gen exited 0"
  nothing_left "SIG$sig during gen"
done
echo "output_atomic: ok"
