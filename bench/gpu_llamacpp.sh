#!/usr/bin/env bash
# llama.cpp beside memra on the GPU machine: builds the source bench/llamacpp_source.sh packed
# (CUDA for sm_90 only, llama-bench only; ~5 min on 16 cores) and runs llama-bench on GGUFs with
# the issues' settings (-fa 1, all layers on the GPU). A build is kept while the machine stays warm.
#
#   bash bench/gpu_llamacpp.sh build SRC_TARBALL        -> /tmp/llamacpp/build/bin/llama-bench
#   bash bench/gpu_llamacpp.sh bench GGUF [llama-bench args, default -p 4096 -n 128 -r 2]
set -uo pipefail
mode=${1:?usage: gpu_llamacpp.sh build SRC_TARBALL | bench GGUF [ARGS...]}
dir=/tmp/llamacpp
case $mode in
  build)
    src=${2:?usage: gpu_llamacpp.sh build SRC_TARBALL}
    # A warm machine keeps /tmp between calls: a build of the same tarball is reused.
    sum=$(md5sum < "$src" | cut -c1-32)
    if [ -x "$dir/build/bin/llama-bench" ] && [ "$(cat "$dir/src.md5" 2> /dev/null)" = "$sum" ]; then
      echo "llama.cpp already built from this source: $dir/build/bin/llama-bench"
      exit 0
    fi
    rm -rf "$dir" && mkdir -p "$dir/src"
    tar xJf "$src" -C "$dir/src" || { echo "cannot unpack $src"; exit 1; }
    start=$(date +%s)
    cmake -S "$dir/src" -B "$dir/build" -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
      -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
      -DGGML_NATIVE=ON > "$dir/cmake.log" 2>&1 || { tail -20 "$dir/cmake.log"; exit 1; }
    cmake --build "$dir/build" --target llama-bench -j "$(nproc)" > "$dir/build.log" 2>&1 ||
      { grep -m5 -E "error|Error" "$dir/build.log"; exit 1; }
    echo "$sum" > "$dir/src.md5"
    echo "llama.cpp built in $(($(date +%s) - start)) s: $dir/build/bin/llama-bench"
    ;;
  bench)
    gguf=${2:?usage: gpu_llamacpp.sh bench GGUF [ARGS...]}
    shift 2
    args=("$@")
    [ ${#args[@]} -eq 0 ] && args=(-p 4096 -n 128 -r 2)
    "$dir/build/bin/llama-bench" -m "$gguf" -fa 1 -ngl 99 "${args[@]}" 2> "$dir/bench.err" ||
      { tail -5 "$dir/bench.err"; exit 1; }
    ;;
  *)
    echo "unknown mode $mode (build | bench)"
    exit 1
    ;;
esac
