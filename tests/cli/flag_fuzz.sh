#!/usr/bin/env bash
# Every numeric flag of every subcommand (memra --list-numeric-options) with extreme values:
# 0, -1, 1e11, INT64_MAX, INT64_MIN, past 64 bits, nan, inf, a fraction, a word, empty. memra
# must accept or refuse each (exit 0, 1 or 2) — never a signal, never a hang (60 s; `memra serve`,
# which runs until stopped, gets SIGTERM after 3 s and must then exit 0).
# Args: MEMRA DATA_DIR SHARED_DIR.
set -uo pipefail
source "$(dirname "$0")/lib/common.sh"
excerpt=$data/demo_heldout_excerpt.txt
base() {  # the quick command each subcommand's flag is added to
  case $1 in
    run) echo run "$model" --backend cpu --tokens 1,2,3 -n 2 -c 64 ;;
    perplexity) echo perplexity "$model" --backend cpu -f "$excerpt" -c 64 --chunks 1 ;;
    bench) echo bench "$model" --backend cpu -p 8 -n 2 -r 1 ;;
    lower) echo lower "$model" -o /dev/null ;;
    compile) echo compile "$model" --arch cpu -o "$tmp/x.plan" ;;
    gen) echo gen --preset tiny --quiet -o "$tmp/g.gguf" ;;
    # A server runs until a signal: given 3 s, then SIGTERM (a clean stop exits 0).
    serve) echo serve "$data/../../models/demo/qwen35-demo-q8_0.gguf" --backend cpu -np 1 -t 1 --port 0 ;;
    *) return 1 ;;
  esac
}
values=(0 -1 100000000000 9223372036854775807 -9223372036854775808 99999999999999999999 nan inf -inf 0.5 abc "")
"$memra" --list-numeric-options >"$tmp/flags.txt" || fail "--list-numeric-options"
[ "$(wc -l <"$tmp/flags.txt")" -ge 20 ] || { cat "$tmp/flags.txt"; fail "too few numeric options listed"; }
n=0
while read -r sub flag kind; do
  cmd=$(base "$sub") || fail "no base command for subcommand $sub (flag --$flag): add one"
  for v in "${values[@]}"; do
    # shellcheck disable=SC2086  # the base command is word-split on purpose (no spaces in paths)
    if [ "$sub" = serve ]; then
      timeout --preserve-status -k 20 -s TERM 3 "$memra" $cmd "--$flag=$v" >/dev/null 2>"$tmp/err.txt" </dev/null
    else
      timeout 60 "$memra" $cmd "--$flag=$v" >/dev/null 2>"$tmp/err.txt" </dev/null
    fi
    rc=$?
    [ $rc -eq 124 ] && fail "memra $sub --$flag=$v hung (60 s)"
    [ $rc -le 2 ] || { cat "$tmp/err.txt"; fail "memra $sub --$flag=$v: exit code $rc (a signal?)"; }
    if [ $rc -ne 0 ] && grep -q "option:" "$tmp/err.txt"; then
      grep -q -- "$flag" "$tmp/err.txt" || { cat "$tmp/err.txt"; fail "memra $sub --$flag=$v: the error does not name the flag"; }
    fi
    n=$((n + 1))
  done
done <"$tmp/flags.txt"
echo "flag_fuzz: ok ($n runs over $(wc -l <"$tmp/flags.txt") flags)"
