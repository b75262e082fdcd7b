#!/usr/bin/env bash
# compute-sanitizer over the whole GPU test suite and one end-to-end prefill + decode per model
# family (issue 20): every (target, tool) pair under memcheck (with --leak-check full), racecheck,
# initcheck and synccheck, and a table of error counts last. Called by
# `bash bench/gpu_suite.sh BUNDLE --sanitize [BUDGET_S] [OPTIONS] [TOOLS...]`; alone:
#
#   bash bench/gpu_sanitize.sh BIN_DIR OUT_DIR BUDGET_S [--jobs N] [--shard I/N] [--timeout S]
#                              [--row-shards N] [--resume PAIRS.tsv]... [--only REGEX]
#                              [--race-skip-cublaslt] [TOOLS...]
#
# Targets: `memra run --backend cuda` on each tiny q8_0 fixture (qwen35, qwen35moe, gemma4, gemma4e,
# step35; prefill of 8 and 16 tokens, 8 greedy steps through the graphs and the device loop), every
# test case of every tests/cuda binary in the bundle (one gtest case a target, so a slow case
# under racecheck cannot hide the others), and the op table one TEST (a table of cases) at a time,
# or with --row-shards N each TEST as N targets `optable:TEST@I/N` (`OpTable_test --rows=I/N`: the
# TEST's rows r with r % N == I), so a TEST too slow for one pair under racecheck spreads over the
# pool.
#
# The pairs run as a pool of --jobs processes (default: the machine's cores less two): a sanitizer
# costs host time per instrumented access, so the GPU idles under one process and the pool is what
# makes the whole suite fit a call. The costliest pairs start first (racecheck before memcheck before
# initcheck before synccheck; the op table before the test cases before the runs) so the call's
# tail is short; the FaultInjection cases run before the pool, one at a time (below). --shard I/N keeps pairs I, I + N, I + 2N, ... of that order, so N calls cover the
# suite; each writes sanitize-I-of-N.tsv, and bench/sanitize_table.sh joins them into one table. A pair past --timeout (default 240 s) is
# "timeout"; pairs not started before BUDGET_S runs out are "not run" (no pair outlives the
# budget): the table never counts either as clean. --resume takes the pair files of earlier calls
# (repeatable) and runs only what they left "not run" or "timeout" (with this call's --timeout), so
# a call that ran out of budget is continued by the next; sanitize_table.sh joins them all, the
# later verdict winning (a TEST done whole counts its row shards done). --only REGEX keeps the
# pairs whose "TOOL|TARGET" matches (grep -E), e.g. 'racecheck\|test:BatchedEngine|optable:OpTableTest.DecodeFusions'. Run from the repository root (the fixtures are tests/data/models/).
set -uo pipefail
bin=${1:?usage: gpu_sanitize.sh BIN_DIR OUT_DIR BUDGET_S [--jobs N] [--shard I/N] [--timeout S] [TOOLS...]}
out=${2:?}
budget=${3:-480}
shift $(($# < 3 ? $# : 3))
jobs=$(($(nproc) > 3 ? $(nproc) - 2 : 1))
shard_i=0 shard_n=1 per_pair=240 row_shards=1 only="" race_skip_cublaslt=""
tools=""
declare -A done_pairs=()  # "tool|target" with a verdict from --resume files
while [ $# -gt 0 ]; do
  case $1 in
    --jobs) jobs=${2:?--jobs needs a count}; shift 2 ;;
    --shard)
      shard_i=${2%/*} shard_n=${2#*/}
      case "$shard_i/$shard_n" in *[!0-9/]* | /* | */) echo "gpu_sanitize: --shard wants I/N, got '$2'"; exit 2 ;; esac
      [ "$shard_n" -ge 1 ] && [ "$shard_i" -lt "$shard_n" ] || { echo "gpu_sanitize: --shard $2: I must be below N"; exit 2; }
      shift 2 ;;
    --timeout) per_pair=${2:?--timeout needs seconds}; shift 2 ;;
    --only) only=${2:?--only needs a regular expression}; shift 2 ;;
    --race-skip-cublaslt) race_skip_cublaslt=1; shift ;;
    --row-shards)
      row_shards=${2:-}
      case $row_shards in '' | *[!0-9]* | 0) echo "gpu_sanitize: --row-shards wants a count >= 1, got '${2:-}'"; exit 2 ;; esac
      shift 2 ;;
    --resume)
      [ -f "${2:-}" ] || { echo "gpu_sanitize: --resume: no pair file '${2:-}'"; exit 2; }
      while IFS=$'\t' read -r target tool verdict; do
        case $verdict in "not run" | timeout | "") ;; *) done_pairs["$tool|$target"]=1 ;; esac
      done < "$2"
      shift 2 ;;
    memcheck | racecheck | initcheck | synccheck) tools="$tools $1"; shift ;;
    *) echo "gpu_sanitize: unknown argument '$1' (tools: memcheck racecheck initcheck synccheck)"; exit 2 ;;
  esac
done
tools=${tools:-racecheck memcheck initcheck synccheck}
cs=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
[ -n "$cs" ] || { echo "gpu_sanitize: compute-sanitizer not found"; exit 1; }
mkdir -p "$out/sanitize/pairs"
# initcheck learns cuBLASLt's stores from memra's NVTX marks (runtime/cuda/InitcheckMarks.h).
nvtx=()
"$cs" --help 2>&1 | grep -q -- '--nvtx' && nvtx=(--nvtx yes)
# Test cases that never touch the GPU (selection and layout units) are not errors.
common=()
"$cs" --help 2>&1 | grep -q -- '--require-cuda-init' && common=(--require-cuda-init no)
# --race-skip-cublaslt: racecheck leaves cuBLASLt's own kernels (nvjet, xmma, cutlass)
# uninstrumented (they are NVIDIA's; 10 "hazards" inside nvjet_sm90_tss_* in sessions 31-32, none
# in a memra kernel). Off by default: on an H100 with driver 580 the filter made racecheck stop
# with "Internal Sanitizer Error: failed to handle a hardware exception" in every q8_0 end-to-end
# test and in OpTable FusedOps, which pass with 0 hazards without it (session 38).
race_filter=()
if [ -n "$race_skip_cublaslt" ] && "$cs" --help 2>&1 | grep -q -- '--kernel-name-exclude'; then
  race_filter=(--kernel-name-exclude 'regex=nvjet|xmma|cutlass|cublas')
fi
deadline=$(($(date +%s) + budget))

# Targets, costliest first.
targets=()
if [ -x "$bin/OpTable_test" ]; then
  for c in $("$bin/OpTable_test" --gtest_list_tests | awk '/^[^ ]/ {s=$1} /^  / {print s $1}'); do
    if [ "$row_shards" -eq 1 ]; then targets+=("optable:$c"); continue; fi
    for ((r = 0; r < row_shards; r++)); do targets+=("optable:$c@$r/$row_shards"); done
  done
fi
for t in $(cd "$bin" && ls *_test 2>/dev/null); do
  [ "$t" = OpTable_test ] && continue
  for c in $("$bin/$t" --gtest_list_tests | awk '/^[^ ]/ {s=$1} /^  / {print s $1}'); do targets+=("test:$t:$c"); done
done
# run8: an 8-token prompt, whose products all run on memra's own GEMV kernels (T <= 8); run: 16
# tokens, whose prefill products run on cuBLASLt.
[ -f tests/data/models/qwen35-tiny-q8_0.gguf ] && targets+=("run8:qwen35-tiny-q8_0")
for m in qwen35-tiny-q8_0 qwen35moe-tiny-q8_0 gemma4-tiny-q8_0 gemma4e-tiny-q8_0 step35-tiny-q8_0; do
  [ -f "tests/data/models/$m.gguf" ] && targets+=("run:$m")
done

# The pairs in start order, this shard's share.
pairs=()
k=0
for tool in $tools; do
  for target in "${targets[@]}"; do
    [ $((k % shard_n)) -eq "$shard_i" ] && [ -z "${done_pairs["$tool|$target"]:-}" ] &&
      [ -z "${done_pairs["$tool|${target%@*}"]:-}" ] &&
      { [ -z "$only" ] || echo "$tool|$target" | grep -qE -- "$only"; } && pairs+=("$tool|$target")
    k=$((k + 1))
  done
done

pair_file() { echo "$out/sanitize/pairs/$(echo "$1-$2" | tr ':/.|' '____')"; }

run_pair() {  # run_pair TOOL TARGET: writes the pair's log and its verdict file
  local tool=$1 target=$2 f extra=() limit=20 left rc errors hazards failed v cmd
  f=$(pair_file "$tool" "$target")
  left=$((deadline - $(date +%s)))
  if [ "$left" -le 5 ]; then echo "not run" > "$f.txt"; return; fi
  [ "$tool" = memcheck ] && extra=(--leak-check full)
  [ "$tool" = racecheck ] && extra=("${race_filter[@]}")
  # initcheck: every error printed, so the table can say which kernels read what.
  [ "$tool" = initcheck ] && limit=100000 && extra=(--show-backtrace no "${nvtx[@]}")
  case $target in
    run8:*) cmd=("$bin/memra" run "tests/data/models/${target#run8:}.gguf" --backend cuda --temp 0 --ignore-eos -n 8
                 --tokens 1,87,107,104,35,116,120,108 --no-echo) ;;
    run:*) cmd=("$bin/memra" run "tests/data/models/${target#run:}.gguf" --backend cuda --temp 0 --ignore-eos -n 8
                --tokens 1,87,107,104,35,116,120,108,102,110,35,101,117,114,122,113 --no-echo) ;;
    test:*) local rest=${target#test:}
            cmd=("$bin/${rest%%:*}" --gtest_filter="${rest#*:}") ;;
    optable:*@*) local t=${target#optable:}
                 cmd=("$bin/OpTable_test" --gtest_filter="${t%@*}" --rows="${t#*@}") ;;
    optable:*) cmd=("$bin/OpTable_test" --gtest_filter="${target#optable:}") ;;
  esac
  timeout $((left < per_pair ? left : per_pair)) "$cs" --tool "$tool" "${common[@]}" "${extra[@]}" --error-exitcode 99 \
    --print-limit $limit "${cmd[@]}" > "$f.log" 2>&1
  rc=$?
  errors=$(sed -n 's/^========= ERROR SUMMARY: \([0-9]*\) error.*/\1/p' "$f.log" | head -1)
  hazards=$(sed -n 's/^========= RACECHECK SUMMARY: \([0-9]*\) hazard.*/\1/p' "$f.log" | head -1)
  failed=$(grep -c '^\[  FAILED  \] [A-Za-z]' "$f.log")
  if [ $rc -eq 124 ]; then v="timeout"
  elif [ -n "$hazards" ]; then v="$hazards hazards"
  elif [ -n "$errors" ]; then v="$errors"
  elif [ $rc -eq 0 ] && [ ${#common[@]} -gt 0 ]; then v="no GPU work"  # the case never initialized CUDA
  else v="rc=$rc"; fi
  # A test that fails under the tool (not a sanitizer error) is flagged too; a case the binary
  # skips (no GPU feature it needs) is marked, since it ran nothing.
  if [ "$failed" -gt 0 ] || { [ $rc -ne 0 ] && [ $rc -ne 99 ] && [ $rc -ne 124 ]; }; then v="$v (rc=$rc, $failed failed)"; fi
  grep -q '^\[  SKIPPED \] [A-Za-z]' "$f.log" && v="$v (skipped)"
  echo "$v" > "$f.txt"
}

# Cases that check the device's free memory (FaultInjection_test: memory given back after each
# failure) run one at a time before the pool, since other processes' allocations would move it;
# first, since a pool that ran to the budget left them "not run" twice (sessions 31-32), and each
# with at most a tenth of the budget, so they cannot take the call.
alone() { case $1 in *FaultInjection_test*) return 0 ;; esac; return 1; }
full_per_pair=$per_pair
per_pair=$((budget / 10 < per_pair ? budget / 10 : per_pair))
for p in "${pairs[@]}"; do
  alone "$p" && run_pair "${p%%|*}" "${p#*|}"
done
per_pair=$full_per_pair
# The pool: at most $jobs pairs at a time, in the order above.
running=0
for p in "${pairs[@]}"; do
  alone "$p" && continue
  if [ "$running" -ge "$jobs" ]; then
    wait -n
    running=$((running - 1))
  fi
  run_pair "${p%%|*}" "${p#*|}" &
  running=$((running + 1))
done
wait

# One line per pair (target, tool, verdict): what bench/sanitize_table.sh renders, alone or joined
# with other shards' files.
for target in "${targets[@]}"; do
  for tool in $tools; do
    f=$(pair_file "$tool" "$target").txt
    [ -f "$f" ] && printf '%s\t%s\t%s\n' "$target" "$tool" "$(cat "$f")"
  done
done > "$out/sanitize-$shard_i-of-$shard_n.tsv"
{
  echo "=== compute-sanitizer shard $shard_i/$shard_n, $jobs jobs, ${#pairs[@]} pairs run of $((${#targets[@]} * $(echo $tools | wc -w))) in the suite (${#done_pairs[@]} done by earlier calls) ==="
  case " $tools " in *" racecheck "*)
    if [ ${#race_filter[@]} -gt 0 ]; then echo "racecheck: cuBLASLt's kernels not instrumented (${race_filter[*]})"
    else echo "racecheck: every kernel instrumented"; fi ;;
  esac
  bash "$(dirname "$0")/sanitize_table.sh" "$out/sanitize-$shard_i-of-$shard_n.tsv"
  # Where initcheck's reports are: the kernel that read, per target (the first 6).
  for log in "$out"/sanitize/pairs/initcheck-*.log; do
    [ -f "$log" ] || continue
    kernels=$(grep -A1 'Uninitialized' "$log" | sed -n 's/^=========  *at \([A-Za-z0-9_]*\).*/\1/p' | sort | uniq -c | sort -rn |
      head -6 | awk '{printf "%s%s x%s", (NR > 1 ? ", " : ""), $2, $1}')
    if [ -n "$kernels" ]; then echo "initcheck $(basename "$log" .log | sed 's/^initcheck-//'): $kernels"; fi
  done
} | tee "$out/sanitize.txt"
