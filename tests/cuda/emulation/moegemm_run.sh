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
deps="$here/MoeGemmEmuConfig.cc $here/CudaHostEmulation.h"
for f in MoeGemm.cu MoeGemmTile.cuh MoeGemmParams.h DequantBlocks.cuh Common.cuh KernelParams.h; do
  deps="$deps $root/kernels/cuda/$f"
done
# The test binary's link line, with its object replaced by ours.
link=$(ninja -C "$build" -t commands MoeGemm_test | tail -1 | sed 's/^: && //; s/ && :$//')
link=${link/tests\/CMakeFiles\/MoeGemm_test.dir\/cuda\/MoeGemm_test.cc.o/}
link=${link/-o tests\/MoeGemm_test/}
link=${link//\/usr\/lib\/x86_64-linux-gnu\/libgtest_main.a/}
cd "$build"
$cxx $flags -c "$here/MoeGemmEmuMain.cc" -o "$out/main.o" &
$cxx $flags -c "$here/MoeGemmEmuLaunch.cc" -o "$out/launch.o"
wait $!
objs="$out/main.o $out/launch.o"
${link/-DNDEBUG/-DNDEBUG $objs} -pthread -o "$out/emu-list"
"$out/emu-list" --list | sort -u > "$out/keys.txt"
n=0
pids=()
for key in $(grep '^MoeGemm\.cu<' "$out/keys.txt"); do
  defs=$(echo "$key" | sed 's/^[^<]*<//; s/>$//' | tr ',' '\n' | sed 's/^/-D/' | tr '\n' ' ')
  id=$(echo "$key $flags" | md5sum | cut -c1-12)
  o=$out/cfg_$id.o
  objs="$objs $o"
  n=$((n + 1))
  [ -f "$o" ] && [ -z "$(find $deps -newer "$o")" ] && continue
  # Written under a temporary name, so a failed or interrupted compile leaves no object behind.
  $cxx $flags $defs "-DMG_EMU_KEY=\"$key\"" -DEMU_ID=k$id -c "$here/MoeGemmEmuConfig.cc" -o "$o.tmp" &&
    mv "$o.tmp" "$o" &
  pids+=($!)
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do sleep 0.2; done
done
for p in "${pids[@]}"; do wait "$p"; done
${link/-DNDEBUG/-DNDEBUG $objs} -pthread -o "$out/emu"
echo "moegemm-emu: $n modules"
"$out/emu" $filter
