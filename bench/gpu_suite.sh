#!/usr/bin/env bash
# The one-call GPU suite: unpacks a bundle made by bench/make_gpu_bundle.sh, runs every GPU test
# and a short benchmark, and prints a compact table last. Run from the repository root on the
# GPU machine (tests read tests/data/ relative to it):
#
#   bash bench/gpu_suite.sh build-gpu/gpu-bundle.tar.xz [all|--tests-only|--bench-only] [PRESETS...]
#   bash bench/gpu_suite.sh build-gpu/gpu-bundle.tar.xz --sanitize [BUDGET_S] [--jobs N] [--shard I/N] [--row-shards N] [--resume TSV] [TOOLS...]
#
# --sanitize: compute-sanitizer (memcheck with leak checking, racecheck, initcheck, synccheck) over
# every GPU test case and one prefill + decode per model family, as a pool of processes, a table of
# error counts last (bench/gpu_sanitize.sh; BUDGET_S default 480). --shard I/N runs every N-th
# pair, so N calls cover the suite; --row-shards N splits each op-table TEST into N pairs by rows;
# --resume TSV (an earlier call's pair file) runs only what it left
# not run or timed out; bench/sanitize_table.sh joins their sanitize-I-of-N.tsv files.
# PRESETS: the `memra gen` presets to benchmark (default: 0.8b 9b). When .device/demo-f32-bf16r.gguf.xz
# is carried (tools/convert_hf_to_gguf.py --type f32 --round-bf16 of the demo checkpoint, xz'ed),
# the demo model's greedy text on the GPU is checked against PyTorch's (tools/train_demo/check_greedy.py).
#
# Tests mode also runs GemvQuant_test, Dequant_test, MoeGemm_test, CudaExecutor_test and Q8Companion_test (the
# compiled pipelines' decode with the q8 companions) under compute-sanitizer
# memcheck (a row each in the table: its error count), and the tensor-core prefill kernels' op-table
# rows under memcheck and racecheck. Logs go to $OUT (when set, else
# /tmp/memra-gpu-out).
set -uo pipefail
bundle=${1:?usage: gpu_suite.sh BUNDLE.tar.xz [--tests-only|--bench-only]}
mode=${2:-all}
shift $(( $# < 2 ? $# : 2 ))
presets=${*:-}
[ "$mode" = "--sanitize" ] || presets=${presets:-0.8b 9b}
out=${OUT:-/tmp/memra-gpu-out}
bin=/tmp/memra-gpu
mkdir -p "$out" "$bin"
tar xJf "$bundle" -C "$bin" || { echo "cannot unpack $bundle"; exit 1; }
# The op table's cubins compiled by make_gpu_bundle.sh, where its executors look (OpTable_test's
# cache_dir(): gtest's TempDir()); modules compiled for other sources or NVRTC are not found there.
if [ -d "$bin/optable-cache" ]; then
  mkdir -p "${TEST_TMPDIR:-/tmp}/memra-optable-cache"
  cp -r "$bin/optable-cache/." "${TEST_TMPDIR:-/tmp}/memra-optable-cache/"
fi
export NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader | tee "$out/gpu.txt"
if [ "$mode" = "--sanitize" ]; then
  set -- $presets
  budget=480
  case ${1:-} in ''|*[!0-9]*) ;; *) budget=$1; shift ;; esac
  bash bench/gpu_sanitize.sh "$bin" "$out" "$budget" "$@"
  (cd "$out" && tar czf sanitize-logs.tgz sanitize && rm -rf sanitize)
  exit 0
fi
summary=()
if [ "$mode" != "--bench-only" ]; then
  for t in $(cd "$bin" && ls *_test); do
    start=$(date +%s%N)
    "$bin/$t" > "$out/$t.log" 2>&1
    rc=$?
    ms=$(( ($(date +%s%N) - start) / 1000000 ))
    passed=$(grep -c '^\[       OK \]' "$out/$t.log")
    failed=$(grep -c '^\[  FAILED  \] [A-Za-z]' "$out/$t.log")
    skipped=$(grep -c '^\[  SKIPPED \] [A-Za-z]' "$out/$t.log")
    summary+=("$(printf '%-20s rc=%-3s ok=%-3s failed=%-3s skipped=%-3s %6d ms' "$t" "$rc" "$passed" "$failed" "$skipped" "$ms")")
    grep -E '^\s+(device|NVRTC|[0-9]+ nodes|prefill logits|greedy|chunked|q8_0|arena|[0-9]+ kernel modules|qwen35-tiny)' "$out/$t.log" | head -20
  done
  # memra run --backend cuda on the tiny f32 model: greedy ids vs llama.cpp's (tests/cli/run_cuda.sh),
  # then the default (fused) pipeline's speed line.
  if [ -x "$bin/memra" ] && [ -f tests/cli/run_cuda.sh ]; then
    start=$(date +%s%N)
    bash tests/cli/run_cuda.sh "$bin/memra" tests/data > "$out/run_cuda.log" 2>&1
    rc=$?
    ms=$(( ($(date +%s%N) - start) / 1000000 ))
    summary+=("$(printf '%-20s rc=%-3s %s %6d ms' "memra-run-cuda" "$rc" "$(tail -1 "$out/run_cuda.log")" "$ms")")
    "$bin/memra" run tests/data/models/qwen35-tiny-f32.gguf --backend cuda --no-echo -n 32 --ignore-eos --temp 0 \
      --tokens 1,87,107,104,35,116,120,108,102,110 --print-token-ids 2>&1 | grep -E "memra run:|generated ids" | tee -a "$out/run_cuda.log"
  fi
  # The trained demo model: greedy ids on the GPU vs PyTorch's (bf16-rounded weights, f32 file),
  # with graphs + the device loop, all eager, and the host-sampled loop.
  if [ -x "$bin/memra" ] && [ -f .device/demo-f32-bf16r.gguf.xz ]; then
    xz -dc .device/demo-f32-bf16r.gguf.xz > /tmp/demo-f32-bf16r.gguf
    for flags in "" "--cuda-graphs=false" "--decode-chunk=0"; do
      line=$(python3 tools/train_demo/check_greedy.py "$bin/memra" /tmp/demo-f32-bf16r.gguf bf16_weights --backend cuda $flags 2>&1)
      rc=$?
      echo "$line" | tee -a "$out/demo_greedy.log"
      summary+=("$(printf '%-20s rc=%-3s %s' "demo-greedy${flags:+ $flags}" "$rc" "$(echo "$line" | grep -m1 '^greedy')")")
    done
    # The shipped q8_0 model: CUDA (bf16 GEMMs) vs CPU greedy ids, for information.
    for be in cpu cuda; do
      "$bin/memra" run models/demo/qwen35-demo-q8_0.gguf --backend $be -p "And God said unto Moses," -n 64 --temp 0 \
        --ignore-eos --print-token-ids 2>&1 | grep -E "generated ids|memra run: prompt" | sed "s/^/$be: /" >> "$out/demo_greedy.log"
    done
    tail -4 "$out/demo_greedy.log"
  fi
  echo "--- op table ---"
  sed -n '/^op  /,/^op table:/p' "$out/OpTable_test.log" | awk '$NF != "ok" || /^op/' | head -60
  grep '^op table:' "$out/OpTable_test.log"
  grep -h -A3 'Failure' "$out"/*.log | head -40
  # The new-kernel tests and the end-to-end executor test once more under compute-sanitizer
  # memcheck (the op table's ~480 cases take too long under it for one call).
  cs=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
  for t in GemvQuant_test Dequant_test MoeGemm_test CudaExecutor_test Q8Companion_test; do
    [ -x "$bin/$t" ] && [ -n "$cs" ] || continue
    start=$(date +%s%N)
    timeout 300 "$cs" --tool memcheck --error-exitcode 99 --print-limit 20 "$bin/$t" > "$out/memcheck-$t.log" 2>&1
    rc=$?
    ms=$(( ($(date +%s%N) - start) / 1000000 ))
    errors=$(sed -n 's/^========= ERROR SUMMARY: \([0-9]*\) error.*/\1/p' "$out/memcheck-$t.log" | tail -1)
    summary+=("$(printf '%-20s rc=%-3s memcheck errors=%-4s %6d ms' "memcheck $t" "$rc" "${errors:-?}" "$ms")")
  done
  # The tensor-core prefill kernels (flash attention, the chunked delta rule) under memcheck and
  # racecheck: their op-table geometries and the chunk-grid test.
  for tool in memcheck racecheck; do
    [ -x "$bin/OpTable_test" ] && [ -n "$cs" ] || continue
    start=$(date +%s%N)
    timeout 240 "$cs" --tool $tool --error-exitcode 99 --print-limit 10 "$bin/OpTable_test" \
      --gtest_filter='OpTableTest.AttentionGeometries:OpTableTest.KvCacheTypes:OpTableTest.Gemma4Pieces:OpTableTest.ChunkedScanGridLaw' > "$out/$tool-prefill.log" 2>&1
    rc=$?
    ms=$(( ($(date +%s%N) - start) / 1000000 ))
    line=$(grep -m1 -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/$tool-prefill.log")
    summary+=("$(printf '%-20s rc=%-3s %s %6d ms' "$tool prefill" "$rc" "${line:-?}" "$ms")")
  done
fi
if [ "$mode" != "--tests-only" ] && [ -f bench/gpu_bench.sh ]; then
  bash bench/gpu_bench.sh "$bin" "$out" $presets
fi
# The device tool returns at most 8 files: keep the table-bearing ones, pack the rest.
(cd "$out" && tar czf all-logs.tgz --exclude=all-logs.tgz --exclude=OpTable_test.log --exclude=bench.txt . 2>/dev/null &&
  find . -maxdepth 1 -type f ! -name all-logs.tgz ! -name OpTable_test.log ! -name bench.txt ! -name 'profile-*' -delete)
echo "=== memra GPU suite ==="
for s in "${summary[@]}"; do echo "$s"; done
[ -f "$out/bench.txt" ] && cat "$out/bench.txt"
exit 0
