#!/usr/bin/env bash
# Issue 17's decode-at-depth measurements in one device call: the op table's KV-cache rows (f16 /
# bf16 / q8_0 caches, split-KV decode, the gated step, the attention geometries, the paged pool)
# and compute-sanitizer over them, then `memra bench` tg32 at depth 0 and 32,768 for each KV cache
# type pair on the 9B (bf16 and q8_0 weights) and a per-kernel profile of one decode at depth 32,768.
#
#   bash bench/gpu_decode.sh BUNDLE [--bench-only] [KT/VT ...]   (default pairs: f32/f32 f16/f16 bf16/bf16
#                                                                 q8_0/q8_0 q8_0/f16; q8_0 weights: f16/f16 q8_0/q8_0)
set -uo pipefail
bundle=${1:?usage: gpu_decode.sh BUNDLE [--bench-only] [KT/VT ...]}
shift
bench_only=0
[ "${1:-}" = "--bench-only" ] && { bench_only=1; shift; }
pairs_bf16=${*:-f32/f32 f16/f16 bf16/bf16 q8_0/q8_0 q8_0/f16}
pairs_q8=${*:-f16/f16 q8_0/q8_0}
out=${OUT:-/tmp/memra-decode}
bin=/tmp/memra-decode-bin
models=/tmp/memra-models
mkdir -p "$out" "$bin" "$models"
tar xJf "$bundle" -C "$bin" || { echo "cannot unpack $bundle"; exit 1; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
summary=()
if [ "$bench_only" = 0 ]; then
  filter='OpTableTest.KvCacheTypes:OpTableTest.AttentionPieces:OpTableTest.AttentionGeometries:OpTableTest.Sequences:OpTableTest.GatedAttentionStep'
  "$bin/OpTable_test" --gtest_filter="$filter" > "$out/optable.log" 2>&1
  summary+=("optable (kv cache types, attention, sequences): rc=$? $(grep '^op table:' "$out/optable.log")")
  sed -n '/^op  /,/^op table:/p' "$out/optable.log" | grep -E "^op|attention|kv_append" | awk '$NF != "ok" || /^op/ || /q8_0/' | head -40
  grep -A4 'Failure' "$out/optable.log" | head -30
  cs=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
  if [ -n "$cs" ]; then
    for tool in memcheck racecheck; do
      timeout 200 "$cs" --tool $tool --error-exitcode 99 --print-limit 10 "$bin/OpTable_test" \
        --gtest_filter='OpTableTest.KvCacheTypes' > "$out/$tool.log" 2>&1
      summary+=("$tool kv cache types: rc=$? $(grep -m1 -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/$tool.log")")
    done
  fi
fi
for dtype in bf16 q8_0; do
  m=$models/qwen35-9b-$dtype.gguf
  [ -f "$m" ] || "$bin/memra" gen --preset 9b --dtype "$dtype" --quiet -o "$m" > /dev/null 2>&1
  pairs=$pairs_bf16
  [ "$dtype" = q8_0 ] && pairs=$pairs_q8
  for pair in $pairs; do
    kt=${pair%/*} vt=${pair#*/} ct=${kt}-${vt}
    "$bin/memra" bench "$m" -p 0 -n 32 -d 0,32768 -r 2 -ctk "$kt" -ctv "$vt" --kernel-cache /tmp/memra-cache \
      > "$out/bench-$dtype-$ct.md" 2> "$out/bench-$dtype-$ct.err"
    summary+=("bench 9b $dtype kv $ct: rc=$?")
    grep -E "tg" "$out/bench-$dtype-$ct.md" | sed "s/^/9b $dtype kv $ct /"
    tail -3 "$out/bench-$dtype-$ct.err" | grep -i "error" | head -3
  done
done
"$bin/memra" bench "$models/qwen35-9b-bf16.gguf" -p 0 -n 8 -d 32768 -r 1 -ctk q8_0 -ctv q8_0 --profile \
  --kernel-cache /tmp/memra-cache > /dev/null 2> "$out/profile-decode-32k.txt"
echo "--- profile 9b bf16 tg8 at depth 32768, q8_0 KV ---"
grep -v "upload weights" "$out/profile-decode-32k.txt" | head -40
echo "=== issue 17 decode-at-depth suite ==="
for s in "${summary[@]}"; do echo "$s"; done
for f in "$out"/bench-*.md; do grep -E "tg" "$f" | sed "s|^|$(basename "$f" .md) |"; done
