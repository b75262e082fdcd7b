#!/usr/bin/env bash
# Checks kernels/cuda/MoeGemm.cu without a GPU: the host emulation (CudaHostEmulation.h +
# MoeGemmEmuKernels.cc) runs moe_sort and moe_gemm through MoeGemm.h's launches and binds on small
# shapes of every storage against the f64 reference (MoeGemmEmuMain.cc). A development aid, not
# part of ctest (one host thread per CUDA thread: a few minutes on 2 cores).
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
# The test binary's link line, with its object replaced by ours.
link=$(ninja -C "$build" -t commands MoeGemm_test | tail -1 | sed 's/^: && //; s/ && :$//')
link=${link/tests\/CMakeFiles\/MoeGemm_test.dir\/cuda\/MoeGemm_test.cc.o/}
link=${link/-o tests\/MoeGemm_test/}
link=${link//\/usr\/lib\/x86_64-linux-gnu\/libgtest_main.a/}
cd "$build"
$cxx $flags -c "$here/MoeGemmEmuMain.cc" -o "$out/main.o" &
$cxx $flags -c "$here/MoeGemmEmuKernels.cc" -o "$out/kernels.o"
wait
${link/-DNDEBUG/-DNDEBUG $out/main.o $out/kernels.o} -pthread -o "$out/emu"
"$out/emu" $filter
