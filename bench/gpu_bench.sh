#!/usr/bin/env bash
# The benchmark half of bench/gpu_suite.sh: generates the `memra gen` presets 0.8b and 9b in
# bf16 on the GPU machine (they do not travel) and runs `memra bench` on each (llama-bench's
# layout). Usage: gpu_bench.sh BIN_DIR OUT_DIR [presets...]
set -uo pipefail
bin=${1:?bin dir}; out=${2:?out dir}; shift 2
presets=${*:-0.8b 9b}
models=${MEMRA_BENCH_MODELS:-/tmp/memra-models}
mkdir -p "$models"
: > "$out/bench.txt"
for preset in $presets; do
  m=$models/qwen35-$preset-bf16.gguf
  start=$(date +%s)
  [ -f "$m" ] || "$bin/memra" gen --preset "$preset" --dtype bf16 --quiet -o "$m" > "$out/gen-$preset.log" 2>&1
  echo "gen $preset: $(( $(date +%s) - start )) s, $(du -h "$m" | cut -f1)" | tee -a "$out/bench-notes.txt"
  "$bin/memra" bench "$m" -p 512,4096 -n 128 -r 3 --kernel-cache /tmp/memra-cache \
    > "$out/bench-$preset.md" 2> "$out/bench-$preset.err"
  # Decode with every op launched eagerly (no CUDA graphs), for the graphs-vs-eager comparison.
  "$bin/memra" bench "$m" -p 0 -n 128 -r 3 --cuda-graphs=false --kernel-cache /tmp/memra-cache \
    2> "$out/bench-$preset-eager.err" | tail -1 | sed 's/tg128 /tg128 eager/' > "$out/bench-$preset-eager.md"
  # A compiled plan: compile (NVRTC cubins into the plan, no GPU needed), then time to first token.
  "$bin/memra" compile "$m" -o "$models/$preset.plan" --arch sm_90 --report > "$out/plan-$preset.txt" 2>&1
  echo "compile $preset: rc=$? $(grep -E 'wrote' "$out/plan-$preset.txt" | tail -1)" | tee -a "$out/bench-notes.txt"
  for src in "$models/$preset.plan" "$m"; do
    "$bin/memra" run "$src" -p "The quick brown fox" -n 32 --ignore-eos --no-echo 2>&1 >/dev/null |
      grep -E "first token|generation|cuda graphs" | sed "s|^|run $(basename "$src"): |" | tee -a "$out/bench-notes.txt"
  done
  rm -f "$models/$preset.plan"
  # The same tests once more with per-op device timing (events around every op; slower).
  "$bin/memra" bench "$m" -p 4096 -n 32 -r 1 --profile --kernel-cache /tmp/memra-cache \
    > /dev/null 2> "$out/profile-$preset.txt"
  grep -v "upload weights:" "$out/bench-$preset.err" | tee -a "$out/bench-notes.txt"
  cat "$out/bench-$preset.md" "$out/bench-$preset-eager.md" >> "$out/bench.txt"
  rm -f "$m"  # the device disk is 64 GiB
done
