#!/usr/bin/env bash
# The decode GEMV on GGUF blocks (kernels/cuda/GemvQuant.cu) in one device call: its GPU tests
# (every format x tokens x fused form, the MoE forms), compute-sanitizer memcheck over them, and
# memra-kernel-bench's quant section, optionally beside an earlier build's kernel bench (an xz'ed
# memra-kernel-bench binary) so before / after are measured in the same run.
#
#   bash bench/gpu_gemv.sh BUNDLE.tar.xz [OLD_KERNEL_BENCH.xz] [--formats q8_0,q4_K,q5_K,q6_K]
set -uo pipefail
bundle=${1:?usage: gpu_gemv.sh BUNDLE.tar.xz [OLD_KERNEL_BENCH.xz] [--formats LIST]}
old=${2:-}
formats=${4:-q8_0,q4_K,q5_K,q6_K}
out=${OUT:-/tmp/memra-gpu-out}
bin=/tmp/memra-gpu
mkdir -p "$out" "$bin"
tar xJf "$bundle" -C "$bin" || { echo "cannot unpack $bundle"; exit 1; }
export NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$out/gpu.txt"
summary=()
run_test() {  # name, timeout, command...
  local name=$1 limit=$2
  shift 2
  local start=$(date +%s%N)
  timeout "$limit" "$@" > "$out/$name.log" 2>&1
  local rc=$?
  local ms=$(( ($(date +%s%N) - start) / 1000000 ))
  local ok=$(grep -c '^\[       OK \]' "$out/$name.log")
  local failed=$(grep -c '^\[  FAILED  \] [A-Za-z]' "$out/$name.log")
  local errs=$(grep -m1 -oE 'ERROR SUMMARY: [0-9]+ error' "$out/$name.log")
  summary+=("$(printf '%-28s rc=%-3s ok=%-3s failed=%-3s %-24s %7d ms' "$name" "$rc" "$ok" "$failed" "$errs" "$ms")")
  grep -E '^\[  FAILED  \]|cases|mismatch' "$out/$name.log" | head -8
}
run_test GemvQuant_test 240 "$bin/GemvQuant_test"
run_test MoeGemm_test 240 "$bin/MoeGemm_test"
run_test OpTable_products 240 "$bin/OpTable_test" \
  --gtest_filter='OpTableTest.MatMul:OpTableTest.BlockFormats:OpTableTest.Moe:OpTableTest.Gemma4Pieces:OpTableTest.Step35Pieces:OpTableTest.FusedOps'
run_test CudaExecutor_test 240 "$bin/CudaExecutor_test"
if command -v compute-sanitizer >/dev/null; then
  run_test memcheck_GemvQuant 300 compute-sanitizer --tool memcheck --error-exitcode 1 "$bin/GemvQuant_test"
  run_test synccheck_GemvQuant 300 compute-sanitizer --tool synccheck --error-exitcode 1 "$bin/GemvQuant_test" \
    --gtest_filter='*EveryFormat*'
fi
"$bin/memra-kernel-bench" --section quant --formats "$formats" 2>&1 | tee "$out/kernel_bench_new.txt"
if [ -n "$old" ] && [ -f "$old" ]; then
  xz -dc "$old" > /tmp/old-kernel-bench && chmod +x /tmp/old-kernel-bench
  /tmp/old-kernel-bench --section quant --formats "$formats" 2>&1 | tee "$out/kernel_bench_old.txt"
fi
echo
echo "== summary =="
printf '%s\n' "${summary[@]}"
