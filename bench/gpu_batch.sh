#!/usr/bin/env bash
# The batched engine's GPU checks and numbers in one device call (issue 15): the op table's
# sampler and small-bucket product rows (and the sampler under compute-sanitizer memcheck),
# BatchedEngine_test, then on the generated 9B (bf16 unless PRESET:DTYPE says otherwise)
# llama-batched-bench's table greedy and sampled (--temp 0.8) with the TTFT rows, and where a
# batched step and a one-sequence decode step spend their time (--profile). Run from the
# repository root on the GPU machine:
#
#   bash bench/gpu_batch.sh build-gpu/gpu-bundle.tar.xz [PRESET[:DTYPE]] [BATCHES]
#
# Prints a short table last; logs go to $OUT (else /tmp/memra-gpu-out).
set -uo pipefail
bundle=${1:?usage: gpu_batch.sh BUNDLE.tar.xz [PRESET[:DTYPE]] [BATCHES]}
spec=${2:-9b}
batches=${3:-1,8,32,64}
preset=${spec%%:*}; dtype=bf16; [ "$spec" != "$preset" ] && dtype=${spec#*:}
out=${OUT:-/tmp/memra-gpu-out}
bin=/tmp/memra-gpu
cache=/tmp/memra-cache
mkdir -p "$out" "$bin"
tar xJf "$bundle" -C "$bin" || { echo "cannot unpack $bundle"; exit 1; }
summary=()
step() {  # step NAME SECONDS CMD...: runs CMD with a time limit, logs its time and exit code
  local name=$1 limit=$2
  shift 2
  local start=$(date +%s)
  timeout "$limit" "$@"
  local rc=$?
  summary+=("$(printf '%-26s rc=%-4s %5d s' "$name" "$rc" $(( $(date +%s) - start )))")
  return $rc
}
step optable 240 "$bin/OpTable_test" --gtest_filter='*Sample*:*SixteenBit*:*Sequences*' > "$out/optable.log" 2>&1
sed -n '/^op  /,/^op table:/p' "$out/optable.log" | awk '$NF != "ok" || /^op/' | head -40
grep '^op table:' "$out/optable.log"
cs=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
if [ -n "$cs" ]; then
  step memcheck-sample 180 "$cs" --tool memcheck --error-exitcode 99 --print-limit 20 "$bin/OpTable_test" \
    --gtest_filter='*Sample*' > "$out/memcheck-sample.log" 2>&1
  grep -E "ERROR SUMMARY|op table:" "$out/memcheck-sample.log"
fi
step batched-engine 240 "$bin/BatchedEngine_test" > "$out/batched-engine.log" 2>&1
grep -E "^\s+(qwen|greedy|device|picks|[0-9]+ step)|OK \]|FAILED" "$out/batched-engine.log" | head -20
m=/tmp/memra-models/qwen35-$preset-$dtype.gguf
mkdir -p /tmp/memra-models
[ -f "$m" ] || step "gen $preset-$dtype" 300 "$bin/memra" gen --preset "$preset" --dtype "$dtype" --quiet -o "$m" \
  > "$out/gen.log" 2>&1
for temp in 0 0.8; do
  step "batch --temp $temp" 400 "$bin/memra" bench "$m" --batch "$batches" -p 128 -n 128 -r 1 --temp $temp \
    --kernel-cache "$cache" > "$out/batch-temp$temp.md" 2> "$out/batch-temp$temp.err"
  echo "--- --temp $temp"; cat "$out/batch-temp$temp.md"; grep -A20 "time to first token" "$out/batch-temp$temp.err"
done
step "profile batched 1,8" 200 "$bin/memra" bench "$m" --batch 1,8 -p 128 -n 32 -r 1 --profile \
  --kernel-cache "$cache" > /dev/null 2> "$out/profile-batched.txt"
step "profile one sequence" 200 "$bin/memra" bench "$m" -p 0 -n 32 -r 1 --profile --kernel-cache "$cache" \
  > /dev/null 2> "$out/profile-single.txt"
# The device tool returns a few files: keep the profiles, pack the rest.
(cd "$out" && tar czf all-logs.tgz --exclude=all-logs.tgz . &&
  find . -maxdepth 1 -type f ! -name all-logs.tgz ! -name 'profile-*' -delete)
echo "=== memra GPU batch suite ==="
for s in "${summary[@]}"; do echo "$s"; done
exit 0
