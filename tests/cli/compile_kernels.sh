#!/usr/bin/env bash
# memra compile --arch sm_90 --report on the tiny fixture: the CUDA pipeline runs select-kernels
# (kernel launches and modules per bucket in the report), the plan's kernel table (version 1)
# holds one cubin per kernel module with the NVRTC time; --arch cpu runs the pipeline without
# select-kernels and writes an empty version-0 table. Needs NVRTC (no GPU): skipped without it.
# Args: MEMRA DATA_DIR SHARED_DIR.
set -euo pipefail
memra=$1
data=$2
model=$data/models/qwen35-tiny-f32.gguf
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# 1. --arch cpu: no select-kernels, an empty table.
"$memra" compile "$model" -o "$tmp/cpu.plan" --arch cpu --buckets 16 --report >"$tmp/cpu.txt" 2>&1 \
  || { cat "$tmp/cpu.txt"; fail "compile --arch cpu failed"; }
grep -q "kernel table: version 0, empty" "$tmp/cpu.txt" || { cat "$tmp/cpu.txt"; fail "cpu: kernel table line"; }
grep -a "^pipeline = " "$tmp/cpu.plan" | grep -q "select-kernels" && fail "cpu pipeline runs select-kernels"
grep -q "^@decode *1 .* 0 *0 *0 B " "$tmp/cpu.txt" || { cat "$tmp/cpu.txt"; fail "cpu: @decode has kernels"; }

# 2. --arch sm_90: select-kernels + the kernel table.
if ! "$memra" compile "$model" -o "$tmp/gpu.plan" --arch sm_90 --buckets 16 --report >"$tmp/gpu.txt" 2>&1; then
  if grep -qi "nvrtc" "$tmp/gpu.txt"; then echo "SKIP: NVRTC not available: $(cat "$tmp/gpu.txt")"; exit 0; fi
  cat "$tmp/gpu.txt"; fail "compile --arch sm_90 failed"
fi
cat "$tmp/gpu.txt"
grep -a "^pipeline = " "$tmp/gpu.plan" | grep -q "bucket-shapes{[^}]*},fuse-delta-net-inputs,select-kernels,plan-memory" \
  || fail "sm_90 pipeline lacks fuse-delta-net-inputs and select-kernels between bucket-shapes and plan-memory"
# Rows: function bucket ops-before ops-after segments captured eager launches modules cubins ...
row() { grep "^@$1 " "$tmp/gpu.txt" || fail "no @$1 row"; }
for f in decode prefill_t16; do
  read -r _ _ _ _ _ _ _ launches modules cubins unit _ <<<"$(row $f)"
  [ "$launches" -gt 20 ] || fail "@$f: $launches launches"  # tiny: 4 layers, ~7 launches each
  [ "$modules" -gt 5 ] || fail "@$f: $modules modules"
  [ "$unit" = "KiB" ] || [ "$unit" = "MiB" ] || fail "@$f: cubins $cubins $unit"
done
# The symbolic @prefill is left alone.
read -r _ _ _ _ _ _ _ launches _ <<<"$(row prefill)"
[ "$launches" = 0 ] || fail "@prefill (symbolic) got $launches launches"
grep -Eq "kernel table: version 1, [0-9]+ kernel modules, [0-9.]+ (KiB|MiB) of cubins for sm_90; NVRTC: [0-9]+ compiled in [0-9.]+ s" \
  "$tmp/gpu.txt" || fail "sm_90: kernel table line"
[ "$(grep -ac '^\[cubin\] arch=sm_90 ' "$tmp/gpu.plan")" -gt 5 ] || fail "no cubins in the plan"

# 3. An unknown pass option value is refused by select-kernels.
if "$memra" compile "$model" -o "$tmp/x.plan" --passes='bucket-shapes{ladder=16},select-kernels{arch=gfx90}' \
  2>"$tmp/e.txt"; then fail "accepted select-kernels{arch=gfx90}"; fi
grep -q "is not a CUDA target" "$tmp/e.txt" || { cat "$tmp/e.txt"; fail "bad arch message"; }
echo "compile_kernels: ok"
