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
deps="$here/MoeDecodeEmuConfig.cc $here/CudaHostEmulation.h"
for f in GemvQuant.cu GemvQuantParams.h Moe.cu MoeParams.h DequantBlocks.cuh Common.cuh KernelParams.h; do
  deps="$deps $root/kernels/cuda/$f"
done
# A test binary's link line (memra's libraries), with its object replaced by ours.
link=$(ninja -C "$build" -t commands MoeGemm_test | tail -1 | sed 's/^: && //; s/ && :$//')
link=${link/tests\/CMakeFiles\/MoeGemm_test.dir\/cuda\/MoeGemm_test.cc.o/}
link=${link/-o tests\/MoeGemm_test/}
link=${link//\/usr\/lib\/x86_64-linux-gnu\/libgtest_main.a/}
cd "$build"
$cxx $flags -c "$here/MoeDecodeEmuMain.cc" -o "$out/main.o" &
$cxx $flags -c "$here/MoeGemmEmuLaunch.cc" -o "$out/launch.o"
wait $!
objs="$out/main.o $out/launch.o"
${link/-DNDEBUG/-DNDEBUG $objs} -pthread -o "$out/emu-list"
"$out/emu-list" --list | sort -u > "$out/keys.txt"
n=0
pids=()
for key in $(cat "$out/keys.txt"); do
  case "$key" in
    GemvQuant.cu\<*) file=-DMD_GEMVQ=1 ;;
    Moe.cu\<*) file=-DMD_MOE=1 ;;
    *) echo "moedecode-emu: no emulation for $key" >&2; exit 1 ;;
  esac
  defs=$(echo "$key" | sed 's/^[^<]*<//; s/>$//' | tr ',' '\n' | grep -v '^$' | sed 's/^/-D/' | tr '\n' ' ')
  id=$(echo "$key $flags" | md5sum | cut -c1-12)
  o=$out/cfg_$id.o
  objs="$objs $o"
  n=$((n + 1))
  [ -f "$o" ] && [ -z "$(find $deps -newer "$o")" ] && continue
  # Written under a temporary name, so a failed or interrupted compile leaves no object behind.
  $cxx $flags $defs $file "-DMD_EMU_KEY=\"$key\"" -DEMU_ID=k$id -c "$here/MoeDecodeEmuConfig.cc" -o "$o.tmp" &&
    mv "$o.tmp" "$o" &
  pids+=($!)
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do sleep 0.2; done
done
for p in "${pids[@]}"; do wait "$p"; done
${link/-DNDEBUG/-DNDEBUG $objs} -pthread -o "$out/emu"
echo "moedecode-emu: $n modules"
"$out/emu" $filter
