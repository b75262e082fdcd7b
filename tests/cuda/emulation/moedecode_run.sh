#!/usr/bin/env bash
# Checks the MoE decode path (kernels/cuda/Moe.cc's GEMV units over GemvQuant.cu and Moe.cu)
# without a GPU: MoeDecodeEmuMain.cc runs each case's moe_experts / moe_ffn through the unit's
# Select and Bind, at a tensor-parallel rank where the case splits the experts, and the launches in
# the host emulation (CudaHostEmulation.h), against an f64 reference. A development aid, not part of
# ctest (one host thread per CUDA thread: a few minutes on 2 cores). The binary lists the module
# keys its cases launch (--list); MoeDecodeEmuConfig.cc is compiled once per key (objects kept in
# BUILD_DIR/moedecode-emu, rebuilt when a source they include changes; MD_EMU_JOBS compiles at
# once, default nproc).
#
#   bash tests/cuda/emulation/moedecode_run.sh [BUILD_DIR] [FILTER]   # BUILD_DIR (default build) must
#                                                                    # have MoeGemm_test built
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
filter=${2:-}
out=$build/moedecode-emu
mkdir -p "$out"
here=$root/tests/cuda/emulation
flags="-I$root -isystem /usr/lib/llvm-14/include -O1 -std=c++20 -pthread -w -ffp-contract=off"
cxx=${CXX:-c++}
command -v ccache >/dev/null && cxx="ccache $cxx"
jobs=${MD_EMU_JOBS:-$(nproc)}
deps="$here/CudaHostEmulation.h"
for f in GemvQuant.cu GemvQuantParams.h Moe.cu MoeParams.h DequantBlocks.cuh Common.cuh KernelParams.h; do
  deps="$deps $root/kernels/cuda/$f"
done
source "$here/emu_modules.sh"
link=$(emu_link MoeGemm_test)
cd "$build"
$cxx $flags -c "$here/MoeDecodeEmuMain.cc" -o "$out/main.o" &
$cxx $flags -c "$here/MoeGemmEmuLaunch.cc" -o "$out/launch.o"
wait $!
objs="$out/main.o $out/launch.o"
${link/-DNDEBUG/-DNDEBUG $objs} -pthread -o "$out/emu-list"
"$out/emu-list" --list | sort -u > "$out/keys.txt"
# Which file the key's module is, and the key itself.
key_flags() {
  case "$1" in
    GemvQuant.cu\<*) echo "-DMD_GEMVQ=1 -DMD_EMU_KEY=\"$1\"" ;;
    Moe.cu\<*) echo "-DMD_MOE=1 -DMD_EMU_KEY=\"$1\"" ;;
  esac
}
if grep -v -E '^(GemvQuant|Moe)\.cu<' "$out/keys.txt"; then
  echo "moedecode-emu: no emulation for the modules above" >&2
  exit 1
fi
emu_compile_keys "$out/keys.txt" "$here/MoeDecodeEmuConfig.cc" "$deps" key_flags
${link/-DNDEBUG/-DNDEBUG $objs $emu_objs} -pthread -o "$out/emu"
echo "moedecode-emu: $emu_modules modules"
"$out/emu" $filter
