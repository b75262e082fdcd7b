#!/usr/bin/env bash
# memra run --prompts-file F --parallel N (issue 15 item 5): one prompt per line through the
# scheduler, each output block headed "[line L]"; greedy outputs equal per line number whatever N
# (and equal to a lone `memra run -p`), blank lines skipped with the numbering kept, seeded sampling
# independent of N, and the refusals (exit code 1, naming the flags). Args: MEMRA DATA_DIR SHARED_DIR.
set -uo pipefail
source "$(dirname "$0")/lib/common.sh"
refused() {  # refused PATTERN -- memra args...
  local pattern=$1
  shift 2
  "$memra" "$@" >"$tmp/out.txt" 2>"$tmp/err.txt"
  local rc=$?
  [ $rc -eq 1 ] || { cat "$tmp/err.txt"; fail "memra $*: exit code $rc, expected 1"; }
  grep -q -- "$pattern" "$tmp/err.txt" || { cat "$tmp/err.txt"; fail "memra $*: no \"$pattern\" in the error"; }
}
# split OUT DIR: one file per block of OUT, named by its line number.
split() {
  mkdir -p "$2"
  LC_ALL=C awk -v dir="$2" '/^\[line [0-9]+\]/ { f = dir "/" substr($2, 1, length($2) - 1) } { print > f }' "$1"
}

prompts=$tmp/prompts.txt
printf 'hello world\n\nThe quick brown fox\n   \nOnce upon a time\nabc\n\n1 2 3 4 5\n' >"$prompts"
gen=(--backend cpu -n 12 --ignore-eos --print-token-ids)

# 1. Greedy: --parallel 1 and --parallel 4 give the same block per line number.
for np in 1 4; do
  "$memra" run "$model" --prompts-file "$prompts" --parallel "$np" --temp 0 "${gen[@]}" \
    >"$tmp/g$np.txt" 2>"$tmp/g$np.err" || { cat "$tmp/g$np.err"; fail "--parallel $np exited $?"; }
  split "$tmp/g$np.txt" "$tmp/g$np"
done
# Blank lines 2, 4 and 7 skipped, the others keep their numbers.
[ "$(ls "$tmp/g4" | sort -n | tr '\n' ' ')" = "1 3 5 6 8 " ] || fail "blocks $(ls "$tmp/g4" | tr '\n' ' '), expected lines 1 3 5 6 8"
diff -r "$tmp/g1" "$tmp/g4" >/dev/null || fail "greedy outputs differ between --parallel 1 and 4"
head -n 1 "$tmp/g4/5" | grep -qx '\[line 5\] Once upon a time' || fail "line 5's header: $(head -n 1 "$tmp/g4/5")"
[ "$(grep -c '^generated ids: ' "$tmp/g4.txt")" -eq 5 ] || fail "expected 5 generated-id lines"
grep -q "memra run: 5 prompts (lines 1 to 8 of .*), [0-9]* prompt tokens, 60 generated tokens in .* tok/s generation" \
  "$tmp/g4.err" || { cat "$tmp/g4.err"; fail "no summary line"; }
grep -q -- "--parallel 4, 4 slots" "$tmp/g4.err" || { cat "$tmp/g4.err"; fail "summary lacks the slots"; }

# 2. Line 5 equals a lone `memra run -p` (ids and text).
"$memra" run "$model" -p "Once upon a time" --temp 0 --no-echo "${gen[@]}" >"$tmp/one.txt" 2>"$tmp/one.err" ||
  { cat "$tmp/one.err"; fail "memra run -p exited $?"; }
want=$(sed -n 's/^generated ids: //p' "$tmp/one.txt")
got=$(sed -n 's/^generated ids: //p' "$tmp/g4/5")
[ -n "$want" ] && [ "$got" = "$want" ] || fail "line 5 generated $got, memra run -p generated $want"
tail -n +2 "$tmp/g4/5" | cmp -s - "$tmp/one.txt" || fail "line 5's text differs from memra run -p's"

# 3. Sampling: each prompt seeded seed + line number, so --parallel does not change the tokens.
for np in 1 3; do
  "$memra" run "$model" --prompts-file "$prompts" -np "$np" --temp 0.9 -s 11 "${gen[@]}" \
    >"$tmp/s$np.txt" 2>"$tmp/s$np.err" || { cat "$tmp/s$np.err"; fail "sampled --parallel $np exited $?"; }
  split "$tmp/s$np.txt" "$tmp/s$np"
done
diff -r "$tmp/s1" "$tmp/s3" >/dev/null || fail "sampled outputs differ between --parallel 1 and 3"
# More slots than prompts: only as many sessions as prompts.
"$memra" run "$model" --prompts-file "$prompts" --parallel 256 --temp 0 "${gen[@]}" >"$tmp/g256.txt" \
  2>"$tmp/g256.err" || { cat "$tmp/g256.err"; fail "--parallel 256 exited $?"; }
split "$tmp/g256.txt" "$tmp/g256"
diff -r "$tmp/g1" "$tmp/g256" >/dev/null || fail "greedy outputs differ between --parallel 1 and 256"
grep -q "5 slots (--parallel 256)" "$tmp/g256.err" || { cat "$tmp/g256.err"; fail "expected 5 slots"; }

# 4. Refusals, naming the flags.
run=(run "$model" --prompts-file "$prompts" -n 2)
refused "prompts-file and -p/--prompt cannot be used together" -- "${run[@]}" -p hi
refused "prompts-file and -f/--file cannot be used together" -- "${run[@]}" -f "$prompts"
refused "prompts-file and --tokens cannot be used together" -- "${run[@]}" --tokens 1,2
refused "prompts-file and -cnv/--conversation/-i cannot be used together" -- "${run[@]}" -cnv
refused "prompts-file and --chat cannot be used together" -- "${run[@]}" --chat
refused "passes / the pass dumps cannot be used together" -- "${run[@]}" --passes=dce --parallel 2
refused "parallel option: 0 is out of range: expected 1 to 256" -- "${run[@]}" --parallel 0
refused "parallel option: 257 is out of range: expected 1 to 256" -- "${run[@]}" --parallel 257
refused "parallel needs --prompts-file" -- run "$model" -p hi -n 1 --parallel 2
refused "prompts-file $tmp/missing.txt: cannot open the prompts file" -- run "$model" --prompts-file "$tmp/missing.txt"
: >"$tmp/empty.txt"
refused "prompts-file $tmp/empty.txt: no prompts (the file is empty)" -- run "$model" --prompts-file "$tmp/empty.txt"
printf '\n  \n' >"$tmp/blank.txt"
refused "prompts-file $tmp/blank.txt: no prompts (its 2 lines are all blank)" -- run "$model" --prompts-file "$tmp/blank.txt"
refused "prompts-file $tmp: is a directory" -- run "$model" --prompts-file "$tmp"
# A prompt past the per-slot context: refused before anything runs, naming its line.
printf 'ok\n%s\n' "$(printf 'x%.0s' $(seq 1 80))" >"$tmp/long.txt"
refused "line 2: the prompt has .* tokens but the per-slot context is 32" -- run "$model" --prompts-file "$tmp/long.txt" -c 32
echo "run_parallel: ok"
