#!/usr/bin/env bash
# Checks kernels/cuda/DeltaNetChunked.cu without a GPU: DeltaNetChunkedEmu.cc compiled once per
# geometry (the 9B's head dims, a small one; with and without the l2 norms; calls of partial
# chunks; f32 and the bf16 tensor-core pass), each run on the host emulation against the sequential rule in float64. A development
# aid, not part of ctest.
#
#   bash tests/cuda/emulation/deltanet_chunked_run.sh [OUT_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
out=${1:-$root/build/deltanet-chunked-emu}
mkdir -p "$out"
cxx=${CXX:-c++}
flags="-I$root -O1 -std=c++20 -pthread -w -ffp-contract=off"
# HK HV DK DV COLS L2 T1 T2 [BF16]
cases=(
  "2 4 32 32 16 1 150 64 1"
  "2 2 128 64 16 1 100 64 1"
  "2 4 128 128 32 1 300 128 1"
  "1 1 128 128 32 1 64 77 1"
  "2 4 32 32 16 1 150 64"
  "2 4 128 128 16 1 100 64"
  "1 2 128 128 32 1 70 64"
  "2 2 64 32 32 0 40 100"
)
fail=0
for c in "${cases[@]}"; do
  read -r hk hv dk dv cols l2 t1 t2 bf16 <<<"$c"
  bf16=${bf16:-0}
  bin=$out/gdn_${hk}_${hv}_${dk}_${dv}_${cols}_${l2}_${t1}_${t2}_${bf16}
  $cxx $flags -DGDN_HK=$hk -DGDN_HV=$hv -DGDN_DK=$dk -DGDN_DV=$dv -DGDN_COLS=$cols -DGDN_L2=$l2 -DGDN_EMU_T1=$t1 \
    -DGDN_EMU_T2=$t2 -DGDN_BF16=$bf16 "$root/tests/cuda/emulation/DeltaNetChunkedEmu.cc" -o "$bin"
  "$bin" || fail=1
done
exit $fail
