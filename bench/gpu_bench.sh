#!/usr/bin/env bash
# The benchmark half of bench/gpu_suite.sh: generates the `memra gen` presets 0.8b and 9b in
# bf16 on the GPU machine (they do not travel) and runs `memra bench` on each (llama-bench's
# layout). Usage: gpu_bench.sh BIN_DIR OUT_DIR [PRESET[:DTYPE]...] [kernels]   (e.g. 0.8b 9b 9b:q8_0
# 35b-a3b:q8_0; `kernels` adds memra-kernel-bench; `batch` adds llama-batched-bench's table per
# model: memra bench --batch 1,8,32,64 -p 128 -n 128 through the batched engine)
set -uo pipefail
bin=${1:?bin dir}; out=${2:?out dir}; shift 2
presets=${*:-0.8b 9b}
models=${MEMRA_BENCH_MODELS:-/tmp/memra-models}
mkdir -p "$models"
: > "$out/bench.txt"
# Kernel microbenchmarks (no model): the decode GEMV variants vs cuBLASLt at the 9B's shapes, the
# chunked delta rule's launches, cuBLASLt's candidates for the prefill products; only when
# `kernels` is among the presets (they take minutes of device time).
want_kernels=0
want_batch=0
rest=()
for spec in $presets; do
  case $spec in kernels) want_kernels=1 ;; batch) want_batch=1 ;; *) rest+=("$spec") ;; esac
done
presets="${rest[*]}"
if [ "$want_kernels" = 1 ] && [ -x "$bin/memra-kernel-bench" ]; then
  { "$bin/memra-kernel-bench"
    "$bin/memra-kernel-bench" --section moe --formats q4_K,q6_K,q8_0 --iters 20
    "$bin/memra-kernel-bench" --section deltanet --iters 20
    "$bin/memra-kernel-bench" --section gemm --iters 10 --lengths 4096,512 --candidates 12
    "$bin/memra-kernel-bench" --section attention --iters 10 --lengths 1024,4096,16384; } > "$out/kernel-bench.txt" 2>&1
  cat "$out/kernel-bench.txt"
  { echo; echo '```'; cat "$out/kernel-bench.txt"; echo '```'; echo; } >> "$out/bench.txt"
fi
for spec in $presets; do
  # PRESET or PRESET:DTYPE (default bf16); a quantized model gets the main table only.
  preset=${spec%%:*}; dtype=bf16; [ "$spec" != "$preset" ] && dtype=${spec#*:}
  tag=$preset-$dtype
  m=$models/qwen35-$tag.gguf
  start=$(date +%s)
  [ -f "$m" ] || "$bin/memra" gen --preset "$preset" --dtype "$dtype" --quiet -o "$m" > "$out/gen-$tag.log" 2>&1
  echo "gen $tag: $(( $(date +%s) - start )) s, $(du -h "$m" | cut -f1)" | tee -a "$out/bench-notes.txt"
  if [ "$want_batch" = 1 ]; then
    # Several sequences per step (issue 15): llama-batched-bench's table on the batched engine.
    "$bin/memra" bench "$m" --batch 1,8,32,64 -p 128 -n 128 -r 1 --kernel-cache /tmp/memra-cache \
      > "$out/batch-$tag.md" 2> "$out/batch-$tag.err"
    echo "batch $tag: rc=$? $(grep -v 'upload weights' "$out/batch-$tag.err" | tail -2)" | tee -a "$out/bench-notes.txt"
    { echo; echo "batched $tag:"; cat "$out/batch-$tag.md"; } >> "$out/bench.txt"
  fi
  if [ "$dtype" != bf16 ]; then
    "$bin/memra" bench "$m" -p 512,4096 -n 128 -r 2 --kernel-cache /tmp/memra-cache > "$out/bench-$tag.md" 2> "$out/bench-$tag.err"
    grep -v "upload weights:" "$out/bench-$tag.err" | tee -a "$out/bench-notes.txt"
    cat "$out/bench-$tag.md" >> "$out/bench.txt"
    # Where decode time goes (events around every op; slower than the graphs).
    "$bin/memra" bench "$m" -p 0 -n 32 -r 1 --profile --kernel-cache /tmp/memra-cache \
      > /dev/null 2> "$out/profile-$tag.txt"
    rm -f "$m"
    continue
  fi
  "$bin/memra" bench "$m" -p 512,4096 -n 128 -d 0,4096 -r 3 --kernel-cache /tmp/memra-cache \
    > "$out/bench-$tag.md" 2> "$out/bench-$tag.err"
  # Decode with every op launched eagerly (no CUDA graphs), for the graphs-vs-eager comparison.
  "$bin/memra" bench "$m" -p 0 -n 128 -r 3 --cuda-graphs=false --kernel-cache /tmp/memra-cache \
    2> "$out/bench-$tag-eager.err" | grep "^|" | tail -1 | sed 's/        tg128 |/tg128 (eager) |/' > "$out/bench-$tag-eager.md"
  # A compiled plan: compile (NVRTC cubins into the plan, no GPU needed), then time to first token.
  "$bin/memra" compile "$m" -o "$models/$tag.plan" --arch sm_90 --report > "$out/plan-$tag.txt" 2>&1
  echo "compile $tag: rc=$? $(grep -E 'wrote' "$out/plan-$tag.txt" | tail -1)" | tee -a "$out/bench-notes.txt"
  for src in "$models/$tag.plan" "$m"; do
    "$bin/memra" run "$src" -p "The quick brown fox" -n 32 --ignore-eos --no-echo --temp 0 2>&1 >/dev/null |
      grep -E "first token|generation|cuda graphs" | sed "s|^|run $(basename "$src"): |" | tee -a "$out/bench-notes.txt"
  done
  rm -f "$models/$tag.plan"
  # The same tests once more with per-op device timing (events around every op; slower).
  "$bin/memra" bench "$m" -p 4096 -n 32 -r 1 --profile --kernel-cache /tmp/memra-cache \
    > /dev/null 2> "$out/profile-$tag.txt"
  grep -v "upload weights:" "$out/bench-$tag.err" | tee -a "$out/bench-notes.txt"
  cat "$out/bench-$tag.md" "$out/bench-$tag-eager.md" >> "$out/bench.txt"
  rm -f "$m"  # the device disk is 64 GiB
done
