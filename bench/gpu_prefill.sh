#!/usr/bin/env bash
# Issue 17's prefill kernels on the GPU in one call: the op table's attention and delta-net rows
# (tensor-core flash attention, the chunked delta rule) against the CPU executor, the end-to-end
# executor tests, compute-sanitizer memcheck and racecheck over the new kernels' rows, the kernel
# bench's deltanet and gemm sections, then `memra bench` prefill (pp512, pp4096) and a --profile
# of pp4096 per preset. Run from the
# repository root on the GPU machine:
#
#   bash bench/gpu_prefill.sh build-gpu/gpu-bundle.tar.xz [--bench-only] [PRESET...]   (default: 0.8b 9b)
#
# --bench-only: the benchmarks alone (after bench/gpu_suite.sh --tests-only in the same call).
set -uo pipefail
bundle=${1:?usage: gpu_prefill.sh BUNDLE.tar.xz [--bench-only] [PRESET...]}
shift
bench_only=0
if [ "${1:-}" = "--bench-only" ]; then bench_only=1; shift; fi
presets=${*:-0.8b 9b}
out=${OUT:-/tmp/memra-gpu-out}
bin=/tmp/memra-gpu
models=/tmp/memra-models
mkdir -p "$out" "$bin" "$models"
tar xJf "$bundle" -C "$bin" || { echo "cannot unpack $bundle"; exit 1; }
export NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
summary=()
if [ "$bench_only" = 0 ]; then
  filter='OpTableTest.AttentionPieces:OpTableTest.AttentionGeometries:OpTableTest.FusedOps:OpTableTest.DeltaNet:OpTableTest.ChunkedScanGridLaw'
  "$bin/OpTable_test" --gtest_filter="$filter" > "$out/optable.log" 2>&1
  summary+=("optable (attention, delta net): rc=$? $(grep '^op table:' "$out/optable.log")")
  sed -n '/^op  /,/^op table:/p' "$out/optable.log" | grep -E "^op|attention|delta_scan" | awk '$NF != "ok" || /^op/ || /chunked|bf16/' | head -60
  grep -A4 'Failure' "$out/optable.log" | head -30
  "$bin/CudaExecutor_test" > "$out/executor.log" 2>&1
  summary+=("CudaExecutor_test: rc=$? $(grep -c '^\[       OK \]' "$out/executor.log") ok, $(grep -c '^\[  FAILED  \] [A-Za-z]' "$out/executor.log") failed")
  grep -A4 'Failure' "$out/executor.log" | head -20
  cs=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
  if [ -n "$cs" ]; then
    for tool in memcheck racecheck; do
      timeout 240 "$cs" --tool $tool --error-exitcode 99 --print-limit 10 "$bin/OpTable_test" \
        --gtest_filter='OpTableTest.AttentionGeometries:OpTableTest.ChunkedScanGridLaw' > "$out/$tool.log" 2>&1
      rc=$?
      summary+=("$tool flash attention + chunked scan: rc=$rc $(grep -m1 -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/$tool.log")")
    done
  fi
fi
# The chunked delta rule's two launches at the 9B / 0.8B shapes, and cuBLASLt's candidates for the
# 9B's prefill products (memra-kernel-bench sections deltanet and gemm).
"$bin/memra-kernel-bench" --section deltanet --iters 20 > "$out/kernels-deltanet.txt" 2>&1
summary+=("kernel bench deltanet: rc=$?")
grep -E "bf16" "$out/kernels-deltanet.txt"
"$bin/memra-kernel-bench" --section gemm --iters 10 --lengths 4096,512 --candidates 12 > "$out/kernels-gemm.txt" 2>&1
summary+=("kernel bench gemm: rc=$?")
tail -13 "$out/kernels-gemm.txt"
# The prefill attention kernels side by side (wgmma on Hopper, mma.sync), issue 17 item 1's goal.
"$bin/memra-kernel-bench" --section attention --iters 10 --lengths 1024,4096,16384 > "$out/kernels-attention.txt" 2>&1
summary+=("kernel bench attention: rc=$?")
tail -11 "$out/kernels-attention.txt"
for preset in $presets; do
  m=$models/qwen35-$preset-bf16.gguf
  [ -f "$m" ] || "$bin/memra" gen --preset "$preset" --dtype bf16 --quiet -o "$m" > /dev/null 2>&1
  "$bin/memra" bench "$m" -p 512,4096 -n 32 -r 2 --kernel-cache /tmp/memra-cache > "$out/bench-$preset.md" 2> "$out/bench-$preset.err"
  summary+=("bench $preset: rc=$?")
  cat "$out/bench-$preset.md"
  "$bin/memra" bench "$m" -p 4096 -n 0 -r 1 --profile --kernel-cache /tmp/memra-cache > /dev/null 2> "$out/profile-$preset.txt"
  echo "--- profile $preset pp4096 ---"
  grep -v "upload weights" "$out/profile-$preset.txt" | head -40
done
echo "=== issue 17 prefill suite ==="
for s in "${summary[@]}"; do echo "$s"; done
for preset in $presets; do grep -E "pp|tg" "$out/bench-$preset.md" | sed "s/^/$preset /"; done
