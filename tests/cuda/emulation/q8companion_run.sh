#!/usr/bin/env bash
# Checks the q8 companions the producers write (kernels/cuda/Q8Companion.h) without a GPU:
# Q8CompanionEmu.cc compiled once per case (Norm.cu's rms_norm / add_rms_norm / gated_rms_norm in
# warp rows and block rows (256 and 1,024 threads), FusedRows.cu's row and pointwise kernels; rows past the call; a grid
# smaller than the work), each run on the host emulation against gemv_q_quantize_x's layout of
# its own f32 rows, byte for byte. A development aid (~10 s); ctest runs seven of these cases
# (emulation/Q8CompanionEmu_*).
#
#   bash tests/cuda/emulation/q8companion_run.sh [OUT_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
out=${1:-$root/build/q8companion-emu}
mkdir -p "$out"
cxx=${CXX:-c++}
flags="-I$root -O1 -std=c++20 -pthread -w -ffp-contract=off"
fr_norm_add="-DFR_NIN=3 -DFR_ACT=5 -DFR_SCALAR=0 -DFR_I0=258 -DFR_C0=897988541 -DFR_I1=81923 -DFR_C1=0 -DFR_Y0=64 -DFR_Y1=65 -DFR_Q8Y=1"
fr_add="-DFR_NIN=2 -DFR_ACT=3 -DFR_SCALAR=0 -DFR_I0=65794 -DFR_C0=0 -DFR_Y0=64 -DFR_Q8Y=0 -DFR_POINTWISE=1"
# KIND COLS ROWS NROWS BLOCK GRID EXTRA-DEFINES
cases=(
  "1 64 1 1 256 1 -DNORM_COLS=64 -DNORM_BLOCK=256 -DNORM_WARP_ROWS=1"
  "1 256 3 2 256 1 -DNORM_COLS=256 -DNORM_BLOCK=256 -DNORM_WARP_ROWS=1"
  "1 2816 2 2 256 2 -DNORM_COLS=2816 -DNORM_BLOCK=256"
  "2 4096 1 1 256 1 -DNORM_COLS=4096 -DNORM_BLOCK=256"
  "2 4096 1 1 1024 1 -DNORM_COLS=4096 -DNORM_BLOCK=1024"
  "1 2816 2 2 1024 2 -DNORM_COLS=2816 -DNORM_BLOCK=1024"
  "2 128 8 5 256 1 -DNORM_COLS=128 -DNORM_BLOCK=256 -DNORM_WARP_ROWS=1"
  "3 128 4 4 256 1 -DNORM_COLS=128 -DNORM_BLOCK=256 -DNORM_WARP_ROWS=1"
  "4 2816 1 1 1024 1 -DFR_COLS=2816 -DFR_BLOCK=1024 $fr_norm_add"
  "4 96 3 3 32 3 -DFR_COLS=96 -DFR_BLOCK=32 $fr_norm_add"
  "4 640 4 3 256 2 -DFR_COLS=640 -DFR_BLOCK=256 $fr_norm_add"
  "5 64 3 2 256 1 -DFR_COLS=64 $fr_add"
  "5 320 4 4 256 1 -DFR_COLS=320 $fr_add"
)
fail=0
i=0
for c in "${cases[@]}"; do
  read -r kind cols rows nrows block grid extra <<<"$c"
  off=$(((rows * cols * 4 + 255) / 256 * 256))
  bin=$out/q8e_$i
  $cxx $flags -DQ8E_KIND=$kind -DQ8E_COLS=$cols -DQ8E_ROWS=$rows -DQ8E_NROWS=$nrows -DQ8E_BLOCK=$block \
    -DQ8E_GRID=$grid -DMEMRA_Q8X_OFF=$off -DMEMRA_Q8X_ELEMS=$((rows * cols)) $extra "$root/tests/cuda/emulation/Q8CompanionEmu.cc" \
    -o "$bin" &
  i=$((i + 1))
  while [ "$(jobs -r | wc -l)" -ge "$(nproc)" ]; do sleep 0.2; done
done
wait
for ((j = 0; j < i; j++)); do "$out/q8e_$j" || fail=1; done
exit $fail
