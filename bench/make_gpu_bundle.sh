#!/usr/bin/env bash
# Builds the binaries the GPU suite needs and packs them into one small tarball to carry to the
# GPU machine (which has the CUDA driver, NVRTC and cuBLASLt but no abseil/LLVM/ICU: those are
# linked statically; the CUDA libraries are loaded at run time).
#
#   bench/make_gpu_bundle.sh [BUILD_DIR] [--no-precompile]      (default build-gpu; a Release build)
#   -> BUILD_DIR/gpu-bundle.tar.xz   (memra, memra-kernel-bench, tests/cuda/*_test, stripped, --gc-sections;
#      optable-cache/: the op table's cubins, compiled here by `OpTable_test --precompile-kernels`, which
#      bench/gpu_suite.sh puts where the table looks, so the device call does not spend its minutes in
#      NVRTC; ~8 minutes on 2 cores, --no-precompile leaves it out)
#
# Then carry it: run(carry=["BUILD_DIR/gpu-bundle.tar.xz"], command="bash bench/gpu_suite.sh BUILD_DIR/gpu-bundle.tar.xz")
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build-gpu
precompile=1
for a in "$@"; do
  case $a in
    --no-precompile) precompile=0 ;;
    -*) echo "make_gpu_bundle.sh: unknown option $a" >&2; exit 2 ;;
    *) build=$a ;;
  esac
done
case $build in /*) ;; *) build=$root/$build ;; esac
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DMEMRA_BUILD_FUZZERS=OFF \
    -DCMAKE_CXX_FLAGS="-ffunction-sections -fdata-sections" >/dev/null
fi
# Unreferenced archive members (the tokenizer's ICU, 30 MB of data) drop out at link time.
cmake "$build" -DCMAKE_EXE_LINKER_FLAGS="-Wl,--gc-sections" >/dev/null
tests=$(cd "$root/tests/cuda" && ls *_test.cc | sed 's/\.cc$//')
cmake --build "$build" --target memra memra-kernel-bench $tests -- -j"$(nproc)"
stage=$build/gpu-bundle
rm -rf "$stage" && mkdir -p "$stage"
objcopy --strip-all "$build/tools/memra" "$stage/memra"
objcopy --strip-all "$build/bench/memra-kernel-bench" "$stage/memra-kernel-bench"
for t in $tests; do objcopy --strip-all "$build/tests/$t" "$stage/$t"; done
if [ "$precompile" = 1 ]; then
  "$build/tests/OpTable_test" --precompile-kernels="$stage/optable-cache" > "$build/optable-precompile.log" 2>&1 ||
    { tail -20 "$build/optable-precompile.log"; echo "make_gpu_bundle.sh: the op table's precompile failed" >&2; exit 1; }
  grep -m1 'precompiled:' "$build/optable-precompile.log"
fi
# One xz stream with a dictionary wider than a binary: the test binaries share most of their
# (statically linked) bytes, so the bundle packs to ~13 MB instead of ~47 MB and fits a device call's
# 64 MiB beside the working tree.
tar cf - -C "$stage" . | xz --lzma2=preset=9,dict=192MiB -T1 > "$build/gpu-bundle.tar.xz"
ls -l "$stage" | grep -v '^d' | awk 'NR>1 {printf "  %-24s %6.1f MB\n", $9, $5/1e6}'
echo "bundle: $build/gpu-bundle.tar.xz $(stat -c %s "$build/gpu-bundle.tar.xz" | awk '{printf "%.1f MB", $1/1e6}')"
