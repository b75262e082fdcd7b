#!/usr/bin/env bash
# Checks kernels/cuda/Gemv.cu's tokens-per-launch (GEMV_T, the exact decode class's 16-bit GEMVs)
# without a GPU: GemvEmuMain.cc selects each case through the units (decode class exact), runs the
# launches in the host emulation (CudaHostEmulation.h) against an f64 reference, and checks that
# every token's row of a launch of T tokens equals, bit for bit, the one-token launch on that token
# alone. A development aid, not part of ctest. GemvEmuConfig.cc is compiled once per module key
# (objects kept in BUILD_DIR/gemv-emu).
#
#   bash tests/cuda/emulation/gemv_run.sh [BUILD_DIR]   # BUILD_DIR (default build) must have MoeGemm_test built
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
out=$build/gemv-emu
mkdir -p "$out"
here=$root/tests/cuda/emulation
flags="-I$root -isystem /usr/lib/llvm-14/include -O1 -std=c++20 -pthread -w -ffp-contract=off"
cxx=${CXX:-c++}
command -v ccache >/dev/null && cxx="ccache $cxx"
jobs=${GV_EMU_JOBS:-$(nproc)}
deps="$here/CudaHostEmulation.h"
for f in Gemv.cu GemvParams.h Common.cuh KernelParams.h; do deps="$deps $root/kernels/cuda/$f"; done
source "$here/emu_modules.sh"
link=$(emu_link MoeGemm_test)
cd "$build"
$cxx $flags -c "$here/GemvEmuMain.cc" -o "$out/main.o" &
$cxx $flags -c "$here/GemvQuantEmuLaunch.cc" -o "$out/launch.o"
wait $!
objs="$out/main.o $out/launch.o"
${link/-DNDEBUG/-DNDEBUG $objs} -pthread -o "$out/emu-list"
"$out/emu-list" --list | sort -u > "$out/keys.txt"
key_flags() { echo "-DGV_EMU_KEY=\"$1\""; }
if grep -v -E '^Gemv\.cu<' "$out/keys.txt"; then
  echo "gemv-emu: no emulation for the modules above" >&2
  exit 1
fi
emu_compile_keys "$out/keys.txt" "$here/GemvEmuConfig.cc" "$deps" key_flags
${link/-DNDEBUG/-DNDEBUG $objs $emu_objs} -pthread -o "$out/emu"
echo "gemv-emu: $emu_modules modules"
"$out/emu"
