#!/usr/bin/env bash
# Checks kernels/cuda/MoeGemm.cu without a GPU: the host emulation (CudaHostEmulation.h +
# MoeGemmEmuConfig.cc) runs moe_sort and moe_gemm through MoeGemm.h's launches and binds on small
# shapes of every storage against the f64 reference (MoeGemmEmuMain.cc). A development aid, not
# part of ctest (one host thread per CUDA thread: a few minutes on 2 cores). The binary lists the
# module keys its cases launch (--list); MoeGemmEmuConfig.cc is compiled once per key (objects kept
# in BUILD_DIR/moegemm-emu, rebuilt when the kernel or emulation sources change; MG_EMU_JOBS
# compiles at once, default nproc).
#
#   bash tests/cuda/emulation/moegemm_run.sh [BUILD_DIR] [FILTER]   # BUILD_DIR (default build) must
#                                                                  # have MoeGemm_test built
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
filter=${2:-}
out=$build/moegemm-emu
mkdir -p "$out"
here=$root/tests/cuda/emulation
flags="-I$root -isystem /usr/lib/llvm-14/include -O1 -std=c++20 -pthread -w -ffp-contract=off"
cxx=${CXX:-c++}
command -v ccache >/dev/null && cxx="ccache $cxx"
jobs=${MG_EMU_JOBS:-$(nproc)}
# What a module object depends on besides its key (the flags go into its name).
deps="$here/CudaHostEmulation.h"
for f in MoeGemm.cu MoeGemmTile.cuh MoeGemmParams.h DequantBlocks.cuh Common.cuh KernelParams.h; do
  deps="$deps $root/kernels/cuda/$f"
done
source "$here/emu_modules.sh"
link=$(emu_link MoeGemm_test)
cd "$build"
$cxx $flags -c "$here/MoeGemmEmuMain.cc" -o "$out/main.o" &
$cxx $flags -c "$here/MoeGemmEmuLaunch.cc" -o "$out/launch.o"
wait $!
objs="$out/main.o $out/launch.o"
${link/-DNDEBUG/-DNDEBUG $objs} -pthread -o "$out/emu-list"
"$out/emu-list" --list | grep '^MoeGemm\.cu<' | sort -u > "$out/keys.txt"
key_flags() { echo "-DMG_EMU_KEY=\"$1\""; }
emu_compile_keys "$out/keys.txt" "$here/MoeGemmEmuConfig.cc" "$deps" key_flags
${link/-DNDEBUG/-DNDEBUG $objs $emu_objs} -pthread -o "$out/emu"
echo "moegemm-emu: $emu_modules modules"
"$out/emu" $filter
