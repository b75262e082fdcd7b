#!/usr/bin/env bash
# Checks kernels/cuda/GemvQuant.cu without a GPU: the host emulation (CudaHostEmulation.h) runs the
# kernels through the units' Select/Bind on every format, both activation paths, T up to 3, the
# fused forms, partial chunks and narrow copies (iq4_nl / iq4_xs at T = 1, 2, 5, 8), streamed items
# (GQ_STREAM: run with the blocks in both orders, equal bit for bit, the counters zero after), x
# loaded before the weights' wait (GQ_XPRE: equal bit for bit to its twin without), against the f64
# reference. Each line ends with "bits", a hash of the outputs: a change meant to keep the sums bit for
# bit is checked by diffing two runs with the same GQ_EMU_FORMATS (the cases seed their data by index).
# A development aid (not part of ctest: ~160 modules take minutes to compile).
#
#   bash tests/cuda/emulation/run.sh [BUILD_DIR]   # BUILD_DIR (default build) must have GemvQuant_test built
#   GQ_EMU_FORMATS=iq4_nl,iq4_xs bash tests/cuda/emulation/run.sh   # only cases of these formats
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
out=$build/gemvq-emu
mkdir -p "$out"
here=$root/tests/cuda/emulation
flags="-I$root -isystem /usr/lib/llvm-14/include -O1 -std=c++20 -pthread -w"
cxx=${CXX:-c++}
command -v ccache >/dev/null && cxx="ccache $cxx"
# The test binary's link line, with its object replaced by ours.
link=$(ninja -C "$build" -t commands GemvQuant_test | tail -1 | sed 's/^: && //; s/ && :$//')
link=${link/tests\/CMakeFiles\/GemvQuant_test.dir\/cuda\/GemvQuant_test.cc.o/}
link=${link/-o tests\/GemvQuant_test/}
link=${link//\/usr\/lib\/x86_64-linux-gnu\/libgtest_main.a/}
cd "$build"
$cxx $flags -c "$here/GemvQuantEmuMain.cc" -o "$out/main.o"
$cxx $flags -c "$here/GemvQuantEmuLaunch.cc" -o "$out/launch.o"
objs="$out/main.o $out/launch.o"
${link/-DNDEBUG/-DNDEBUG $objs} -pthread -o "$out/emu-list"
"$out/emu-list" --list | sort -u > "$out/keys.txt"
i=0
jobs=$(nproc)
for key in $(cat "$out/keys.txt"); do
  defs=$(echo "$key" | sed 's/GemvQuant.cu<//; s/>//' | tr ',' '\n' | sed 's/^/-D/' | tr '\n' ' ')
  id=$(echo "$key" | md5sum | cut -c1-12)
  o=$out/cfg_$id.o
  objs="$objs $o"
  if [ ! -f "$o" ] || [ "$root/kernels/cuda/GemvQuant.cu" -nt "$o" ] || [ "$here/CudaHostEmulation.h" -nt "$o" ] ||
    [ "$here/GemvQuantEmuConfig.cc" -nt "$o" ]; then
    $cxx $flags $defs -DEMU_ID=k$id -c "$here/GemvQuantEmuConfig.cc" -o "$o" &
    while [ "$(jobs -r | wc -l)" -ge "$jobs" ]; do sleep 0.2; done
  fi
  i=$((i + 1))
done
wait
${link/-DNDEBUG/-DNDEBUG $objs} -pthread -o "$out/emu"
echo "gemvq-emu: $i modules"
"$out/emu"
