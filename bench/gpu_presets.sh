#!/usr/bin/env bash
# The model presets' benchmarks in one device call (Gemma 4 of issue 18, Step 3.5 of issue 19):
# for each PRESET:DTYPE, `memra gen` writes the synthetic-weight model at the published shape
# (timed), `memra run` greedy-decodes a chat prompt (finite logits, text out), `memra bench` measures pp4096 and tg128, and a profiled tg8 shows
# where a decode step's time goes. Each step runs under what is left of BUDGET_S seconds, so the
# call ends with its table even when a step runs long.
#
# With LLAMACPP_SRC (bench/llamacpp_source.sh's tarball) as a third argument, llama.cpp builds in
# the background while the models generate, and llama-bench runs on each GGUF after memra's bench and
# profiles (the same file, the same run). With --ncu=SKIP:COUNT, Nsight Compute times COUNT decode
# kernels after the first SKIP (one per launch, graphs replayed node by node) and prints the
# per-kernel summary: what each kernel of a layer takes, without the profile's events. With
# --tp=LIST (the multi-GPU kinds, issue 21), memra bench runs the model split over each count of
# GPUs in LIST (one table, then the scaling against the first: `memra bench --tp`), the batched
# bench at B = 1 and 64 at the largest split, and llama-bench its split modes (-sm layer,row) over
# all the GPUs; NCCL_NVLS_ENABLE=0 throughout (the device pages).
#
#   bash bench/gpu_presets.sh BUNDLE BUDGET_S [LLAMACPP_SRC] [--ncu=SKIP:COUNT] [--tp=LIST] [--fill=tiled] PRESET:DTYPE [...]
#   e.g. bash bench/gpu_presets.sh build-gpu/gpu-bundle.tar.xz 560 gemma4-26b-a4b:q4_k_m gemma4-31b:q8_0
#        bash bench/gpu_presets.sh build-gpu/gpu-bundle.tar.xz 570 build-llamacpp/llamacpp-src.tar.xz \
#          step35-flash-8l:q4_k_m
set -uo pipefail
bundle=${1:?usage: gpu_presets.sh BUNDLE BUDGET_S [LLAMACPP_SRC] PRESET:DTYPE...}
budget=${2:?usage: gpu_presets.sh BUNDLE BUDGET_S [LLAMACPP_SRC] PRESET:DTYPE...}
shift 2
llama_src=""
case ${1:-} in *.tar.xz) llama_src=$1; shift ;; esac
ncu_range=""
case ${1:-} in --ncu=*) ncu_range=${1#--ncu=}; shift ;; esac
tp_list=""
case ${1:-} in --tp=*) tp_list=${1#--tp=}; shift ;; esac
fill=()  # --fill=tiled: `memra gen --fill tiled` (large tensors repeat their first 1 Mi drawn values)
case ${1:-} in --fill=*) fill=("$1"); shift ;; esac
export NCCL_NVLS_ENABLE=0
here=$(cd "$(dirname "$0")" && pwd)
start=$(date +%s)
out=${OUT:-/tmp/memra-presets}
bin=/tmp/memra-presets-bin
models=/tmp/memra-models
mkdir -p "$out" "$bin" "$models"
tar xJf "$bundle" -C "$bin" || { echo "cannot unpack $bundle"; exit 1; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
left() { echo $((budget - ($(date +%s) - start))); }
if [ -n "$llama_src" ]; then
  # Niced: the models' generation (all cores) comes first, the build takes what is left.
  nice -n 19 bash "$here/gpu_llamacpp.sh" build "$llama_src" > "$out/llamacpp-build.log" 2>&1 &
  llama_pid=$!
fi
summary=()
# One step under what is left of the budget (at most $1 seconds); its rc and seconds.
step() {
  local cap=$1 name=$2
  shift 2
  local l
  l=$(left)
  [ "$l" -gt "$cap" ] && l=$cap
  if [ "$l" -le 5 ]; then
    summary+=("$name: skipped (budget spent)")
    return 1
  fi
  local t0 rc
  t0=$(date +%s)
  timeout "$l" "$@"
  rc=$?
  summary+=("$name: rc=$rc $(($(date +%s) - t0)) s")
  return $rc
}
for spec in "$@"; do
  preset=${spec%%:*}
  dtype=${spec##*:}
  m=$models/$preset-$dtype.gguf
  tag=$preset-$dtype
  step 500 "gen $tag" "$bin/memra" gen --preset "$preset" --dtype "$dtype" "${fill[@]}" --quiet -o "$m" > "$out/gen-$tag.log" 2>&1 ||
    { tail -3 "$out/gen-$tag.log"; rm -f "$m"; continue; }
  echo "gen $tag: $(du -h "$m" | cut -f1) $(tail -1 "$out/gen-$tag.log")"
  step 90 "run $tag" "$bin/memra" run -m "$m" --chat -p "What is the capital of France?" -n 16 --temp 0 \
    > "$out/run-$tag.txt" 2> "$out/run-$tag.err"
  echo "run $tag: $(head -c 300 "$out/run-$tag.txt" | tr '\n' ' ')"
  grep -iE "error|tok/s|t/s" "$out/run-$tag.err" | tail -3
  step 200 "bench $tag" "$bin/memra" bench "$m" -p 4096 -n 128 -r 2 --kernel-cache /tmp/memra-cache \
    ${tp_list:+--tp "$tp_list"} > "$out/bench-$tag.md" 2> "$out/bench-$tag.err"
  cat "$out/bench-$tag.md"
  grep -i "error" "$out/bench-$tag.err" | head -3
  if [ -n "$tp_list" ]; then
    sed -n '/tensor-parallel scaling/,$p' "$out/bench-$tag.err" | head -12
    step 200 "batch $tag" "$bin/memra" bench "$m" --batch 1,64 -p 512 -n 128 --tp "${tp_list##*,}" \
      --kernel-cache /tmp/memra-cache > "$out/batch-$tag.md" 2> "$out/batch-$tag.err"
    cat "$out/batch-$tag.md"
    grep -i "error" "$out/batch-$tag.err" | head -3
  fi
  step 60 "profile $tag" "$bin/memra" bench "$m" -p 0 -n 8 -r 1 --profile --kernel-cache /tmp/memra-cache \
    > /dev/null 2> "$out/profile-$tag.txt"
  echo "--- profile $tag tg8 ---"
  grep -v "upload weights" "$out/profile-$tag.txt" | head -24
  if [ -n "$ncu_range" ] && command -v ncu > /dev/null; then
    step 120 "ncu $tag" ncu --metrics gpu__time_duration.sum --launch-skip "${ncu_range%%:*}" \
      --launch-count "${ncu_range##*:}" --print-summary per-kernel "$bin/memra" bench "$m" -p 0 -n 4 -r 1 \
      --kernel-cache /tmp/memra-cache > "$out/ncu-$tag.txt" 2>&1
    echo "--- ncu $tag (decode kernels ${ncu_range}) ---"
    grep -E "^  [a-z_0-9]+|gpu__time_duration|Invocations" "$out/ncu-$tag.txt" | head -90
    # The expert products' occupancy, registers and throughput (one decode step's first two each).
    step 60 "ncu-moe $tag" ncu -k regex:gemv_q_moe --launch-skip 8 --launch-count 4 --section LaunchStats \
      --section Occupancy --section SpeedOfLight "$bin/memra" bench "$m" -p 0 -n 2 -r 1 \
      --kernel-cache /tmp/memra-cache > "$out/ncu-moe-$tag.txt" 2>&1
    grep -E "^  gemv|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Limit|Memory Throughput|Duration|Waves Per" \
      "$out/ncu-moe-$tag.txt" | head -60
  fi
  # llama.cpp last (its build may still run): memra's own numbers come first whatever is left.
  if [ -n "$llama_src" ]; then
    while kill -0 "$llama_pid" 2> /dev/null && [ "$(left)" -gt 60 ]; do sleep 5; done
    cat "$out/llamacpp-build.log"
    llama_args=()
    [ -n "$tp_list" ] && llama_args=(-p 4096 -n 128 -r 2 -sm layer,row)
    step 200 "llama-bench $tag" bash "$here/gpu_llamacpp.sh" bench "$m" "${llama_args[@]}" \
      > "$out/llama-bench-$tag.md" 2>&1
    cat "$out/llama-bench-$tag.md"
  fi
  rm -f "$m"
done
echo "=== preset suite ($(($(date +%s) - start)) s of $budget) ==="
for s in "${summary[@]}"; do echo "$s"; done
for f in "$out"/bench-*.md "$out"/llama-bench-*.md; do [ -f "$f" ] && grep -E "pp|tg" "$f" | sed "s|^|$(basename "$f" .md) |"; done
