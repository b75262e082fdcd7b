#!/usr/bin/env bash
# Where a decode step's time goes (issue 17 item 4): `memra bench` tg128 (CUDA graphs, the number
# users get), then ncu over one eager decode step (the kernels between two advance_positions
# launches), summed per kernel name. The step's time minus the kernels' sum is what launches,
# dependencies and ramps cost between kernels: the share that fewer kernels per layer recovers.
#
#   bash bench/gpu_decode_timeline.sh BUNDLE [PRESET[:DTYPE]...]     (default: 0.8b; dtype bf16)
set -uo pipefail
bundle=${1:?usage: gpu_decode_timeline.sh BUNDLE [PRESETS...]}
shift
presets=${*:-0.8b}
out=${OUT:-/tmp/memra-timeline}
bin=/tmp/memra-timeline-bin
models=/tmp/memra-models
mkdir -p "$out" "$bin" "$models"
[ -x "$bin/memra" ] || tar xJf "$bundle" -C "$bin" || { echo "cannot unpack $bundle"; exit 1; }
ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
summary=()
for spec in $presets; do
  preset=${spec%%:*}
  dtype=bf16
  [ "$spec" = "$preset" ] || dtype=${spec#*:}
  m=$models/qwen35-$preset-$dtype.gguf
  [ -f "$m" ] || "$bin/memra" gen --preset "$preset" --dtype "$dtype" --quiet -o "$m" > /dev/null 2>&1
  preset=$preset-$dtype
  "$bin/memra" bench "$m" -p 0 -n 128 -r 3 --kernel-cache /tmp/memra-cache > "$out/tg-$preset.md" 2> "$out/tg-$preset.err"
  tg=$(grep -E "tg128" "$out/tg-$preset.md" | head -1)
  summary+=("$preset $tg")
  [ -n "$ncu" ] || { summary+=("$preset: no ncu"); continue; }
  # Eager (no graph) so ncu sees each launch; kernels as the graph holds them.
  timeout 240 "$ncu" --clock-control none --metrics gpu__time_duration.sum --csv --print-units base \
    "$bin/memra" bench "$m" -p 0 -n 3 -r 1 --cuda-graphs=false --kernel-cache /tmp/memra-cache \
    > "$out/ncu-$preset.csv" 2> "$out/ncu-$preset.err"
  # Kernels of the last complete decode step: after the second-to-last advance_positions.
  awk -F'","' 'NR > 1 && $13 == "gpu__time_duration.sum" {
      name = $5; sub(/\(.*/, "", name); n++; k[n] = name; t[n] = $15 + 0 }
    END {
      last = 0; prev = 0
      for (i = 1; i <= n; ++i) if (k[i] ~ /advance_positions/) { prev = last; last = i }
      total = 0; cnt = 0
      for (i = prev + 1; i <= last; ++i) { s[k[i]] += t[i]; c[k[i]]++; total += t[i]; cnt++ }
      printf "%-34s %6s %10s %6s\n", "kernel (one decode step)", "calls", "us", "%"
      for (x in s) printf "%-34s %6d %10.1f %6.1f\n", x, c[x], s[x] / 1000, 100 * s[x] / total
      printf "%-34s %6d %10.1f\n", "sum of kernels", cnt, total / 1000
    }' "$out/ncu-$preset.csv" | sort -k3 -n -r > "$out/timeline-$preset.txt"
  echo "--- $preset: one decode step, kernel by kernel (ncu, eager) ---"
  cat "$out/timeline-$preset.txt"
  summary+=("$preset $(grep 'sum of kernels' "$out/timeline-$preset.txt")")
done
echo "=== decode timeline ==="
for s in "${summary[@]}"; do echo "$s"; done
