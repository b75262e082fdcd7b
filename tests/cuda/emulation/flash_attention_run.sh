#!/usr/bin/env bash
# Checks kernels/cuda/FlashAttention.cu and FlashAttentionWgmma.cu (its wgmma products on
# MmaEmulation.h's emu_wgmma, by the PTX ISA's swizzled layouts) without a GPU: FlashAttentionEmu.cc compiled once per
# geometry (head dims 64-512, GQA groups 1-8, causal / sliding window, gated; caches of f32, f16
# or bf16 elements, K/V from the bf16 copy or a bf16 cache in place,
# with one or two buffers), each run on the
# host emulation against a float64 reference. A development aid, not part of ctest (one host
# thread per CUDA thread: about a minute on 2 cores).
#
#   bash tests/cuda/emulation/flash_attention_run.sh [OUT_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
out=${1:-$root/build/flash-attention-emu}
mkdir -p "$out"
cxx=${CXX:-c++}
flags="-I$root -O2 -std=c++20 -pthread -w -ffp-contract=off"
# HQ HKV D DV WARPS TOKENS P0 WINDOW GATE STAGES KT VT [WG [KEYS]] (cache element types: 0 f32, 1 f16,
# 2 bf16; WG > 0: FlashAttentionWgmma.cu's kernel with WG warpgroups and KEYS-key tiles (default 64),
# WARPS and STAGES unused)
cases=(
  "16 4 256 256 4 45 30 0 1 2 0 0"
  "8 8 64 64 4 70 0 0 0 2 0 0"
  "8 4 128 128 4 40 70 0 0 1 0 0"
  "16 2 128 128 4 33 5 24 0 2 0 0"
  "4 2 512 256 4 20 10 0 1 1 0 0"
  "16 4 256 256 8 45 130 9 0 2 0 0"
  "16 4 256 256 8 45 100 0 0 2 0 0"
  "16 4 256 256 4 45 30 0 1 1 0 0"
  "16 4 256 256 4 45 30 0 1 2 2 2"
  "8 2 128 128 4 40 70 0 0 2 1 1"
  "4 2 512 256 4 20 10 0 0 1 2 0"
  "16 4 256 256 0 45 30 0 1 2 0 0 2"
  "16 4 256 256 0 150 100 0 0 2 2 2 1"
  "8 8 64 64 0 70 0 0 0 2 0 0 2"
  "16 8 128 128 0 40 70 0 0 1 0 0 3"
  "24 2 128 128 0 50 20 100 1 2 1 1 3"
  "16 2 128 128 0 33 5 24 0 2 0 0 2"
  "8 2 128 128 0 3 0 0 0 2 0 0 1"
  "16 4 256 256 0 45 130 9 0 2 0 0 2"
  "8 2 512 256 0 20 10 0 1 2 2 0 2 32"
  "32 4 512 256 0 40 70 24 1 2 1 1 2 32"
  "4 2 512 256 0 45 30 0 0 2 0 0 1 32"
)
fail=0
for c in "${cases[@]}"; do
  read -r hq hkv d dv w t p0 win gate stages kt vt wg keys <<<"$c"
  wg=${wg:-0}
  keys=${keys:-64}
  bin=$out/fa_${hq}_${hkv}_${d}_${dv}_${w}_${t}_${p0}_${win}_${gate}_${stages}_${kt}_${vt}_${wg}_${keys}
  extra=""
  [ "$wg" -gt 0 ] && extra="-DFA_EMU_WGMMA=1 -DFA_WG=$wg -DFW_BC=$keys" && w=4
  $cxx $flags $extra -DFA_HQ=$hq -DFA_HKV=$hkv -DFA_D=$d -DFA_DV=$dv -DFA_WARPS=$w -DFA_EMU_TOKENS=$t -DFA_EMU_P0=$p0 \
    -DFA_EMU_WINDOW=$win -DFA_EMU_GATE=$gate -DFA_STAGES=$stages -DFA_KT=$kt -DFA_VT=$vt \
    "$root/tests/cuda/emulation/FlashAttentionEmu.cc" -o "$bin"
  "$bin" || fail=1
done
exit $fail
