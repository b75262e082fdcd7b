#!/usr/bin/env bash
# The compute-sanitizer table from the pair files bench/gpu_sanitize.sh writes (sanitize-I-of-N.tsv:
# target, tool, verdict a line), one or several shards joined: a row per target, a column per tool,
# and a count line. A verdict of 0 (racecheck: "0 hazards") is clean; "timeout" and "not run" are
# missing; a case the binary skipped (a feature the GPU lacks) and a case that never touched the
# GPU ("no GPU work": selection and layout units) are counted apart; anything else,
# including a test failing under the tool, is dirty. When a pair appears in several files (a shard
# re-run), the last file's verdict wins.
#
#   bash bench/sanitize_table.sh OUT1/sanitize-0-of-2.tsv OUT2/sanitize-1-of-2.tsv
set -uo pipefail
[ $# -ge 1 ] || { echo "usage: sanitize_table.sh PAIRS.tsv..."; exit 2; }
awk -F'\t' '
  NF == 3 {
    if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 }
    present[$2] = 1
    cell[$1 SUBSEP $2] = $3
  }
  END {
    m = 0; split("memcheck racecheck initcheck synccheck", known, " ")
    for (j = 1; j <= 4; ++j) if (known[j] in present) tools[++m] = known[j]
    printf "%-64s", "target"; for (j = 1; j <= m; ++j) printf " %-14s", tools[j]; printf "\n"
    for (i = 1; i <= n; ++i) {
      printf "%-64s", order[i]
      for (j = 1; j <= m; ++j) {
        k = order[i] SUBSEP tools[j]
        v = (k in cell) ? cell[k] : "-"
        printf " %-14s", v
        if (!(k in cell)) continue
        ++total
        if (v ~ /\(skipped\)$/) ++skipped
        else if (v == "no GPU work") ++cpu_only
        else if (v == "0" || v == "0 hazards") ++clean
        else if (v == "timeout" || v == "not run") ++missing
        else ++dirty
      }
      printf "\n"
    }
    printf "sanitize: %d pairs clean, %d with errors or failures, %d timed out or not run, %d skipped by the test, %d without GPU work (of %d)\n",
      clean, dirty, missing, skipped, cpu_only, total
  }' "$@"
