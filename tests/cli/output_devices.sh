#!/usr/bin/env bash
# Outputs that are not regular files, and outputs that cannot be written (a review found each):
#  * a FIFO or a device named by -o / --logits-out is written in place, never renamed over (the
#    node stays a FIFO; /dev/null stays a device);
#  * a write to stdout or -o that fails (a full device, a closed stdout) exits 1 naming the cause,
#    not "memra crashed", and leaves no partial file;
#  * a FIFO given as the model is refused at once (opening it waited for a writer forever), and
#    a directory given to -f is named before the model loads.
# Args: MEMRA DATA_DIR SHARED_DIR.
set -uo pipefail
source "$(dirname "$0")/lib/common.sh"
no_crash() {  # no_crash WHAT RC: exit 1 and no crash banner in $tmp/e.txt
  [ "$2" -eq 1 ] || { cat "$tmp/e.txt"; fail "$1: exit code $2, not 1"; }
  grep -q "crashed" "$tmp/e.txt" && { cat "$tmp/e.txt"; fail "$1: reported as a crash"; }
  return 0
}

# A FIFO as -o: its reader gets the whole file, and it is still a FIFO afterwards.
mkfifo "$tmp/pipe"
cat "$tmp/pipe" >"$tmp/from-pipe" &
reader=$!
"$memra" lower "$model" -o "$tmp/pipe" 2>"$tmp/e.txt" || { cat "$tmp/e.txt"; fail "lower -o FIFO failed"; }
wait "$reader"
[ -p "$tmp/pipe" ] || fail "lower -o FIFO replaced the FIFO"
"$memra" lower "$model" >"$tmp/direct.mir" || fail "lower to stdout failed"
cmp -s "$tmp/from-pipe" "$tmp/direct.mir" || fail "the FIFO's reader got other bytes than stdout"
mkfifo "$tmp/pipe2"
cat "$tmp/pipe2" >/dev/null &
reader=$!
"$memra" gen --preset tiny --quiet -o "$tmp/pipe2" 2>"$tmp/e.txt" || { cat "$tmp/e.txt"; fail "gen -o FIFO failed"; }
wait "$reader"
[ -p "$tmp/pipe2" ] || fail "gen -o FIFO replaced the FIFO"
"$memra" run "$model" --backend cpu --tokens 1,2,3 -n 1 --logits-out /dev/null >/dev/null 2>"$tmp/e.txt" ||
  { cat "$tmp/e.txt"; fail "--logits-out /dev/null failed"; }
[ -c /dev/null ] || fail "/dev/null is no longer a device"

# A full device (/dev/full where the machine has it) and a closed stdout.
if [ -c /dev/full ]; then
  "$memra" inspect "$model" >/dev/full 2>"$tmp/e.txt"
  no_crash "inspect >/dev/full" $?
  grep -q "cannot write the output (stdout): No space left on device" "$tmp/e.txt" ||
    { cat "$tmp/e.txt"; fail "inspect >/dev/full: the cause is not named"; }
  "$memra" lower "$model" -o /dev/full 2>"$tmp/e.txt"
  no_crash "lower -o /dev/full" $?
  grep -q "/dev/full: write failed: No space left on device" "$tmp/e.txt" || { cat "$tmp/e.txt"; fail "lower -o /dev/full: no cause"; }
  [ -c /dev/full ] || fail "/dev/full is no longer a device"
fi
"$memra" inspect "$model" >&- 2>"$tmp/e.txt"
no_crash "inspect with stdout closed" $?
"$memra" inspect "$tmp/missing.gguf" 2>&-
rc=$?
[ $rc -eq 1 ] || fail "inspect with stderr closed: exit code $rc, not 1"
# lower -o past a file-size limit leaves nothing behind.
(ulimit -f 8; "$memra" lower "$model" -o "$tmp/cut.mir") 2>"$tmp/e.txt"
no_crash "lower past a size limit" $?
[ -e "$tmp/cut.mir" ] && fail "lower past a size limit left a partial file"
ls "$tmp" | grep -q 'cut.mir.tmp' && fail "lower past a size limit left its temporary"

# A FIFO as the model: refused at once, by every command that reads one.
mkfifo "$tmp/model.gguf"
for cmd in "inspect" "lower" "run --backend cpu --tokens 1 -n 1" "compile --arch cpu -o $tmp/x.plan"; do
  timeout 20 "$memra" $cmd "$tmp/model.gguf" >/dev/null 2>"$tmp/e.txt"
  rc=$?
  [ $rc -ne 124 ] || fail "$cmd on a FIFO hung"
  no_crash "$cmd on a FIFO" $rc
  grep -q "not a regular file" "$tmp/e.txt" || { cat "$tmp/e.txt"; fail "$cmd on a FIFO: the error does not say why"; }
done

# -f naming a directory is named as such.
"$memra" run "$model" --backend cpu -f "$tmp" -n 1 >/dev/null 2>"$tmp/e.txt"
no_crash "run -f DIR" $?
grep -q "is a directory" "$tmp/e.txt" || { cat "$tmp/e.txt"; fail "run -f DIR: not named a directory"; }
"$memra" perplexity "$model" --backend cpu -f "$tmp" >/dev/null 2>"$tmp/e.txt"
no_crash "perplexity -f DIR" $?
grep -q "is a directory" "$tmp/e.txt" || { cat "$tmp/e.txt"; fail "perplexity -f DIR: not named a directory"; }
echo "output_devices: ok"
