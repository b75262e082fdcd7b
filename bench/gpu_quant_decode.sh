#!/usr/bin/env bash
# Quantized decode on one device call (issues 17-19): where a q8_0 / q4_K decode step goes and
# why its block GEMVs stream below the bandwidth roofline.
#   1. memra-kernel-bench --section quant --sweep 1 over FORMATS (every rows x stages x grid geometry
#      with q8 x, the units' choice on the first line of each shape);
#   2. per model PRESET:DTYPE: tg128 and tg32 at depth 0 / 32,768 (f16 KV), then the decode
#      timeline (ncu over one eager step, bench/gpu_decode_timeline.sh);
#   3. ncu details (speed of light, occupancy, warp states, launch stats) of the step's first
#      gemv_q_swiglu and gemv_q launches.
#
#   bash bench/gpu_quant_decode.sh BUNDLE [FORMATS] [PRESET:DTYPE...]   (default q8_0 9b:q8_0)
set -uo pipefail
bundle=${1:?usage: gpu_quant_decode.sh BUNDLE [FORMATS] [PRESET:DTYPE...]}
formats=${2:-q8_0}
shift $(( $# >= 2 ? 2 : 1 ))
models_spec=${*:-9b:q8_0}
out=${OUT:-/tmp/memra-quant-out}
bin=/tmp/memra-timeline-bin
models=/tmp/memra-models
mkdir -p "$out" "$bin" "$models"
tar xJf "$bundle" -C "$bin" || { echo "cannot unpack $bundle"; exit 1; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$out/gpu.txt"
ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)

timeout 240 "$bin/memra-kernel-bench" --section quant --sweep 1 --formats "$formats" > "$out/sweep.txt" 2>&1
echo "--- kernel bench sweep ($formats) ---"
grep -v '^(' "$out/sweep.txt"

for spec in $models_spec; do
  preset=${spec%%:*}
  dtype=${spec#*:}
  m=$models/qwen35-$preset-$dtype.gguf
  [ -f "$m" ] || "$bin/memra" gen --preset "$preset" --dtype "$dtype" --quiet -o "$m" > /dev/null 2>&1
  echo "--- $preset $dtype: depth 0 / 32768 (f16 KV) ---"
  timeout 200 "$bin/memra" bench "$m" -p 0 -n 32 -d 0,32768 -r 2 -ctk f16 -ctv f16 --kernel-cache /tmp/memra-cache \
    2>&1 | tee "$out/depth-$preset-$dtype.md" | grep -E "tg|error"
  [ -n "$ncu" ] || continue
  for k in gemv_q_swiglu gemv_q; do
    timeout 120 "$ncu" --clock-control none -k "regex:^$k\$" --launch-skip 40 --launch-count 1 \
      --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats \
      --section MemoryWorkloadAnalysis \
      "$bin/memra" bench "$m" -p 0 -n 2 -r 1 --cuda-graphs=false --kernel-cache /tmp/memra-cache \
      > "$out/ncu-$k-$preset-$dtype.txt" 2>&1
    echo "--- ncu $k ($preset $dtype) ---"
    grep -E "Duration|DRAM Throughput|Memory Throughput|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Limit|Grid Size|Block Size|Stall|Warp Cycles Per Issued|Dynamic Shared|Static Shared|L1/TEX Hit|L2 Hit|Waves Per SM" \
      "$out/ncu-$k-$preset-$dtype.txt" | head -40
  done
done
OUT=$out/timeline bash "$(dirname "$0")/gpu_decode_timeline.sh" "$bundle" $models_spec 2>&1 | tail -40
