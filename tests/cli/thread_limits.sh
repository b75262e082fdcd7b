#!/usr/bin/env bash
# --threads outside 0..hardware threads is refused naming the flag and the limit (issue 12: 100000
# aborted with std::system_error, 1000 decoded 100x slower), on every subcommand that takes it.
# Args: MEMRA DATA_DIR SHARED_DIR.
set -uo pipefail
source "$(dirname "$0")/lib/common.sh"
for n in 100000 -1 9223372036854775807; do
  for cmd in run perplexity bench gen; do
    case $cmd in
      run) args=("$model" --backend cpu --tokens 1,2 -n 1) ;;
      perplexity) args=("$model" --backend cpu -f "$data/demo_heldout_excerpt.txt") ;;
      bench) args=("$model" --backend cpu -p 16 -n 1 -r 1) ;;
      gen) args=(--quiet -o "$tmp/x.gguf") ;;
    esac
    "$memra" $cmd "${args[@]}" --threads=$n >/dev/null 2>"$tmp/err.txt"
    rc=$?
    [ $rc -eq 1 ] || { cat "$tmp/err.txt"; fail "$cmd --threads $n: exit code $rc"; }
    # Out-of-int values are refused by the option parser itself; the rest name the limit.
    grep -q -- "--threads $n: expected 0 (all cores) to\|threads" "$tmp/err.txt" || { cat "$tmp/err.txt"; fail "$cmd --threads $n: flag not named"; }
  done
done
"$memra" run "$model" --backend cpu --tokens 1,2 -n 1 --threads 1 >/dev/null 2>&1 || fail "run --threads 1 refused"
echo "thread_limits: ok"
