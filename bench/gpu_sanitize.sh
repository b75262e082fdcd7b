#!/usr/bin/env bash
# compute-sanitizer over the GPU tests and one end-to-end prefill + decode per model family (issue
# 20): every (target, tool) pair under memcheck (with --leak-check full), racecheck, initcheck and
# synccheck, each with its own timeout, and a table of error counts last. Called by
# `bash bench/gpu_suite.sh BUNDLE --sanitize [BUDGET_S] [TOOLS...]`; alone:
#
#   bash bench/gpu_sanitize.sh BIN_DIR OUT_DIR BUDGET_S [TOOLS...]
#
# Targets, cheapest first: `memra run --backend cuda` on each tiny q8_0 fixture (qwen35, qwen35moe,
# gemma4, gemma4e, step35; prefill of 16 tokens, 8 greedy steps through the graphs and the device
# loop), the kernel tests, then the op table one TEST at a time. A pair past its timeout (120 s) is
# "timeout"; pairs left when BUDGET_S runs out are "not run": the table never counts either as
# clean. Run from the repository root (the fixtures are tests/data/models/).
set -uo pipefail
bin=${1:?usage: gpu_sanitize.sh BIN_DIR OUT_DIR BUDGET_S [TOOLS...]}
out=${2:?}
budget=${3:-480}
shift $(( $# < 3 ? $# : 3 ))
tools=${*:-memcheck racecheck initcheck synccheck}
per_pair=120
cs=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
[ -n "$cs" ] || { echo "gpu_sanitize: compute-sanitizer not found"; exit 1; }
mkdir -p "$out/sanitize"
# initcheck learns cuBLASLt's stores from memra's NVTX marks (runtime/cuda/InitcheckMarks.h).
nvtx=()
"$cs" --help 2>&1 | grep -q -- '--nvtx' && nvtx=(--nvtx yes)
deadline=$(( $(date +%s) + budget ))

targets=()
# run8: an 8-token prompt, whose products all run on memra's own GEMV kernels (T <= 8); run: 16
# tokens, whose prefill products run on cuBLASLt.
[ -f tests/data/models/qwen35-tiny-q8_0.gguf ] && targets+=("run8:qwen35-tiny-q8_0")
for m in qwen35-tiny-q8_0 qwen35moe-tiny-q8_0 gemma4-tiny-q8_0 gemma4e-tiny-q8_0 step35-tiny-q8_0; do
  [ -f "tests/data/models/$m.gguf" ] && targets+=("run:$m")
done
for t in CublasLtWrites_test Dequant_test GemvQuant_test MoeGemm_test CudaGraph_test CudaExecutor_test BatchedEngine_test PlanKernels_test; do
  [ -x "$bin/$t" ] && targets+=("test:$t")
done
if [ -x "$bin/OpTable_test" ]; then
  for c in $("$bin/OpTable_test" --gtest_list_tests | awk '/^[^ ]/ {s=$1} /^  / {print s $1}'); do targets+=("optable:$c"); done
fi

declare -A cell
run_pair() {  # run_pair TARGET TOOL LOG
  local target=$1 tool=$2 log=$3 extra=()
  [ "$tool" = memcheck ] && extra=(--leak-check full)
  # initcheck: every error printed, so the table can say which kernels read what.
  local limit=20
  [ "$tool" = initcheck ] && limit=100000 && extra=(--show-backtrace no "${nvtx[@]}")
  case $target in
    run8:*)
      timeout $per_pair "$cs" --tool "$tool" "${extra[@]}" --error-exitcode 99 --print-limit $limit \
        "$bin/memra" run "tests/data/models/${target#run8:}.gguf" --backend cuda --temp 0 --ignore-eos -n 8 \
        --tokens 1,87,107,104,35,116,120,108 --no-echo >"$log" 2>&1 ;;
    run:*)
      timeout $per_pair "$cs" --tool "$tool" "${extra[@]}" --error-exitcode 99 --print-limit $limit \
        "$bin/memra" run "tests/data/models/${target#run:}.gguf" --backend cuda --temp 0 --ignore-eos -n 8 \
        --tokens 1,87,107,104,35,116,120,108,102,110,35,101,117,114,122,113 --no-echo >"$log" 2>&1 ;;
    test:*)
      timeout $per_pair "$cs" --tool "$tool" "${extra[@]}" --error-exitcode 99 --print-limit $limit \
        "$bin/${target#test:}" >"$log" 2>&1 ;;
    optable:*)
      timeout $per_pair "$cs" --tool "$tool" "${extra[@]}" --error-exitcode 99 --print-limit $limit \
        "$bin/OpTable_test" --gtest_filter="${target#optable:}" >"$log" 2>&1 ;;
  esac
}
# One lane per tool, in parallel (the GPU is far from busy under a sanitizer): each walks the
# targets in order until the budget ends; its results go to a file per lane.
lane() {  # lane TOOL
  local tool=$1 target log rc errors hazards failed v
  for target in "${targets[@]}"; do
    if [ "$(date +%s)" -ge "$deadline" ]; then echo "$target|not run"; continue; fi
    log="$out/sanitize/${tool}-$(echo "${target}" | tr ':/.' '___').log"
    run_pair "$target" "$tool" "$log"
    rc=$?
    errors=$(sed -n 's/^========= ERROR SUMMARY: \([0-9]*\) error.*/\1/p' "$log" | head -1)
    hazards=$(sed -n 's/^========= RACECHECK SUMMARY: \([0-9]*\) hazard.*/\1/p' "$log" | head -1)
    failed=$(grep -c '^\[  FAILED  \] [A-Za-z]' "$log")
    if [ $rc -eq 124 ]; then v="timeout"
    elif [ -n "$hazards" ]; then v="$hazards hazards"
    elif [ -n "$errors" ]; then v="$errors"
    else v="rc=$rc"; fi
    # A test that fails under the tool (not a sanitizer error) is flagged too.
    if [ "$failed" -gt 0 ] || { [ $rc -ne 0 ] && [ $rc -ne 99 ] && [ $rc -ne 124 ]; }; then v="$v (rc=$rc, $failed failed)"; fi
    echo "$target|$v"
  done > "$out/sanitize/lane-$tool.txt"
}
for tool in $tools; do lane "$tool" & done
wait
for tool in $tools; do
  while IFS='|' read -r target v; do cell["$target|$tool"]=$v; done < "$out/sanitize/lane-$tool.txt"
done

{
  echo "=== compute-sanitizer (errors; racecheck: hazards) ==="
  printf '%-44s' "target"
  for tool in $tools; do printf ' %-12s' "$tool"; done
  echo
  clean=0 dirty=0 missing=0
  for target in "${targets[@]}"; do
    printf '%-44s' "$target"
    for tool in $tools; do
      v=${cell["$target|$tool"]}
      printf ' %-12s' "$v"
      case $v in 0|"0 hazards") clean=$((clean + 1)) ;; "not run"|timeout) missing=$((missing + 1)) ;; *) dirty=$((dirty + 1)) ;; esac
    done
    echo
  done
  echo "sanitize: $clean pairs clean, $dirty with errors or failures, $missing timed out or not run (of $(( ${#targets[@]} * $(echo $tools | wc -w) )))"
  # Where initcheck's reports are: the kernel that read, per target (the first 6).
  for log in "$out"/sanitize/initcheck-*.log; do
    [ -f "$log" ] || continue
    kernels=$(grep -A1 'Uninitialized' "$log" | sed -n 's/^=========  *at \([A-Za-z0-9_]*\).*/\1/p' | sort | uniq -c | sort -rn |
      head -6 | awk '{printf "%s%s x%s", (NR > 1 ? ", " : ""), $2, $1}')
    [ -n "$kernels" ] && echo "initcheck $(basename "$log" .log | sed 's/^initcheck-//'): $kernels"
  done
} | tee "$out/sanitize.txt"
